"""fitspeed's samples/s against a bare, hand-timed Keras loop on the same model.

    python benchmarks/overhead.py [--model mlp] [--pairs 6] [--batch-size 32] [--steps 1024]

Each pair runs, in fresh processes, one `fitspeed` trial and one bare script:
the same built-in model, compiled the same way, on the same synthetic data
(TensorFlow backend). The bare script uses no fitspeed machinery to time:

- hand-timed fit steps (the reference): a warm-up `fit()`, then
  `fit(epochs=1, steps_per_epoch=steps + 1)` with a two-line LambdaCallback
  that reads `perf_counter` after step 0 and after the last step;
- whole fit: `perf_counter` around the same `fit()` call, which also times
  iterator creation and teardown;
- raw loop: `model.train_function` called in a Python loop with no `fit()`
  around it, the ceiling; the gap to fit steps is `fit()`'s own per-step work.

Each is the median of `--repeats` runs, taken round-robin in the one process.
The ratio fitspeed / hand-timed fit steps per pair, and its median, say how
far fitspeed's machinery moves the figure.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

from fitspeed.core.config import TrialConfig
from fitspeed.core.record import TrialSpec
from fitspeed.core.stats import ratio_estimate
from fitspeed.machine import environment
from fitspeed.measure.runner import run_trial

BARE = """
import json, os, statistics, sys, time
os.environ["KERAS_BACKEND"] = "tensorflow"
model_name, batch, steps, repeats = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
import keras, numpy as np, tensorflow as tf
keras.utils.set_random_seed(0)
from fitspeed.trial.data.sources import synthetic
from fitspeed.trial import models
from fitspeed.core.workloads import MODELS
info = MODELS[model_name]
model = models.build(model_name)
model.compile(optimizer=keras.optimizers.Adam(1e-3), loss="sparse_categorical_crossentropy",
              metrics=["accuracy"])
x, y = synthetic(info.input_shape, info.num_classes, 0)
index = np.arange((steps + 1) * batch) % len(x)
xs, ys = x[index], y[index]
model.fit(xs[: 2 * batch], ys[: 2 * batch], batch_size=batch, epochs=1, verbose=0)
data = tf.data.Dataset.from_tensor_slices((x, y)).shuffle(len(x)).batch(batch, drop_remainder=True)
iterator = iter(data.repeat().prefetch(tf.data.AUTOTUNE))
for _ in range(5):
    float(model.train_function(iterator)["loss"])
marks = {}
clock = keras.callbacks.LambdaCallback(
    on_train_batch_end=lambda b, logs: marks.__setitem__(b, time.perf_counter()))
speeds = {"fit_steps": [], "fit_whole": [], "loop": []}
for _ in range(repeats):
    start = time.perf_counter()
    model.fit(xs, ys, batch_size=batch, epochs=1, verbose=0, callbacks=[clock])
    whole = time.perf_counter() - start
    speeds["fit_steps"].append(steps * batch / (marks[steps] - marks[0]))
    speeds["fit_whole"].append((steps + 1) * batch / whole)
    start = time.perf_counter()
    for _ in range(steps):
        logs = model.train_function(iterator)
    float(logs["loss"])
    speeds["loop"].append(steps * batch / (time.perf_counter() - start))
print(json.dumps({name: statistics.median(values) for name, values in speeds.items()}))
"""


def bare(model: str, batch: int, steps: int, repeats: int) -> dict[str, float]:
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
    result = subprocess.run([sys.executable, "-c", BARE, model, str(batch), str(steps), str(repeats)],
                            capture_output=True, text=True, env=env, check=True)
    return json.loads(result.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="mlp")
    parser.add_argument("--pairs", type=int, default=6)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--steps", type=int, default=1024)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()

    spec = TrialSpec(model=args.model, config=TrialConfig(batch_size=args.batch_size),
                     steps=args.steps, repeats=args.repeats)
    started = time.perf_counter()
    ratios, whole, ceilings = [], [], []
    print("samples/s per pair: fitspeed | bare: fit steps, whole fit, raw loop | fitspeed / fit steps")
    for pair in range(args.pairs):
        # alternate which runs first, so drift on a shared machine favours neither
        if pair % 2:
            theirs = bare(args.model, args.batch_size, args.steps, args.repeats)
        record = run_trial(spec)
        ours = record.throughput
        if ours is None:
            raise SystemExit(f"fitspeed trial {record.status}: {record.reason}")
        if not pair % 2:
            theirs = bare(args.model, args.batch_size, args.steps, args.repeats)
        ratios.append(ours / theirs["fit_steps"])
        whole.append(theirs["fit_whole"] / theirs["fit_steps"])
        ceilings.append(theirs["loop"] / theirs["fit_steps"])
        print(f"pair {pair + 1}: {ours:9.0f} | {theirs['fit_steps']:9.0f} {theirs['fit_whole']:9.0f} "
              f"{theirs['loop']:9.0f} | {ours / theirs['fit_steps']:.3f}", flush=True)
    host = environment.host()
    median = statistics.median(ratios)
    estimate = ratio_estimate(ratios)
    print()
    print(f"machine: {host['cpu']} ({host['cpu_count']} cores), fitspeed {host['fitspeed']}")
    print(f"{args.model}, batch {args.batch_size}, {args.steps} steps x {args.repeats} repeats, "
          f"{args.pairs} pairs")
    print(f"fitspeed / bare: median {median:.3f} (min {min(ratios):.3f}, max {max(ratios):.3f}), "
          f"95% CI {estimate.low:.3f}-{estimate.high:.3f}; "
          f"median within 5%: {'yes' if abs(median - 1) <= 0.05 else 'NO'}")
    print(f"whole-fit timing / fit steps: median {statistics.median(whole):.3f} "
          "(set-up and teardown inside the clock)")
    print(f"raw train_function loop / fit steps: median {statistics.median(ceilings):.3f} "
          "(fit()'s own per-step work)")
    print(f"wall time {time.perf_counter() - started:.0f} s")


if __name__ == "__main__":
    main()
