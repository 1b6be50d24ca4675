"""`python -m fitspeed`: the command line, as the `fitspeed` entry point runs it."""

from fitspeed.cli import main

main()
