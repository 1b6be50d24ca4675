"""Shared helpers: run the real CLI and real trial children in a temp folder."""

from __future__ import annotations

import fcntl
import importlib.util
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

FIXTURES = Path(__file__).parent / "fixtures"
QUICK = ["--steps", "8", "--repeats", "2"]  # a short timed run: the protocol, not the figures

# Every fitspeed process the suite starts, and its workers' own trials, fork built-in trials from shared
# servers (fitspeed.measure.warm_start, FITSPEED_FORK_SERVERS): one import of keras per environment for the
# whole run instead of one per command. The controller makes the folder before its workers start (they
# inherit it) and stops the servers at the end; tests/measure/test_warm_start.py checks the per-process
# servers every user gets by default.
SHARED_SERVERS = "FITSPEED_FORK_SERVERS"
_OWN_SERVERS = "PYTEST_XDIST_WORKER" not in os.environ and not os.environ.get(SHARED_SERVERS)
if _OWN_SERVERS:
    os.environ[SHARED_SERVERS] = tempfile.mkdtemp(prefix="fitspeed-fs-")
# TensorFlow's log level is part of a server's environment, and importing jax sets it to "1" where it is unset
# (jax/__init__.py): said once for the run, every test's trials find the same servers whichever imported jax first
os.environ["TF_CPP_MIN_LOG_LEVEL"] = "3"


