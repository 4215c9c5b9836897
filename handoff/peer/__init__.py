"""The peer programs handoff ships: the scripted agent that plays a coding CLI in the demo and
the tests. A peer program runs in a pane as its own process; nothing in handoff imports it."""
