"""`python -m fitspeed.trial SPEC.json`: run one trial and print its record."""

import sys

from fitspeed.trial.protocol import main

if __name__ == "__main__":
    sys.exit(main(sys.argv))
