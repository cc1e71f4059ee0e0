from syncrep_lab.cli import main

main()
