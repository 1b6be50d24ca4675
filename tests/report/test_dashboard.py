"""`pip install 'fitspeed[dashboard]'`: Optuna's dashboard serves a fitspeed study on a loopback port."""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import sys
import urllib.request
from pathlib import Path

from conftest import missing
from waiting import wait_for


def test_the_dashboard_serves_a_fitspeed_study(tmp_path: Path) -> None:
    import optuna

    dashboard = shutil.which("optuna-dashboard", path=str(Path(sys.executable).parent))
    if dashboard is None:
        missing("needs pip install 'fitspeed[dashboard]' (optuna-dashboard)")
    storage = f"sqlite:///{tmp_path / 'fitspeed.db'}"
    study = optuna.create_study(study_name="tiny-synthetic", storage=storage, direction="maximize")
    study.set_user_attr("fitspeed", True)
    study.enqueue_trial({"steps_per_execution": 8})
    study.optimize(lambda trial: 1000.0 * trial.suggest_categorical("steps_per_execution", [1, 8]), n_trials=1)
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server = subprocess.Popen([dashboard, storage, "--host", "127.0.0.1", "--port", str(port), "--quiet"],
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        def answer() -> list[object]:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/studies", timeout=5) as reply:
                    return [json.loads(reply.read())]
            except OSError:  # not listening yet
                return []

        try:
            [studies] = wait_for(answer, "answer from the dashboard", 60, alive=[server], poll_s=0.3)
        except AssertionError as error:  # with the server's own words, when it exited
            raise AssertionError(f"{error}. {server.stderr.read() if server.poll() is not None else ''}") from None
        listed = studies["studies"] if isinstance(studies, dict) and "studies" in studies else studies
        assert "tiny-synthetic" in json.dumps(listed), listed
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/dashboard", timeout=5) as page:
            assert page.status == 200 and b"<html" in page.read().lower()
    finally:
        server.terminate()
        server.wait(timeout=10)
