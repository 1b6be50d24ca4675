"""One tuning worker per host and device: two would time each other's noise.

`hold(device, what)` takes an exclusive lock on a file named after the device
in the system's temp folder, for as long as the worker runs; the kernel drops
it when the process ends, however it ends. A second worker on the same host
and device is refused with a sentence naming the first, unless it is started
with `--allow-shared-host` (or FITSPEED_ALLOW_SHARED_HOST=1), as a throughput
test or a test suite may want.
"""

from __future__ import annotations

import fcntl
import os
import re
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from fitspeed.core.errors import UserError

ALLOW_ENV = "FITSPEED_ALLOW_SHARED_HOST"


def device() -> str:
    """The device this worker's trials run on: `gpu:2` for CUDA_VISIBLE_DEVICES=2, else `gpu:all` or `cpu`."""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible not in (None, ""):
        return f"gpu:{visible}"
    from fitspeed.machine.environment import nvidia_gpus

    return "gpu:all" if nvidia_gpus()[0] else "cpu"


def lock_path(name: str) -> Path:
    return Path(tempfile.gettempdir()) / f"fitspeed-worker-{re.sub(r'[^A-Za-z0-9_.-]', '_', name)}.lock"


@contextmanager
def hold(name: str, what: str, allow_shared: bool = False) -> Iterator[None]:
    """Hold this host's lock for device `name` while the block runs; `what` says who holds it."""
    if allow_shared or os.environ.get(ALLOW_ENV) == "1":
        yield
        return
    path = lock_path(name)
    with open(path, "a+", encoding="utf-8") as file:
        try:
            fcntl.flock(file, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            file.seek(0)
            holder = file.read().strip() or "another process"
            raise UserError(
                f"Another fitspeed worker already measures on this host's {name} ({holder}). Two workers on one "
                f"host time each other's noise, so the second is refused. Run one worker per host and device, "
                f"or run it anyway with --allow-shared-host (or {ALLOW_ENV}=1 in the environment, as in "
                f"`{ALLOW_ENV}=1 bash run.sh`); its speeds then include the other's load."
            ) from None
        file.seek(0)
        file.truncate()
        file.write(f"pid {os.getpid()}, {what}")
        file.flush()
        try:
            yield
        finally:
            file.seek(0)
            file.truncate()
            fcntl.flock(file, fcntl.LOCK_UN)
