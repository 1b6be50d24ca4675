from fitspeed.cli import main

main()
