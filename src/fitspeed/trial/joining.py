"""A multi-process trial's join, and its faults, each a sentence: the `processes` knob's step in a trial child.

`join` runs where the processes knob asks a process to join the others
(`fitspeed.trial.apply.TrialProcess.join`), in these steps:

| step          | what it checks, before or after `fitspeed.trial.distribute.join` | what JAX does without it          |
|---------------|-----------------------------------------------------------------|-----------------------------------|
| before, on    | the coordinator's port is free on this host (JAX binds it on    | the process dies of SIGSEGV       |
| process 0     | every address, `[::]:PORT`, or JAX_COORDINATOR_BIND_ADDRESS)    | ("Failed to add port to server")  |
| before, on    | something listens at the coordinator's address: a TCP connect,  | waits its `initialization_timeout`|
| the others    | retried for up to `FITSPEED_COORDINATOR_WAIT_S` seconds (60 by  | (300 s), then aborts (SIGABRT,    |
|               | default: hosts of a cluster start some seconds apart)           | "DEADLINE_EXCEEDED")              |
| during the    | every process has come within `FITSPEED_COORDINATOR_WAIT_S`: a  | waits its `initialization_timeout`|
| join          | timer (`watchdog`) ends the process with a sentence             | (300 s), then aborts (SIGABRT)    |
| after         | every process runs the same trial: each one's `fingerprint`     | a process that steps once more    |
|               | (knobs, model, data, seeds, steps; fitspeed's, Keras's and      | than its peers, or another batch, |
|               | JAX's versions) gathered from all (`process_allgather`) and     | waits in a collective for XLA's   |
|               | compared with process 0's; every process fails alike, naming    | rendezvous timeout, or trains     |
|               | what differs                                                    | another batch than it reports     |
| after, where  | every process sees as many devices (`--set devices`): told from | a bare AssertionError in every    |
| the join fails| `jax.devices()` in each, no collective needed                   | process (Keras's first collective)|

Each fault is a `UserError`, so the trial's record is `failed` with the
sentence as its reason, and the process ends at once: no JAX timeout is
waited for. The join itself waits in native code that no exception reaches, so
its timer writes the sentence and ends the process (`GAVE_UP`), and the
trial's parent makes the same `failed` record of it. Where Keras's variables are not set (SLURM's, which JAX finds
itself) the two checks before the join have no address to check and are skipped.

`FITSPEED_COORDINATOR_WAIT_S`: how long a process other than process 0 waits
for the coordinator to listen, and then every process for the others to join,
in seconds (default 60). Set it longer where the hosts of a launch start
further apart (JAX's own 300 s still ends a join that waits longer).

Runs in the trial child, after keras is imported; imports JAX only inside
functions.
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import socket
import sys
import threading
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from importlib import metadata
from typing import Any

from fitspeed.core.config import TrialConfig
from fitspeed.core.errors import UserError
from fitspeed.core.knobs.processes import ADDRESSES, INDEX
from fitspeed.core.record import GAVE_UP, GAVE_UP_WORDS, TrialSpec
from fitspeed.trial import distribute

BIND = "JAX_COORDINATOR_BIND_ADDRESS"  # JAX's own: where process 0's coordinator binds, `[::]:PORT` when unset
WAIT = "FITSPEED_COORDINATOR_WAIT_S"
WAIT_S = 60.0
RETRY_S = 0.25  # between two connects to a coordinator that is not there yet
PAYLOAD_BYTES = 16384  # a process's fingerprint as JSON, padded: one fixed shape for every process's allgather
LONG = 120  # a value longer than this many characters is compared by its digest
SAME_COMMAND = "start every process with the same command (model, data, --set values, --seed, --steps)"

Fingerprint = dict[str, Any]


def fingerprint(config: TrialConfig, seed: int, **fields: Any) -> Fingerprint:
    """What every process of one run must agree on: each knob's value by its name, the seed and `fields`.

    >>> f = fingerprint(TrialConfig(batch_size=64), 0, model="tiny")
    >>> f["batch_size"], f["seed"], f["model"]
    (64, 0, 'tiny')
    """
    knobs = config.to_dict()
    clash = knobs.keys() & ({"seed"} | fields.keys())
    if clash:
        raise ValueError(f"a trial field has a knob's name: {sorted(clash)}")
    return {**knobs, "seed": seed, **fields}


def of_spec(spec: TrialSpec) -> Fingerprint:
    """A trial's fingerprint: what decides what its processes train, and how many steps each runs.

    Left out: what may differ from host to host (the time and memory limits, a profile's folder).
    """
    return fingerprint(spec.config, spec.seed, model=spec.model, data=spec.data, data_seed=spec.data_seed,
                       mode=spec.mode.value, steps=spec.steps, repeats=spec.repeats,
                       target_seconds=spec.target_seconds, validate=spec.validate, build_first=spec.build_first)


def join(processes: int, own: Mapping[str, Any] | None, environ: Mapping[str, str] | None = None) -> None:
    """Join the other processes of a multi-process run (`distribute.join`), each fault of the join a `UserError`.

    `own` is this process's fingerprint (`of_spec`), compared with process 0's once joined; None compares nothing.
    """
    if processes == 1:
        return
    environ = os.environ if environ is None else environ
    address = environ.get(ADDRESSES)
    if address:
        host, port = coordinator(address)
        if environ.get(INDEX, "0") == "0":
            check_port_free(host, port, environ.get(BIND))
        else:
            wait_for_coordinator(host, port, wait_seconds(environ))
    try:
        with watchdog(wait_seconds(environ), not_joined(processes, address, wait_seconds(environ))):
            distribute.join(processes)
    except Exception:
        # Keras's first collective (its seed, over every device) fails where the processes' devices differ
        reason = _devices_differ()
        if reason:
            raise UserError(reason) from None
        raise
    if own is not None:
        check_same_trial(own)


@contextmanager
def watchdog(seconds: float, sentence: str) -> Iterator[None]:
    """Within the block, a timer that ends the process after `seconds`, `sentence` its last line on stderr.

    JAX's join waits in native code, which no exception reaches, until every process has come or its
    `initialization_timeout` (300 s, which Keras does not pass on) has passed, and then aborts. So the process
    ends itself first, as a trial's parent reads it (`fitspeed.core.record.GAVE_UP`): a failure in a sentence.
    """
    def give_up() -> None:
        sys.stderr.write(f"{GAVE_UP_WORDS}{sentence}\n")
        sys.stderr.flush()
        os._exit(GAVE_UP)  # the join under way cannot be stopped from here

    timer = threading.Timer(seconds, give_up)
    timer.daemon = True
    timer.start()
    try:
        yield
    finally:
        timer.cancel()


def not_joined(processes: int, address: str | None, seconds: float) -> str:
    """What a process says when the others have not all joined within `seconds`.

    >>> print(not_joined(2, "10.0.0.1:1234", 60.0))
    Expected all 2 processes to join at 10.0.0.1:1234 (KERAS_DISTRIBUTION_JOB_ADDRESSES) within 60 s, but not all came: start each process, 0 to 1, with the same command and its own KERAS_DISTRIBUTION_PROCESS_ID; where hosts start further apart, raise FITSPEED_COORDINATOR_WAIT_S.
    """
    where = f"at {address.split(',')[0].strip()} ({ADDRESSES})" if address else "at the coordinator JAX found"
    each = f"its own {INDEX}" if address else "its own task of the launch"
    return (f"Expected all {processes} processes to join {where} within {seconds:g} s, but not all came: start "
            f"each process, 0 to {processes - 1}, with the same command and {each}; where hosts start further "
            f"apart, raise {WAIT}.")


def coordinator(addresses: str) -> tuple[str, int]:
    """The coordinator's host and port: the first of Keras's comma-separated addresses.

    >>> coordinator("10.0.0.1:1234,10.0.0.2:2345"), coordinator("[::1]:80")
    (('10.0.0.1', 1234), ('::1', 80))
    >>> coordinator("10.0.0.1")
    Traceback (most recent call last):
    ...
    fitspeed.core.errors.UserError: Expected KERAS_DISTRIBUTION_JOB_ADDRESSES to start with process 0's HOST:PORT. Received: '10.0.0.1'. Set it to the coordinator's host and a free port, e.g. 10.0.0.1:1234.
    """
    first = addresses.split(",")[0].strip()
    host, _, port = first.rpartition(":")
    host = host.strip("[]")
    if not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise UserError(f"Expected {ADDRESSES} to start with process 0's HOST:PORT. Received: {addresses!r}. Set it "
                        f"to the coordinator's host and a free port, e.g. {host or first or '10.0.0.1'}:1234.")
    return host, int(port)


def wait_seconds(environ: Mapping[str, str]) -> float:
    """How long to wait for the coordinator: `FITSPEED_COORDINATOR_WAIT_S`, else `WAIT_S`.

    >>> wait_seconds({}), wait_seconds({WAIT: "5"})
    (60.0, 5.0)
    """
    raw = environ.get(WAIT, "")
    if not raw:
        return WAIT_S
    try:
        seconds = float(raw)
    except ValueError:
        seconds = -1.0
    if not seconds > 0:
        raise UserError(f"Expected {WAIT} to be a positive number of seconds. Received: {raw!r}. Set it to, "
                        f"for example, {WAIT_S:g}.")
    return seconds


def check_port_free(host: str, port: int, bind: str | None = None) -> None:
    """Process 0's check: the port its coordinator will bind (every address, as JAX binds it) is free.

    A program that listens there would make JAX die of SIGSEGV ("Failed to add port to server").
    """
    bind_host, bind_port = ("::", port) if not bind else coordinator(bind)
    try:
        _try_bind(bind_host, bind_port)
    except OSError as error:
        if error.errno != errno.EADDRINUSE:
            return  # not a port in use (an address this host cannot bind): JAX's own error says what
        holder = _listener(bind_port)
        raise UserError(
            f"Expected port {bind_port} to be free for process 0's coordinator ({ADDRESSES}={host}:{port}), but "
            f"{holder or 'another program'} listens on it: pick a free port in {ADDRESSES} (the same on every "
            "host), or end that program.") from None


def _try_bind(host: str, port: int) -> None:
    """Bind `host`:`port` as a listening server would (SO_REUSEADDR, so a closed connection's TIME_WAIT does not
    count), then let it go; an IPv6 wildcard takes IPv4 too, and falls back to IPv4 on a host without IPv6."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    try:
        probe = socket.socket(family, socket.SOCK_STREAM)
    except OSError:
        if host != "::":
            raise
        family, host, probe = socket.AF_INET, "0.0.0.0", socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    with probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        if family == socket.AF_INET6:
            probe.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
        probe.bind((host, port))


def _listener(port: int) -> str | None:
    """Who listens on `port` on this host, as "NAME (pid N)", where this user may see it; else None."""
    import psutil

    try:
        for conn in psutil.net_connections(kind="tcp"):
            if conn.status == psutil.CONN_LISTEN and conn.laddr and conn.laddr.port == port and conn.pid:
                return f"{psutil.Process(conn.pid).name()} (pid {conn.pid})"
    except (psutil.Error, OSError):
        pass
    return None


def wait_for_coordinator(host: str, port: int, seconds: float) -> float:
    """The others' check: process 0's coordinator answers a TCP connect within `seconds`; the seconds it took.

    JAX itself would retry for its `initialization_timeout`, 300 s, and then abort the process.
    """
    started = time.monotonic()
    deadline = started + seconds
    last = "nothing answered"
    while True:
        try:
            with socket.create_connection((host, port), timeout=max(0.1, min(2.0, deadline - time.monotonic()))):
                return time.monotonic() - started
        except socket.gaierror as error:
            raise UserError(f"Expected {ADDRESSES} to name process 0's host. Received: {host!r}, which does not "
                            f"resolve ({error.strerror}): set it to process 0's address, the same on every host."
                            ) from None
        except OSError as error:
            last = "the connection timed out" if isinstance(error, TimeoutError) else (
                error.strerror or str(error)).lower()
        if time.monotonic() + RETRY_S >= deadline:
            break
        time.sleep(RETRY_S)
    raise UserError(
        f"Expected process 0's coordinator to listen on {host}:{port} ({ADDRESSES}), but nothing answered there "
        f"in {seconds:g} s (last try: {last}): start process 0 with the same {ADDRESSES}, and check the address and "
        f"that no firewall blocks the port; where hosts start further apart, raise {WAIT}.")


def check_same_trial(own: Mapping[str, Any]) -> None:
    """Every process's fingerprint, gathered from all (a collective: every joined process calls it), compared with
    process 0's; where any differs, every process raises the same `UserError`, so none is left in a collective."""
    import jax
    import keras
    import numpy as np
    from jax.experimental import multihost_utils

    reason = _devices_differ()
    if reason:
        raise UserError(reason)
    versions = {"fitspeed": _version("fitspeed"), "keras": keras.__version__, "jax": jax.__version__}
    gathered = multihost_utils.process_allgather(encode({**own, **versions}))
    reason = differences([decode(row) for row in np.asarray(gathered)])
    if reason:
        raise UserError(reason)


def _devices_differ() -> str | None:
    """Where the joined processes see different numbers of devices, the sentence; else None (not joined: None).

    No collective spans them (each takes one shape per process), but every process sees every device, so each
    tells alike without one.
    """
    import jax

    if not jax.distributed.is_initialized():
        return None
    per_process: dict[int, int] = {}
    for device in jax.devices():
        per_process[device.process_index] = per_process.get(device.process_index, 0) + 1
    counts = [per_process.get(index, 0) for index in range(jax.process_count())]
    return differences([{"devices JAX sees": count} for count in counts]) if len(set(counts)) > 1 else None


def _version(package: str) -> str | None:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return None


def encode(fields: Mapping[str, Any]) -> Any:
    """A fingerprint as `PAYLOAD_BYTES` bytes of JSON (a uint8 array, zero-padded): a long value by its digest.

    >>> decode(encode({"batch_size": 64, "data": "x" * 200}))["data"].startswith("sha256:")
    True
    """
    import numpy as np

    short = {name: _short(value) for name, value in fields.items()}
    raw = json.dumps(short, sort_keys=True).encode()
    if len(raw) > PAYLOAD_BYTES:  # more fields than ever fit: one digest for them all
        raw = json.dumps({"fingerprint": _digest(raw.decode())}).encode()
    out = np.zeros(PAYLOAD_BYTES, dtype=np.uint8)
    out[:len(raw)] = np.frombuffer(raw, dtype=np.uint8)
    return out


def decode(row: Any) -> Fingerprint:
    """`encode`'s fingerprint back from its bytes; one that does not read, as itself unreadable."""
    raw = bytes(row).rstrip(b"\0")
    try:
        out = json.loads(raw.decode())
    except (UnicodeDecodeError, ValueError):
        return {"fingerprint": "unreadable"}
    return out if isinstance(out, dict) else {"fingerprint": "unreadable"}


def _short(value: Any) -> Any:
    text = json.dumps(value, sort_keys=True)
    return value if len(text) <= LONG else f"sha256:{_digest(text)}"


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def differences(prints: list[Fingerprint]) -> str | None:
    """Where the processes' fingerprints differ from process 0's, in one sentence; None where all agree.

    >>> differences([{"batch_size": 32, "seed": 0}, {"batch_size": 32, "seed": 0}]) is None
    True
    >>> print(differences([{"batch_size": 32, "seed": 0}, {"batch_size": 64, "seed": 0}]))
    process 1's configuration differs from process 0's (batch_size: 64 on process 1, 32 on process 0): start every process with the same command (model, data, --set values, --seed, --steps)
    >>> print(differences([{"model": "tiny", "seed": 0}, {"model": "tiny", "seed": 1}, {"model": "cnn", "seed": 0}]))
    processes 1 and 2's configurations differ from process 0's (seed: 1 on process 1, 0 on process 0; model: cnn on process 2, tiny on process 0): start every process with the same command (model, data, --set values, --seed, --steps)
    """
    first = prints[0]
    found: list[str] = []
    which: list[int] = []
    for index, other in enumerate(prints[1:], start=1):
        names = sorted(name for name in first.keys() | other.keys()
                       if first.get(name, _UNSET) != other.get(name, _UNSET))
        if not names:
            continue
        which.append(index)
        shown = [f"{name}: {_shown(other.get(name, _UNSET))} on process {index}, "
                 f"{_shown(first.get(name, _UNSET))} on process 0" for name in names[:3]]
        more = f"; and {len(names) - 3} more" if len(names) > 3 else ""
        found.append("; ".join(shown) + more)
    if not which:
        return None
    if len(which) == 1:
        who = f"process {which[0]}'s configuration differs"
    else:
        who = f"processes {', '.join(map(str, which[:-1]))} and {which[-1]}'s configurations differ"
    return f"{who} from process 0's ({'; '.join(found)}): {SAME_COMMAND}"


_UNSET = object()


def _shown(value: Any) -> str:
    if value is _UNSET:
        return "unset"
    return value if isinstance(value, str) else json.dumps(value)
