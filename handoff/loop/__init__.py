"""The ticket loop the orchestrator runs: its state machine (orchestrator), its judgement of the
peers (monitor), the verification gate, telling the person (notify), what the peers spent
(usage), the final report (summary), and one ticket's resources put together (workspace)."""
