"""The command line: `handoff`'s first step (entry), its commands (app), the peers' lean
`handoff submit` (filing), the live board's screen (board_app), and the crash report."""
