"""`python -m fitspeed.trial SPEC.json`: run one trial and print its record.

`python -m fitspeed.trial --fork-server BACKEND`: serve trials forked from one
import of keras (`fitspeed.trial.fork_server`).
"""

import sys

if __name__ == "__main__":
    if sys.argv[1:2] == ["--fork-server"]:
        from fitspeed.trial.fork_server import serve

        sys.exit(serve(sys.argv[2]))
    from fitspeed.trial.protocol import main

    sys.exit(main(sys.argv))
