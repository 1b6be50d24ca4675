"""fitspeed's samples/s against a bare, hand-timed Keras loop on the same model.

    python benchmarks/overhead.py [--model mlp] [--pairs 5] [--batch-size 32]

Each pair runs, in fresh processes, one `fitspeed` trial and one bare loop:
the same built-in model, compiled the same way, on the same synthetic data,
stepping `model.train_function` over a tf.data iterator with the clock read
around a block of steps (TensorFlow backend). The ratio fitspeed / bare per
pair, and its median, say how far fitspeed's machinery moves the figure.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

from fitspeed import environment
from fitspeed.config import TrialConfig
from fitspeed.record import TrialSpec
from fitspeed.runner import run_trial

BARE = """
import json, os, statistics, sys, time
os.environ["KERAS_BACKEND"] = "tensorflow"
model_name, batch, steps, repeats = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
import keras, numpy as np, tensorflow as tf
keras.utils.set_random_seed(0)
from fitspeed import datasets, models
from fitspeed.workloads import MODELS
info = MODELS[model_name]
model = models.build(model_name)
model.compile(optimizer=keras.optimizers.Adam(1e-3), loss="sparse_categorical_crossentropy",
              metrics=["accuracy"])
x, y = datasets.synthetic(info.input_shape, info.num_classes, 0)
data = tf.data.Dataset.from_tensor_slices((x, y)).shuffle(len(x)).batch(batch, drop_remainder=True)
iterator = iter(data.repeat().prefetch(tf.data.AUTOTUNE))
model.make_train_function()
for _ in range(5):
    float(model.train_function(iterator)["loss"])
speeds = []
for _ in range(repeats):
    start = time.perf_counter()
    for _ in range(steps):
        logs = model.train_function(iterator)
    float(logs["loss"])
    speeds.append(steps * batch / (time.perf_counter() - start))
print(json.dumps({"samples_per_s": statistics.median(speeds)}))
"""


def bare(model: str, batch: int, steps: int, repeats: int) -> float:
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
    result = subprocess.run([sys.executable, "-c", BARE, model, str(batch), str(steps), str(repeats)],
                            capture_output=True, text=True, env=env, check=True)
    return float(json.loads(result.stdout.strip().splitlines()[-1])["samples_per_s"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="mlp")
    parser.add_argument("--pairs", type=int, default=5)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--steps", type=int, default=512)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()

    spec = TrialSpec(model=args.model, config=TrialConfig(batch_size=args.batch_size),
                     steps=args.steps, repeats=args.repeats)
    started = time.perf_counter()
    ratios = []
    for pair in range(args.pairs):
        record = run_trial(spec)
        if record["status"] != "ok":
            raise SystemExit(f"fitspeed trial {record['status']}: {record['reason']}")
        ours = record["metrics"]["samples_per_s"]["median"]
        theirs = bare(args.model, args.batch_size, args.steps, args.repeats)
        ratios.append(ours / theirs)
        print(f"pair {pair + 1}: fitspeed {ours:9.0f}  bare loop {theirs:9.0f}  ratio {ours / theirs:.3f}",
              flush=True)
    host = environment.host()
    median = statistics.median(ratios)
    print()
    print(f"machine: {host['cpu']} ({host['cpu_count']} cores), fitspeed {host['fitspeed']}")
    print(f"{args.model}, batch {args.batch_size}, {args.steps} steps x {args.repeats} repeats, "
          f"{args.pairs} pairs")
    print(f"fitspeed / bare: median {median:.3f} (min {min(ratios):.3f}, max {max(ratios):.3f}); "
          f"within 5%: {'yes' if abs(median - 1) <= 0.05 else 'NO'}")
    print(f"wall time {time.perf_counter() - started:.0f} s")


if __name__ == "__main__":
    main()
