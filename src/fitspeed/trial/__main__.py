"""`python -m fitspeed.trial SPEC.json`: run one trial and print its record.

`python -m fitspeed.trial --fork-server BACKEND [--socket PATH IDLE_S]`: serve
trials forked from one import of keras (`fitspeed.trial.fork_server`), to
the parent on stdin, or to any process on the Unix socket PATH.

The fault handler is on from the first line: a trial killed by a signal
(SIGSEGV, SIGABRT from a native `abort()`, SIGBUS, SIGFPE, SIGILL) dumps
every thread's Python stack to stderr, which the parent keeps as the
record's `stderr_tail` (`fitspeed.measure.runner`).
"""

import faulthandler
import sys

if __name__ == "__main__":
    faulthandler.enable()
    if sys.argv[1:2] == ["--fork-server"]:
        from fitspeed.trial import fork_server

        if sys.argv[3:4] == ["--socket"]:
            sys.exit(fork_server.serve_socket(sys.argv[2], sys.argv[4], float(sys.argv[5])))
        sys.exit(fork_server.serve(sys.argv[2]))
    from fitspeed.trial.protocol import main

    sys.exit(main(sys.argv))