def pytest_unconfigure(config: pytest.Config) -> None:
    """The controller stops the shared servers it started the run with."""
    if not _OWN_SERVERS:
        return
    folder = Path(os.environ.pop(SHARED_SERVERS))
    for pid_file in folder.glob("*.pid"):
        try:
            os.killpg(int(pid_file.read_text()), signal.SIGKILL)
        except (ValueError, ProcessLookupError, PermissionError):
            pass
    shutil.rmtree(folder, ignore_errors=True)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Tests marked slow run first, each file's in its own order.

    With `-n 2` a long test started last keeps one worker busy while the other
    sits idle; started first, the short tests fill in around it.
    """
    items.sort(key=lambda item: item.get_closest_marker("slow") is None)


def built_once(tmp_path_factory: pytest.TempPathFactory, name: str, build: Callable[[Path], None]) -> Path:
    """A folder `build` fills once for the whole run, its workers included (pytest -n); its path.

    For what several tests read (a tuned study, a baseline's guard runs): a
    module-scoped fixture is built again on each worker, and again on one
    worker whenever another module's test ran in between. The first test to
    ask builds it while any other waits; a build that fails is tried again by
    the next test that asks, and fails it the same way.
    """
    base = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        base = base.parent  # this run's folder, above each worker's own
    folder = base / f"built-{name}"
    with open(base / f"built-{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
        if not (folder / ".built").exists():
            shutil.rmtree(folder, ignore_errors=True)
            folder.mkdir()
            build(folder)
            (folder / ".built").touch()
    return folder


def compared(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, subprocess.CompletedProcess[str]]:
    """One real `fitspeed compare` run for the run, its folder and its result; tests read and copy, never change it.

    A comparison of batch 4 against batch 256 on mlp, a real difference (batch 256 moves far more samples per
    second on that overhead-bound model), past --pairs to --max-pairs (3 pairs, 6 trials): tests/cli/test_cli.py checks that it
    found the difference and what --until-width did, tests/report/test_report.py renders its results file.
    """
    def build(folder: Path) -> None:
        result = fitspeed("compare", "mlp", "--a", "batch_size=4", "--b", "batch_size=256", "--pairs", "2",
                          "--until-width", "0.0001", "--max-pairs", "3", "--statistic", "best", *QUICK, cwd=folder)
        (folder / "result.json").write_text(json.dumps([result.returncode, result.stdout, result.stderr]))

    folder = built_once(tmp_path_factory, "compared", build)
    code, out, err = json.loads((folder / "result.json").read_text())
    return folder, subprocess.CompletedProcess(["fitspeed", "compare"], code, out, err)


def missing(what: str) -> None:
    """A part a test needs is not here: skip, except under CI=true, where a missing part fails the run."""
    if os.environ.get("CI") == "true":
        pytest.fail(f"{what} (CI=true: .ci/run installs it, so it must not be missing)")
    pytest.skip(what)


def need_jax() -> None:
    if importlib.util.find_spec("jax") is None:
        missing("jax is not installed")


def trial_processes() -> list[Any]:
    """This test's trial processes still alive: the children that carry Keras's process id (psutil.Process)."""
    import psutil

    found = []
    for proc in psutil.Process().children(recursive=True):
        try:
            if "KERAS_DISTRIBUTION_PROCESS_ID" in proc.environ():
                found.append(proc)
        except psutil.Error:
            continue
    return found


def load_script(path: Path) -> ModuleType:
    """A script outside the package (benchmarks/, scripts/) imported as a module named after its file."""
    spec = importlib.util.spec_from_file_location(path.stem, path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[path.stem] = module  # dataclasses look their module up by name
    spec.loader.exec_module(module)
    return module


def sigint_default() -> None:
    """Popen's preexec_fn: Ctrl-C's default, as in a terminal's foreground process.

    A shell starts background jobs with SIGINT ignored, and children inherit
    that; a test that sends SIGINT must not depend on how pytest was started.
    """
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def child_env() -> dict[str, str]:
    env = dict(os.environ)
    # the fixtures once, however often this is built (`workdir` puts its PYTHONPATH in os.environ, and a later
    # call builds on that): PYTHONPATH is part of which shared fork server serves a trial
    rest = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p and p != str(FIXTURES)]
    env["PYTHONPATH"] = os.pathsep.join([str(FIXTURES), *rest])
    # the suite runs tests side by side (pytest -n 2): tuning workers share this host on purpose
    env["FITSPEED_ALLOW_SHARED_HOST"] = "1"
    return env


def run_on_backend(code: str, backend: str) -> subprocess.CompletedProcess[str]:
    """`code` (dedented) in a fresh Python on `backend`; it must exit 0."""
    import textwrap
    env = {**child_env(), "KERAS_BACKEND": backend}
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], env=env, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return done


def json_line(done: subprocess.CompletedProcess[str]) -> Any:
    """The JSON object a child printed on its last line."""
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.fixture
def workdir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PYTHONPATH", child_env()["PYTHONPATH"])
    return tmp_path


def fitspeed(*args: str, cwd: Path, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    """Run the `fitspeed` command as a user would, in its own process."""
    return subprocess.run(
        [sys.executable, "-m", "fitspeed", *args],
        cwd=cwd,
        env=child_env(),
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def fitspeed_in_process(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """Run the `fitspeed` command's own entry point (`fitspeed.cli.main`) inside this process.

    For what is settled before any trial starts (refusals of bad input): the
    same code path as `python -m fitspeed` with the same environment, minus the
    start of a Python process. stdout and stderr are captured apart, as typer's
    CliRunner does; an exception `main()` lets out is printed as the process
    would print it, with its traceback and exit status 1.
    """
    import traceback

    from typer.testing import CliRunner

    import fitspeed as fitspeed_package
    from fitspeed.cli import main

    previous_dir, previous_argv, previous_term = Path.cwd(), sys.argv, signal.getsignal(signal.SIGTERM)
    previous_main = sys.modules["__main__"]
    # what `python -m fitspeed` has, so that usage lines name the program as it does
    as_main = ModuleType("__main__")
    as_main.__package__ = "fitspeed"
    code: Any = 0
    with CliRunner().isolation(env=child_env()) as (stdout, stderr, _):
        os.chdir(cwd)
        sys.argv = [str(Path(fitspeed_package.__file__).parent / "__main__.py"), *args]
        sys.modules["__main__"] = as_main
        try:
            main()
        except SystemExit as exit_:
            code = exit_.code
            if code is not None and not isinstance(code, int):  # sys.exit("text"): the text, and status 1
                print(code, file=sys.stderr)
                code = 1
        except Exception:  # noqa: BLE001 - the process would print it and exit with 1
            traceback.print_exc()
            code = 1
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            sys.argv = previous_argv
            sys.modules["__main__"] = previous_main
            signal.signal(signal.SIGTERM, previous_term)  # main() makes SIGTERM end a command like Ctrl-C
            os.chdir(previous_dir)
        said = stdout.getvalue().decode(), stderr.getvalue().decode()
    return subprocess.CompletedProcess(["fitspeed", *args], code or 0, *said)


def json_out(result: subprocess.CompletedProcess[str]) -> dict[str, Any]:
    assert result.stdout, result.stderr
    return json.loads(result.stdout)


def _as_postgres(args: list[str]) -> list[str]:
    # initdb refuses to run as root; run the server as the postgres user then
    if os.geteuid() == 0:
        return ["runuser", "-u", "postgres", "--", *args]
    return args


@contextmanager
def postgres_server(password: str | None = None) -> Iterator[str]:
    """A throwaway PostgreSQL server (initdb + pg_ctl on a free loopback port, in a temp folder); its URL.

    With `password`, the user `postgres` must give it (scram-sha-256), as on a real server.
    """
    initdb, pg_ctl = shutil.which("initdb"), shutil.which("pg_ctl")
    if not (initdb and pg_ctl) or importlib.util.find_spec("psycopg") is None:
        missing("needs PostgreSQL's initdb and pg_ctl, and pip install 'fitspeed[postgres]'")
    # a folder the postgres user can reach (pytest's own temp folders are private to root)
    folder = Path(tempfile.mkdtemp(prefix="fitspeed-pg-"))
    if os.geteuid() == 0:
        shutil.chown(folder, "postgres")
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    data = folder / "data"
    auth = ["-A", "trust"]
    if password is not None:
        (folder / "pw").write_text(password)
        if os.geteuid() == 0:
            shutil.chown(folder / "pw", "postgres")
        auth = ["--auth-host=scram-sha-256", "--auth-local=trust", f"--pwfile={folder / 'pw'}"]
    subprocess.run(_as_postgres([initdb, "-D", str(data), *auth, "-U", "postgres"]), check=True, capture_output=True)
    options = f"-p {port} -k {folder} -c listen_addresses=127.0.0.1"
    subprocess.run(_as_postgres([pg_ctl, "-D", str(data), "-o", options, "-l", str(folder / "log"), "-w", "start"]),
                   check=True, capture_output=True)
    user = "postgres" if password is None else f"postgres:{password}"
    try:
        yield f"postgresql://{user}@127.0.0.1:{port}/postgres"
    finally:
        subprocess.run(_as_postgres([pg_ctl, "-D", str(data), "-m", "immediate", "stop"]), capture_output=True)
        shutil.rmtree(folder, ignore_errors=True)
