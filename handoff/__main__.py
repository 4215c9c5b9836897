from handoff.cli import main

main()
