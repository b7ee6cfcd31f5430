from lakesweep.cli.main import main

main()
