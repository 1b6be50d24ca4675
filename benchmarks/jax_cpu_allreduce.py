"""JAX's two logical CPU devices abort in their all-reduce, without fitspeed and without a fork.

    python benchmarks/jax_cpu_allreduce.py [--runs 3] [--steps 3000] [--devices 2]

Each run is a fresh `python -c` of plain JAX (no keras, no fitspeed): a
data-parallel step over `--devices` host devices (`XLA_FLAGS=
--xla_force_host_platform_device_count=N`), a matmul per device and an
all-reduce of the gradient, `--steps` times, dispatched asynchronously as
Keras's JAX trainer dispatches its steps; then the same with each step
waited for (`block_until_ready`). It prints every run's exit status and the
line XLA wrote before it aborted, then the counts.

On 2 cores (jax 0.10.2), `--runs 2`: asynchronous 2 of 2 aborted with
SIGABRT, each after XLA's 40 s rendezvous timeout ("Termination timeout for
`all reduce ...` of 40 seconds exceeded ... only 1 of them arrived on
time"); each step waited for, 0 of 2. The same step run by hand aborted 3 of
3 times as is, 3 of 3 with `--xla_cpu_multi_thread_eigen=false` and 1 of 1
with `JAX_CPU_ENABLE_ASYNC_DISPATCH=false`, and finished 2 of 2 when each
step was waited for. XLA's stack shows the all-reduce waiting on an Eigen
pool thread (`InProcessCommunicator::AllReduce` under
`Eigen::ThreadPoolTempl::WorkerLoop`): the other device's step finds no
free thread to reach it. This is the SIGABRT of `fitspeed scale tiny
--devices 1,2 --set backend=jax` (issue 36); a trial forked from the fork
server and a cold one (`FITSPEED_WARM_START=0`) end the same way.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys

STEP = """
import sys, jax, jax.numpy as jnp
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P
mesh = Mesh(jax.devices(), ("batch",))
x = jax.device_put(jnp.ones((64, 512)), NamedSharding(mesh, P("batch")))
w = jax.device_put(jnp.ones((512, 512)) * 0.001, NamedSharding(mesh, P()))
step = jax.jit(lambda w, x: w - 0.01 * jax.grad(lambda w: jnp.mean(jnp.tanh(x @ w @ w.T) ** 2))(w))
for _ in range({steps}):
    w = step(w, x){wait}
w.block_until_ready()
print("finished")
"""


def fatal_line(stderr: str) -> str:
    r"""The rendezvous line XLA logged at FATAL before it aborted ('' if none); its warnings (E...) are not it.

    >>> fatal_line("E1128 23:31:15.5 23956 rendezvous.cc:116] [id=0] This thread has been waiting for 20 seconds\n"
    ...            "F1128 23:31:55.5 23956 rendezvous.cc:161] [id=0] Termination timeout of 40 seconds exceeded.\n"
    ...            "*** Check failure stack trace: ***")
    'F1128 23:31:55.5 23956 rendezvous.cc:161] [id=0] Termination timeout of 40 seconds exceeded.'
    >>> fatal_line("Traceback (most recent call last):\nValueError: not divisible by 3")
    ''
    """
    return next((line for line in stderr.splitlines() if line.startswith("F") and "rendezvous" in line), "")


def run(steps: int, devices: int, wait: bool) -> tuple[int, str]:
    """One fresh process: its exit status and XLA's fatal line ('' if none)."""
    env = {**os.environ, "XLA_FLAGS": f"--xla_force_host_platform_device_count={devices}", "JAX_PLATFORMS": "cpu"}
    code = STEP.format(steps=steps, wait=".block_until_ready()" if wait else "")
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=600)
    return done.returncode, fatal_line(done.stderr)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--steps", type=int, default=3000)
    parser.add_argument("--devices", type=int, default=2)
    args = parser.parse_args()
    print(f"{os.cpu_count()} CPUs, {args.devices} host devices, {args.steps} steps a run")
    for wait in (False, True):
        aborted = 0
        for index in range(args.runs):
            code, fatal = run(args.steps, args.devices, wait)
            aborted += code == -6
            print(f"{'each step waited for' if wait else 'asynchronous'} run {index + 1}: exit {code} {fatal[:160]}")
        print(f"{'each step waited for' if wait else 'asynchronous'}: {aborted} of {args.runs} aborted")


if __name__ == "__main__":
    main()
