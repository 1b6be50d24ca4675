"""Each backend's own knobs, in real Keras on that backend: what is measured there does what it says, and each
skip's reason holds in this Keras and this backend."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
import textwrap
from typing import Any

from conftest import child_env, missing

from fitspeed.core.backends import backend_of


def run(backend: str, code: str, xla_flags: str | None = None) -> Any:
    if importlib.util.find_spec(backend) is None:
        missing(f"{backend} is not installed (pip install 'fitspeed[{backend}]')")
    env = child_env()
    env.pop("XLA_FLAGS", None)
    if xla_flags:
        env["XLA_FLAGS"] = xla_flags
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], env=env, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


TINY = """
    import json, numpy as np
    from fitspeed.trial.apply import apply, compile_kwargs
    config = apply({config})
    import keras
    model = keras.Sequential([keras.Input((8,)), keras.layers.Dense(16, activation="relu"), keras.layers.Dense(3)])
    x, y = np.random.rand(64, 8).astype("float32"), np.random.randint(0, 3, 64)
"""


def test_torch_jit_compile_is_torch_compile_and_its_thread_knobs_size_torchs_pools() -> None:
    out = run("torch", TINY.format(config='{"backend": "torch", "jit_compile": True, "intra_op_threads": 1, '
                                          '"inter_op_threads": 1}') + """
    import torch
    model.compile("adam", keras.losses.SparseCategoricalCrossentropy(from_logits=True), **compile_kwargs(config))
    model.make_train_function()
    compiled = hasattr(model.train_function, "_torchdynamo_orig_callable")  # what torch.compile returns
    plain = keras.models.clone_model(model)
    plain.compile("adam", "mse", jit_compile="auto")
    plain.fit(x, keras.utils.to_categorical(y, 3), batch_size=16, epochs=1, verbose=0)
    plain.make_train_function()
    try:
        plain.compile("adam", "mse", steps_per_execution=2)
        plain.fit(x, keras.utils.to_categorical(y, 3), batch_size=16, epochs=1, verbose=0)
        refused = ""
    except ValueError as error:
        refused = str(error)
    print(json.dumps({"compiled": compiled, "eager": hasattr(plain.train_function, "_torchdynamo_orig_callable"),
                      "threads": [torch.get_num_threads(), torch.get_num_interop_threads()], "refused": refused}))
    """)
    assert out["compiled"] and not out["eager"]  # jit_compile=True is torch.compile; auto is not, on torch
    assert out["threads"] == [1, 1]
    # why steps_per_execution is skipped on top of PyTorch: this Keras's torch trainer refuses it
    assert "steps_per_execution` must be 1 with the PyTorch backend" in out["refused"]
    assert backend_of("torch").why_not_on_top("steps_per_execution")


def test_on_jax_jit_compile_auto_is_xla_already() -> None:
    out = run("jax", TINY.format(config='{"backend": "jax"}') + """
    model.compile("adam", keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    model.fit(x, y, batch_size=16, epochs=1, verbose=0)
    print(json.dumps({"jit": model.jit_compile}))
    """)
    assert out["jit"] is True  # so jit_compile@jax is skipped: true is its default, false only runs eagerly
    assert "XLA already on JAX" in str(backend_of("jax").why_not_on_top("jit_compile"))


def test_on_jax_the_xla_single_thread_flag_does_not_confine_a_matmul_to_one_thread() -> None:
    # why intra_op_threads is skipped on JAX: the XLA flag that once made its CPU ops single-threaded is
    # accepted, and ignored. When a jax release honours it again, this fails and the knob can map onto it.
    code = """
    import json, os, jax, jax.numpy as jnp
    def ticks():
        out = {}
        for t in os.listdir("/proc/self/task"):
            try:
                fields = open(f"/proc/self/task/{t}/stat").read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            out[t] = int(fields[11]) + int(fields[12])
        return out
    a = jnp.ones((2048, 2048))
    f = jax.jit(lambda a: (a @ a).sum())
    f(a).block_until_ready()
    before = ticks()
    for _ in range(8):
        f(a).block_until_ready()
    after = ticks()
    print(json.dumps(sorted((after[t] - before.get(t, 0) for t in after), reverse=True)))
    """
    if (importlib.util.find_spec("jax") is not None and len(__import__("os").sched_getaffinity(0)) < 2):
        missing("one core: a matmul runs on one thread whatever the flag says")
    busy = run("jax", code, xla_flags="--xla_cpu_multi_thread_eigen=false")
    assert busy[1] > 0.2 * busy[0], busy  # a second thread did a real share of the work
    assert "--xla_cpu_multi_thread_eigen=false" in str(backend_of("jax").why_not_on_top("intra_op_threads"))
