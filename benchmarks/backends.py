"""Samples/s of each Keras backend against TensorFlow's defaults, in interleaved pairs on this machine.

    python benchmarks/backends.py                 # tiny, mlp, cnn10 and examples/mnist_convnet.py
    python benchmarks/backends.py --pairs 4 --workloads tiny

For each workload and each installed backend other than TensorFlow it runs
`fitspeed compare WORKLOAD --b backend=NAME --pairs N --json` (each trial a
fresh process, A and B in a random order per pair) and prints one Markdown
row: both medians, B/A with its 95% interval, and the verdict. The figures
are ratios measured in one run: the machine is shared and noisy.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import shlex
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
WORKLOADS = {
    "tiny": ["tiny"],
    "mlp": ["mlp"],
    "cnn10": ["cnn10", "--set", "batch_size=128"],
    "mnist_convnet.py": ["--", sys.executable, str(ROOT / "examples" / "mnist_convnet.py"), "--synthetic",
                         "--epochs", "2"],
}


def compare(workload: list[str], backend: str, pairs: int) -> tuple[list[str], dict]:
    head, script = ([], workload) if workload[0] == "--" else (workload[:1], workload[1:])
    args = ["compare", *head, "--b", f"backend={backend}", "--pairs", str(pairs), "--json", *script]
    with tempfile.TemporaryDirectory() as folder:  # the results file stays out of the repository
        done = subprocess.run([sys.executable, "-m", "fitspeed", *args], capture_output=True, text=True, cwd=folder)
    if done.returncode != 0:
        return args, {"error": done.stderr.strip().splitlines()[-1] if done.stderr.strip() else "failed"}
    return args, json.loads(done.stdout[done.stdout.index("{"):])


def median_of(trials: list[dict], arm: str) -> float | None:
    speeds = [t["metrics"]["samples_per_s"]["median"] for t in trials
              if t.get("arm") == arm and t.get("status") == "ok"]
    return statistics.median(speeds) if speeds else None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=4)
    parser.add_argument("--workloads", default=",".join(WORKLOADS))
    args = parser.parse_args()
    backends = [name for name in ("jax", "torch") if importlib.util.find_spec(name) is not None]
    print("| workload | backend | TensorFlow samples/s | backend samples/s | B/A (95% CI) | verdict | command |")
    print("|---|---|---|---|---|---|---|")
    for name in args.workloads.split(","):
        for backend in backends:
            command, result = compare(WORKLOADS[name], backend, args.pairs)
            shown = "fitspeed " + shlex.join(command).replace(sys.executable, "python").replace(str(ROOT) + "/", "")
            if "error" in result:
                print(f"| {name} | {backend} | – | – | – | failed: {result['error']} | `{shown}` |", flush=True)
                continue
            estimate = result.get("estimate") or {}
            a, b = median_of(result["trials"], "a"), median_of(result["trials"], "b")
            ratio = (f"{estimate['median']:.2f}× ({estimate['ci_low']:.2f}–{estimate['ci_high']:.2f})"
                     if estimate.get("ci_low") is not None else "–")
            print(f"| {name} | {backend} | {a and f'{a:,.0f}'} | {b and f'{b:,.0f}'} | {ratio} | "
                  f"{result['verdict']} | `{shown}` |", flush=True)


if __name__ == "__main__":
    main()
