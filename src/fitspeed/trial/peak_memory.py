"""A trial's peak resident memory, counted alike whether its process started cold or forked from a server."""

from __future__ import annotations

import resource

SHARED_KB = 0  # in a forked child: resident memory the server had at the fork that the child has not touched yet


def resident_kb() -> int:
    """This process's resident memory now (VmRSS), in KiB; 0 where /proc has none."""
    try:
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def peak_resident_mb() -> float:
    """The process's peak resident memory in MiB, counted as a trial started cold counts it.

    A forked child maps the server's imported libraries without touching
    them, so its own peak leaves out what a cold trial's import put in
    memory: that share, measured at the fork, is added back.
    """
    return (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss + SHARED_KB) / 1024
