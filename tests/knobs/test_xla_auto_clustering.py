"""The `xla_auto_clustering` knob, through the code paths every knob takes: config, space, environment, best.json.

The last test runs TensorFlow for real in a fresh process: with the knob on,
TensorFlow compiles a plain tf.function's ops as an XLA cluster; with it off, not.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from conftest import child_env

from fitspeed.core import best_json
from fitspeed.core.config import TrialConfig
from fitspeed.core.errors import KnobError
from fitspeed.core.import_environment import import_environment
from fitspeed.search.space import default_space, skipped

ON = TrialConfig(xla_auto_clustering=True)


def test_it_is_tensorflows_alone() -> None:
    assert TrialConfig.from_assignments(["xla_auto_clustering=yes"]).to_dict()["xla_auto_clustering"] is True
    with pytest.raises(KnobError, match="TensorFlow's .* JAX compiles every step with XLA already"):
        TrialConfig(backend="jax", xla_auto_clustering=True)
    TrialConfig(backend="jax")  # its default runs everywhere


def test_the_space_offers_it_on_tensorflow_and_says_why_not_on_jax() -> None:
    dims = {d.name: d for d in default_space("tiny", TrialConfig(), has_gpu=False, cores=2, onednn_on=False)}
    assert dims["xla_auto_clustering"].values == (True,)
    on_jax = default_space("tiny", TrialConfig(backend="jax"), has_gpu=False, cores=2, onednn_on=False)
    assert "JAX compiles every step" in skipped(on_jax)["xla_auto_clustering"]


def test_its_flags_reach_the_trial_environment_and_best_json_once_each() -> None:
    env = import_environment(ON, 0, {"TF_XLA_FLAGS": "--tf_xla_auto_jit=2"})
    assert env["TF_XLA_FLAGS"] == "--tf_xla_auto_jit=2 --tf_xla_cpu_global_jit"
    assert "TF_XLA_FLAGS" not in import_environment(TrialConfig(), 0, {})
    assert best_json.exports(ON) == {"TF_XLA_FLAGS": "--tf_xla_auto_jit=2 --tf_xla_cpu_global_jit"}
    snippet = best_json.snippet(ON)
    assert "#   export TF_XLA_FLAGS=--tf_xla_auto_jit=2 --tf_xla_cpu_global_jit" in snippet
    assert 'os.environ["TF_XLA_FLAGS"] = "--tf_xla_auto_jit=2 --tf_xla_cpu_global_jit"' in snippet


PROBE = """
import sys
import fitspeed
fitspeed.apply({"xla_auto_clustering": sys.argv[1] == "on"})
import tensorflow as tf

@tf.function
def f(x):
    return tf.reduce_sum(tf.nn.relu(tf.matmul(x, x) + 1.0) * 2.0)

for _ in range(3):
    f(tf.ones((32, 32)))
"""


@pytest.mark.parametrize("switch", ["on", "off"])
def test_tensorflow_clusters_a_plain_function_only_with_it_on(tmp_path: Path, switch: str) -> None:
    probe = tmp_path / "probe.py"
    probe.write_text(PROBE)
    env = child_env() | {"TF_CPP_MIN_LOG_LEVEL": "0"}
    env.pop("TF_XLA_FLAGS", None)
    done = subprocess.run([sys.executable, str(probe), switch], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert ("Compiled cluster using XLA" in done.stderr) == (switch == "on"), done.stderr[-2000:]
