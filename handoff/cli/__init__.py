"""The command line: `handoff`'s first step (entry), the typer app (app) and its commands by
family (tickets, looking, finishing, upkeep, elsewhere), the peers' lean `handoff submit`
(filing), the live board's screen (board_app), and the crash report."""
