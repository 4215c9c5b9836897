from handoff.entry import main

main()
