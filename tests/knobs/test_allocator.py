"""The `allocator` knob, through every code path it takes: config, space, the environment a process starts in,
best.json, `fitspeed.apply()` in a running Python, and `fitspeed run`, which starts the script with it.

The loader's proof is the process's own memory map: /proc/self/maps names the
library only where LD_PRELOAD put it there when the process started.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from conftest import child_env, missing

from fitspeed.core import best_json
from fitspeed.core.config import TrialConfig
from fitspeed.core.errors import KnobError
from fitspeed.core.import_environment import start_environment
from fitspeed.core.knobs import allocator
from fitspeed.core.knobs.allocator import library
from fitspeed.search.space import default_space

MAPS = "import sys; print(any(name in open('/proc/self/maps').read() for name in sys.argv[1:]))"


@pytest.fixture
def jemalloc() -> str:
    path = library("jemalloc")
    if path is None or library("tcmalloc") is None:
        missing("libjemalloc2 and libtcmalloc-minimal4 (apt-get install libjemalloc2 libtcmalloc-minimal4)")
    assert path is not None
    return path


def test_a_value_is_refused_with_the_package_that_installs_it(jemalloc: str, monkeypatch: pytest.MonkeyPatch) -> None:
    assert TrialConfig(allocator="JEMALLOC").to_dict()["allocator"] == "jemalloc"
    with pytest.raises(KnobError, match="one of system, tcmalloc, jemalloc"):
        TrialConfig(allocator="mimalloc")
    monkeypatch.setattr(allocator, "FOLDERS", ())  # a machine without it: no folder holds the library
    with pytest.raises(KnobError, match=r"apt-get install libjemalloc2\), or keep allocator=system"):
        TrialConfig(allocator="jemalloc")
    dims = {d.name: d for d in default_space("tiny", TrialConfig(), has_gpu=False, cores=2, onednn_on=False)}
    assert dims["allocator"].skipped == ("neither tcmalloc nor jemalloc is installed: apt-get install "
                                         "libtcmalloc-minimal4 libjemalloc2")


def test_the_space_offers_each_installed_allocator_on_every_backend(jemalloc: str) -> None:
    for backend in ("tensorflow", "jax"):
        dims = {d.name: d for d in default_space("tiny", TrialConfig(backend=backend), has_gpu=False, cores=2,
                                                 onednn_on=False)}
        assert dims["allocator"].values == ("tcmalloc", "jemalloc") and dims["allocator"].each


def test_a_process_started_in_its_environment_has_the_library_loaded(jemalloc: str) -> None:
    env = start_environment(TrialConfig(allocator="jemalloc"), child_env() | {"LD_PRELOAD": ""})
    assert env["LD_PRELOAD"] == jemalloc
    loaded = subprocess.run([sys.executable, "-c", MAPS, "libjemalloc"], env=env, capture_output=True, text=True,
                            timeout=60)
    assert loaded.stdout.strip() == "True", loaded.stderr
    plain = subprocess.run([sys.executable, "-c", MAPS, "libjemalloc"], env=child_env() | {"LD_PRELOAD": ""},
                           capture_output=True, text=True, timeout=60)
    assert plain.stdout.strip() == "False", plain.stderr


def test_it_goes_in_front_of_what_ld_preload_held_and_only_once(jemalloc: str) -> None:
    config = TrialConfig(allocator="jemalloc")
    env = start_environment(config, {"LD_PRELOAD": "/opt/a.so:/opt/b.so"})
    assert env["LD_PRELOAD"] == f"{jemalloc} /opt/a.so /opt/b.so"
    assert start_environment(config, env)["LD_PRELOAD"] == env["LD_PRELOAD"]  # applied twice: the same
    assert start_environment(TrialConfig(), {"LD_PRELOAD": "/opt/a.so"}) == {"LD_PRELOAD": "/opt/a.so"}


def test_best_json_exports_it_for_before_python_starts_only(jemalloc: str) -> None:
    config = TrialConfig(allocator="jemalloc")
    assert best_json.exports(config) == {"LD_PRELOAD": jemalloc}
    snippet = best_json.snippet(config)
    assert f"#   export LD_PRELOAD={jemalloc}" in snippet and "the loader reads LD_PRELOAD when Python starts" in snippet
    assert 'os.environ["LD_PRELOAD"]' not in snippet  # too late from inside Python


def test_apply_in_a_running_python_says_it_came_too_late(jemalloc: str) -> None:
    code = "import fitspeed; fitspeed.apply({'allocator': 'jemalloc'})"
    late = subprocess.run([sys.executable, "-c", code], env=child_env() | {"LD_PRELOAD": ""}, capture_output=True,
                          text=True, timeout=120)
    assert late.returncode != 0 and f"Start it with LD_PRELOAD={jemalloc}" in late.stderr, late.stderr
    started = subprocess.run([sys.executable, "-c", code], env=child_env() | {"LD_PRELOAD": jemalloc},
                             capture_output=True, text=True, timeout=120)
    assert started.returncode == 0, started.stderr


def test_fitspeed_run_starts_the_script_with_it(jemalloc: str, tmp_path: Path) -> None:
    script = tmp_path / "train.py"
    script.write_text("import sys\nprint('loaded' if 'libjemalloc' in open('/proc/self/maps').read() else 'plain')\n")
    best = tmp_path / "best.json"
    best_json.write(best, {"baseline": {"config": {}}, "best": {"claimed": True, "config": {"allocator": "jemalloc"}}})
    done = subprocess.run([sys.executable, "-m", "fitspeed", "run", str(best), "--force", "--", sys.executable,
                           str(script)], cwd=tmp_path, env=child_env() | {"LD_PRELOAD": ""}, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().splitlines()[-1] == "loaded", done.stdout + done.stderr
    assert "with allocator=jemalloc" in done.stderr
