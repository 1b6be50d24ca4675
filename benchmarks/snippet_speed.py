"""Does best.json's snippet, pasted into a plain Keras script, give the speed-up tune measured?

    python benchmarks/snippet_speed.py best.json [--pairs 3] [--steps 512] [--seed N]

Runs a plain Keras script on the study's built-in model and synthetic data,
twice per pair and interleaved: once as is (Keras's defaults), once with the
snippet pasted in, in a random order (`sequential.pair_order`: a coin for
the first pair, then alternating; `--seed` fixes it). Each
script times `fit()` steps with a two-line LambdaCallback, and reports what
its compiled model holds (steps_per_execution, the dtype policy), so a paste
that did not take shows. Prints the per-pair speed-up, its median, and
whether it falls inside the interval `fitspeed tune` verified.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

from fitspeed.core.sequential import pair_order

SCRIPT = """
import json, time
import numpy as np
{process}
import keras
from fitspeed.trial.data.sources import synthetic
from fitspeed.trial import models
from fitspeed.core.workloads import MODELS
info = MODELS["{model}"]
x_train, y_train = synthetic(info.input_shape, info.num_classes, 0)
index = np.arange(({steps} + 64) * {batch}) % len(x_train)
x_train, y_train = x_train[index], y_train[index]
model = models.build("{model}")   # the architecture only; compiled here, as a user would
optimizer, loss = keras.optimizers.Adam(1e-3), "sparse_categorical_crossentropy"
model.compile(optimizer=optimizer, loss=loss, metrics=["accuracy"])
{compile}
{layout}
marks = {{}}
clock = keras.callbacks.LambdaCallback(on_train_batch_end=lambda b, logs: marks.__setitem__(b, time.perf_counter()))
model.fit(x_train[: 128 * {batch}], y_train[: 128 * {batch}], batch_size={batch}, epochs=1, verbose=0)
model.fit(x_train, y_train, batch_size={batch}, epochs=1, verbose=0, callbacks=[clock])
ends = sorted(marks)
print(json.dumps({{"samples_per_s": (ends[-1] - ends[0]) and ({batch} * (ends[-1] - ends[0]) / (marks[ends[-1]] - marks[ends[0]])),
                  "steps_per_execution": int(model.steps_per_execution), "policy": keras.config.dtype_policy().name}}))
"""


def script(snippet: str | None, model: str, batch: int, steps: int) -> str:
    process, compile_part, layout = "", "", ""
    if snippet:
        head, _, rest = snippet.partition("# Build and compile your model as before")
        process = head
        if "model.compile(" in rest:
            compile_part = "model.compile(optimizer=optimizer, loss=loss, metrics=['accuracy'], " + ", ".join(
                line.strip().rstrip(",") for line in rest.split("model.compile(", 1)[1].split(")")[0].splitlines()
                if "=" in line and "# your own" not in line) + ")"
        if "np.transpose" in snippet:
            layout = "x_train = np.transpose(x_train, (0, 3, 1, 2))"
    return SCRIPT.format(process=process, compile=compile_part, layout=layout, model=model, batch=batch,
                         steps=steps)


def run(code: str) -> dict[str, Any]:
    """The script's last line: its samples/s and what its model held."""
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True)
    return dict(json.loads(result.stdout.strip().splitlines()[-1]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("best", type=Path)
    parser.add_argument("--pairs", type=int, default=3)
    parser.add_argument("--steps", type=int, default=512)
    parser.add_argument("--seed", type=int, default=None, help="the pairs' order: a coin for each block of two pairs, the second the other way (default: a fresh coin)")
    args = parser.parse_args()
    seed = random.randrange(2**31) if args.seed is None else args.seed
    best = json.loads(args.best.read_text())
    model, batch = best["model"], best["best"]["config"]["batch_size"]
    plain = script(None, model, batch, args.steps)
    pasted = script(best["snippet"], model, batch, args.steps)
    ratios = []
    for pair in range(args.pairs):
        first = "B" if pair_order(seed, "snippet_speed", pair) else "A"  # a coin for each block of two pairs
        runs = {side: run(plain if side == "A" else pasted) for side in (first, "B" if first == "A" else "A")}
        a, b = runs["A"]["samples_per_s"], runs["B"]["samples_per_s"]
        ratios.append(b / a)
        print(f"pair {pair + 1} ({first}{'B' if first == 'A' else 'A'}): plain {a:9.0f}  with snippet {b:9.0f}  "
              f"speed-up {b / a:.3f}", flush=True)
        if pair == 0:
            for side, name in (("A", "plain"), ("B", "with snippet")):
                print(f"  {name}: steps_per_execution={runs[side]['steps_per_execution']}, "
                      f"dtype policy {runs[side]['policy']}", flush=True)
    median = statistics.median(ratios)
    estimate = best["best"].get("estimate") or {}
    low, high = estimate.get("ci_low"), estimate.get("ci_high")
    print(f"snippet: {best['best']['label']}")
    print(f"plain-script speed-up: median {median:.3f} over {args.pairs} pairs")
    if low is not None:
        inside = low <= median <= high
        print(f"tune verified {estimate['median']:.3f} (95% CI {low:.3f}-{high:.3f}); "
              f"inside the interval: {'yes' if inside else 'NO'}")


if __name__ == "__main__":
    main()
