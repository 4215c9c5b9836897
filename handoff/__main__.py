from handoff.cli.entry import main

main()
