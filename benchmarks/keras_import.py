"""How long a trial child takes to import keras, plainly and as a built-in trial does (`trial.keras_import`).

    python benchmarks/keras_import.py [--pairs 8] [--backend tensorflow]

Each pair runs two fresh processes in a random order: one `import keras`, one
`fitspeed.trial.keras_import.import_keras(backend)`, which leaves out the
optional packages keras would load for nothing (JAX under TensorFlow,
matplotlib). It prints each pair's seconds, the medians, the median ratio and
which of JAX and matplotlib each process ended up with.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys

CODE = {
    "plain": "import keras",
    "lean": "from fitspeed.trial.keras_import import import_keras; import_keras({backend!r})",
}
TIMED = """
import json, os, sys, time
began = time.perf_counter()
{code}
print(json.dumps({{"s": time.perf_counter() - began, "jax": "jax" in sys.modules,
                  "matplotlib": "matplotlib" in sys.modules}}))
"""


def once(kind: str, backend: str) -> dict[str, object]:
    env = dict(os.environ, KERAS_BACKEND=backend, TF_CPP_MIN_LOG_LEVEL="3")
    done = subprocess.run([sys.executable, "-c", TIMED.format(code=CODE[kind].format(backend=backend))],
                          env=env, capture_output=True, text=True, check=True)
    result: dict[str, object] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=8)
    parser.add_argument("--backend", default="tensorflow")
    args = parser.parse_args()
    runs: dict[str, list[dict[str, object]]] = {"plain": [], "lean": []}
    for _ in range(args.pairs):
        order = list(runs)
        random.shuffle(order)
        for kind in order:
            runs[kind].append(once(kind, args.backend))
    seconds = {kind: [float(r["s"]) for r in rs] for kind, rs in runs.items()}  # type: ignore[arg-type]
    for index, (plain, lean) in enumerate(zip(seconds["plain"], seconds["lean"])):
        print(f"pair {index + 1}: import keras {plain:.2f} s, as a trial does {lean:.2f} s")
    ratio = statistics.median(p / q for p, q in zip(seconds["plain"], seconds["lean"]))
    print(f"median: {statistics.median(seconds['plain']):.2f} s against {statistics.median(seconds['lean']):.2f} s; "
          f"median ratio {ratio:.2f} (backend {args.backend}, load average {os.getloadavg()[0]:.1f})")
    for kind, rs in runs.items():
        print(f"{kind}: jax loaded {rs[0]['jax']}, matplotlib loaded {rs[0]['matplotlib']}")


if __name__ == "__main__":
    main()
