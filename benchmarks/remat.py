"""Peak resident memory and samples/s of one trial with and without remat (keras.RematScope), per backend.

    python benchmarks/remat.py                          # jax and torch, batch 32768
    python benchmarks/remat.py --model attention --batch 2048   # a layer with large inner activations

Each trial is a fresh `fitspeed` trial process (`fitspeed.measure.runner.run_trial`)
of `--model` (by default `benchmarks/remat_workload.py`'s deep MLP) on synthetic data, timed as
`fitspeed measure` times it, with the process tree's resident memory sampled
every 50 ms (the figure `--memory-limit` holds a trial to). TensorFlow is not
measured: Keras 3.15's RematScope cannot run in its compiled train step
(`fitspeed knobs` says why). A machine shared with other jobs moves the speeds;
the memory figures move less.
"""

from __future__ import annotations

import argparse
import threading
import time
from pathlib import Path

import psutil

from fitspeed.core.config import TrialConfig
from fitspeed.core.record import Status, TrialSpec
from fitspeed.measure.runner import run_trial

HERE = Path(__file__).resolve().parent


def peak_rss_mb(until: threading.Event, found: list[float]) -> None:
    """The largest resident memory of any `fitspeed.trial` process tree seen until `until` is set."""
    peak = 0.0
    while not until.is_set():
        for proc in psutil.Process().children(recursive=True):
            try:
                tree = [proc, *proc.children(recursive=True)]
                peak = max(peak, sum(p.memory_info().rss for p in tree) / 2**20)
            except psutil.Error:
                pass
        time.sleep(0.05)
    found.append(peak)


def trial(model: str, backend: str, remat: str, batch: int, steps: int) -> tuple[str, float | None, float]:
    spec = TrialSpec(model=model, steps=steps, repeats=1, timeout_s=120,
                     config=TrialConfig(backend=backend, batch_size=batch, remat=remat))
    stop, found = threading.Event(), list[float]()
    watcher = threading.Thread(target=peak_rss_mb, args=(stop, found), daemon=True)
    watcher.start()
    record = run_trial(spec, cwd=HERE)
    stop.set()
    watcher.join()
    if record.status != Status.OK:
        print(f"  {backend} remat={remat}: {record.status}: {record.reason}")
    return record.status, record.throughput, found[0]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="remat_workload:deep_mlp", help="a built-in model or module:function")
    parser.add_argument("--backends", default="jax,torch")
    parser.add_argument("--batch", type=int, default=32768)
    parser.add_argument("--steps", type=int, default=1)
    args = parser.parse_args()
    print(f"{args.model}, batch {args.batch}, {args.steps} timed step(s)\n")
    print("| backend | remat | status | peak resident MiB | samples/s |")
    print("|---|---|---|---:|---:|")
    for backend in args.backends.split(","):
        for remat in ("off", "full"):
            status, speed, peak = trial(args.model, backend, remat, args.batch, args.steps)
            print(f"| {backend} | {remat} | {status} | {peak:.0f} | {speed or 0:.0f} |", flush=True)


if __name__ == "__main__":
    main()
