"""fitspeed from Python against `fitspeed tune` on the same model: the same kind of verdict, within each other's intervals.

    python benchmarks/notebook_api.py [--out FOLDER] [--knobs steps_per_execution] [--pairs 5] [--trials N]
        [--screen-only]

One small CNN (examples/notebook.ipynb's) on one set of arrays, tuned four ways
at the same budget (`--trials`, by default what the search needs), each in its own study:

1. `fitspeed tune nb_model:model --data nb_model:data` (the CLI, the model written as a module);
2. `fitspeed.tune(model, x, y)` with the compiled model in memory;
3. `fitspeed.tune(build, x, y)` with a builder defined in this script's `__main__`, as in a cell;
4. `fitspeed.tune("model.keras", x, y)` with a saved model's path.

Then the answer of (2) applied with `result.apply(model)`, and timed with
`fitspeed.measure` against the model as given, in interleaved pairs (the
applied model under the answer's knobs, the given one under the defaults):
the ratio must lie in (2)'s verified interval. Prints one JSON object.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

from fitspeed.core.study_summary import StudySummary

MODULE = '''
import numpy as np
import keras


def model():
    inputs = keras.Input((16, 16, 3))
    h = inputs
    for width in (16, 32):
        h = keras.layers.Conv2D(width, 3, padding="same", use_bias=False)(h)
        h = keras.layers.BatchNormalization()(h)
        h = keras.layers.ReLU()(h)
        h = keras.layers.MaxPooling2D()(h)
    outputs = keras.layers.Dense(2, activation="softmax")(keras.layers.GlobalAveragePooling2D()(h))
    built = keras.Model(inputs, outputs, name="notebook_cnn")
    built.compile(optimizer="adam", loss="sparse_categorical_crossentropy", metrics=["accuracy"])
    return built


def arrays():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(2048, 16, 16, 3)).astype("float32")
    y = (x.mean(axis=(1, 2, 3)) > 0).astype("int64")
    return x, y


def data():
    x, y = arrays()
    return {"x": x[:-256], "y": y[:-256], "x_val": x[-256:], "y_val": y[-256:]}
'''


def verdict_of(summary: StudySummary) -> dict:
    """A study's row: its answer, the verification's verdict, and its estimate with the interval (None unclaimed)."""
    best = summary.best
    estimate = best.estimate or {}
    return {"study": summary.study, "answer": best.label if best.claimed else "defaults",
            "claimed": best.claimed, "verdict": best.verdict,
            "estimate": estimate.get("median"), "ci": [estimate.get("ci_low"), estimate.get("ci_high")]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("notebook-api-bench"))
    parser.add_argument("--knobs", default="steps_per_execution")
    parser.add_argument("--pairs", type=int, default=5, help="measure pairs for the applied model")
    parser.add_argument("--trials", type=int, default=None,
                        help="trial processes per study [default: what the search needs]; too few to verify an "
                             "answer are refused, unless --screen-only")
    parser.add_argument("--screen-only", action="store_true",
                        help="each way times each knob once and decides nothing (`fitspeed tune --screen-only`)")
    args = parser.parse_args()
    for name in ("pairs", "trials"):
        value = getattr(args, name)
        if value is not None and value < 1:
            parser.error(f"--{name} must be at least 1. Received: {value}.")
    out = args.out.absolute()
    out.mkdir(parents=True, exist_ok=True)
    os.chdir(out)
    (out / "nb_model.py").write_text(MODULE)
    sys.path.insert(0, str(out))
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(out), os.environ.get("PYTHONPATH")]))
    import nb_model

    import fitspeed

    storage = f"sqlite:///{out / 'studies.db'}"
    budget = {"knobs": args.knobs, "steps": 64, "repeats": 2, "trials": args.trials, "storage": storage,
              "progress": False, "screen_only": args.screen_only}
    rows: dict[str, dict] = {}
    started = time.time()
    cli = subprocess.run([sys.executable, "-m", "fitspeed", "tune", "nb_model:model", "--data", "nb_model:data",
                          "--knobs", args.knobs, "--steps", "64", "--repeats", "2", "--storage", storage,
                          "--study", "cli", "--json", "--best", str(out / "cli-best.json"),
                          *(["--trials", str(args.trials)] if args.trials else []),
                          *(["--screen-only"] if args.screen_only else [])],
                         capture_output=True, text=True)
    if cli.returncode != 0:
        sys.exit(cli.stderr)
    rows["cli: fitspeed tune nb_model:model --data nb_model:data"] = verdict_of(StudySummary.from_dict(json.loads(cli.stdout)))
    x, y = nb_model.arrays()
    train, held = (x[:-256], y[:-256]), (x[-256:], y[-256:])
    model = nb_model.model()
    in_memory = fitspeed.tune(model, *train, validation_data=held, study="memory", **budget)
    rows["python: fitspeed.tune(model, x, y)"] = verdict_of(in_memory.summary)

    def build():  # defined in __main__, as a notebook cell defines it: shipped with cloudpickle
        return nb_model.model()

    rows["python: fitspeed.tune(build, x, y)"] = verdict_of(
        fitspeed.tune(build, *train, validation_data=held, study="builder", **budget).summary)
    model.save(out / "model.keras")
    rows["python: fitspeed.tune('model.keras', x, y)"] = verdict_of(
        fitspeed.tune(str(out / "model.keras"), *train, validation_data=held, study="saved", **budget).summary)
    applied = in_memory.apply(model)
    ratios = []
    for pair in range(args.pairs):  # interleaved, the order alternating
        first_given = pair % 2 == 0
        records = {}
        for which in (("given", "applied") if first_given else ("applied", "given")):
            if which == "given":
                records[which] = fitspeed.measure(model, *train, steps=64, repeats=2)
            else:
                records[which] = fitspeed.measure(applied, *train, config=in_memory.best, steps=64, repeats=2)
        ratios.append(records["applied"].throughput / records["given"].throughput)
    low, high = rows["python: fitspeed.tune(model, x, y)"]["ci"]
    median = statistics.median(ratios)
    print(json.dumps({"tunes": rows, "applied": {
        "answer": in_memory.best.label(), "pairs": [round(r, 3) for r in ratios], "median": round(median, 3),
        "within_the_verified_interval": (low is not None and low <= median <= high)},
        "wall_s": round(time.time() - started)}, indent=2))


if __name__ == "__main__":
    main()
