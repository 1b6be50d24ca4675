"""A search that spends its middle on one joint design, paired against main: the 2026-11-29 (day) development note.

    PYTHONPATH=$PWD/src python docs/benchmarks/experiments/design_search.py design --thompson-from 0 \
        --first 3014000 --worlds 1200 --jobs 2 --out design.json --against main.json

`main.json` is `search_variant.py none` on the same worlds. The screen stays
as on main (it names a failing value and drops what comes in at 0.7x or
less); what follows it is patched in this process only:

- `design`: the rest of the search's budget goes to trials chosen over the
  screen's survivors (every combination, at most one value a knob): by
  Bayesian D-optimality (the configuration whose predicted log speed is most
  uncertain) for the first `--thompson-from` share of it, by Thompson
  sampling (the argmax of one posterior draw) after. The fit is the model
  phase's (`search.model`: each change and each pair of changes of different
  knobs, the same priors and Huber weights) over every timed trial. Its
  argmax, guarded, becomes the incumbent with no paired step; the lean step
  and the verification follow as on main;
- `design-challenge`: the same, but the argmax meets the defaults in fresh
  pairs (the model phase's challenge), with room kept for it.

Besides the paired difference in captured speed, `--against` prints it for
the incumbent handed to the lean step and for the one the lean step left.
Development seeds only.
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import random
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "benchmarks"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import search_diagnosis  # noqa: E402
import search_variant  # noqa: E402

from fitspeed.core.config import TrialConfig  # noqa: E402
from fitspeed.core.json_data import JSONObject  # noqa: E402
from fitspeed.search import model as model_module  # noqa: E402
from fitspeed.search import tuner as tuner_module  # noqa: E402
from fitspeed.search.batch_sizes import BatchSizes  # noqa: E402
from fitspeed.search.guard import numeric_changes  # noqa: E402
from fitspeed.search.lean import Lean  # noqa: E402
from fitspeed.search.phase import Phase  # noqa: E402
from fitspeed.search.screen import Screen  # noqa: E402

VARIANT = "design"
THOMPSON_FROM = 2 / 3
CHALLENGE_ROOM = 6  # design-challenge: trials kept for the argmax's pairs

Changes = frozenset[model_module.Item]


def posterior(tuner: tuner_module.Tuner) -> tuple[model_module.Fit, np.ndarray, np.ndarray, set[Changes]]:
    """The model phase's fit over every timed trial (its mean), its covariance (without the Huber weights),
    and the sets of changes whose every trial failed."""
    seen, failed = model_module.Model(tuner).observations()
    noise = tuner.ledger.noise()
    sd = max(noise.sd / math.sqrt(2), 0.02) if noise else model_module.DEFAULT_TRIAL_SD
    fit = model_module.fit(seen, sd)
    x = np.hstack([np.ones((len(seen), 1)), fit.features(c for c, _ in seen)])
    prior = np.diag([1e-6] + [model_module.MAIN_SD ** -2] * len(fit.items)
                    + [model_module.PAIR_SD ** -2] * len(fit.pairs))
    return fit, np.concatenate([[fit.intercept], fit.effects]), np.linalg.inv(x.T @ x / sd ** 2 + prior), failed


def candidates_of(tuner: tuner_module.Tuner, promising: list[tuple[TrialConfig, float]]) -> list[tuple[Changes, TrialConfig]]:
    """Every combination of the screen's survivors (at most one value a knob) the search can measure."""
    values: dict[str, list[Any]] = {}
    for config, _ in promising:
        for knob, value in model_module.changes_of(config, tuner.base, tuner.choices):
            if value not in values.setdefault(knob, []):
                values[knob].append(value)
    names = sorted(values)
    out = []
    for combo in itertools.product(*[[None, *values[k]] for k in names]):
        changes = frozenset((k, v) for k, v in zip(names, combo, strict=True) if v is not None)
        config = tuner.config_of({**tuner.base.to_dict(), **dict(changes)}, quiet=True)
        if config is not None:
            out.append((changes, config))
    return out


def features(fit: model_module.Fit, rows: list[tuple[Changes, TrialConfig]]) -> np.ndarray:
    return np.hstack([np.ones((len(rows), 1)), fit.features(c for c, _ in rows)])


def design_search(tuner: tuner_module.Tuner, promising: list[tuple[TrialConfig, float]]) -> None:
    """The design's trials, then its argmax (guarded) as the incumbent."""
    candidates = candidates_of(tuner, promising)
    if len(candidates) < 2:
        return
    room = CHALLENGE_ROOM if VARIANT == "design-challenge" else 0
    length = max(1, tuner.ledger.left() - room)
    rng = np.random.default_rng(random.Random(f"{tuner.settings.seed}/design").getrandbits(64))
    n = 0
    while not tuner.spent(room):
        fit, mean, cov, failed = posterior(tuner)
        allowed = [(c, config) for c, config in candidates if not any(f <= c for f in failed)]
        x = features(fit, allowed)
        score = (np.einsum("ij,jk,ik->i", x, cov, x) if n < THOMPSON_FROM * length
                 else x @ rng.multivariate_normal(mean, cov))
        if tuner.measure(allowed[int(np.argmax(score))][1], Phase.SAMPLER, f"#design{n}", ahead=room) is None:
            break
        n += 1
    rejected = set(tuner.ledger.rejected())
    while True:
        fit, mean, _, failed = posterior(tuner)
        allowed = [(c, config) for c, config in candidates if not any(f <= c for f in failed) and not c & rejected]
        changes, config = allowed[int(np.argmax(features(fit, allowed) @ mean))]
        if config == tuner.base:
            return
        verdict = tuner.guarded(config)
        if verdict is None or verdict.ok:
            break
        rejected |= set(numeric_changes(config, tuner.base).items())  # its numerics changes, not tried again
    if VARIANT == "design-challenge":
        tuner.challenge(tuner.base, config, Phase.MODEL)
    else:
        tuner.ledger.chain_add(config, tuner.base)


def _search(self: tuner_module.Tuner) -> JSONObject:
    """`Tuner._search` with the design in place of the combination, the sampler, the model and the polish."""
    self.workers.recover()
    self._name_budget()
    self.ledger.started = time.perf_counter()
    baseline = self._baseline()
    if baseline is None or baseline.throughput is None:
        return self.finish()
    self._learn_data_kind(baseline)
    self._fit_epoch(baseline)
    promising = Screen(self).run([d for d in self.dims if d.searched and d.knob != "batch_size"])
    design_search(self, promising)
    BatchSizes(self).run()
    self.settle()
    self.ledger.mark_searched()
    Lean(self).once()
    return self.finish()


def split(before: dict[str, Any], after: dict[str, Any]) -> str:
    """The paired difference in captured speed at the incumbent handed to the lean step and at the one it left."""
    rows_a = {row["seed"]: row for row in before["rows"]}
    rows_b = {row["seed"]: row for row in after["rows"]}
    seeds = [seed for seed, row in rows_a.items() if seed in rows_b and row["best_gain"] > 1 + 1e-9]
    out = []
    for key, what in (("handed_gain", "handed to the lean step"), ("leaned_gain", "left by the lean step")):
        d = [rows_b[s][key] / rows_b[s]["best_gain"] - rows_a[s][key] / rows_a[s]["best_gain"] for s in seeds]
        right = [sum(rows[s][key] >= 0.97 * rows[s]["best_gain"] for s in seeds) for rows in (rows_a, rows_b)]
        out.append(f"{what}: {statistics.fmean(d):+.4f} (se {statistics.stdev(d) / math.sqrt(len(d)):.4f}), "
                   f"within 3% {right[0]} -> {right[1]}")
    return "; ".join(out)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("variant", choices=["design", "design-challenge"])
    parser.add_argument("--first", type=int, default=3_014_000)
    parser.add_argument("--worlds", type=int, default=600)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--jobs", type=int, default=1)
    parser.add_argument("--against", type=Path)
    parser.add_argument("--thompson-from", type=float, default=THOMPSON_FROM)
    args = parser.parse_args()
    globals().update(VARIANT=args.variant, THOMPSON_FROM=args.thompson_from)
    tuner_module.Tuner._search = _search  # type: ignore[method-assign]
    result = search_diagnosis.diagnose(range(args.first, args.first + args.worlds), 40, 0.10, args.jobs)
    args.out.write_text(json.dumps(result))
    print(args.variant, result["right"], result["helps"], round(result["captured"], 4),
          {name: round(count, 1) for name, count in result["trials"].items()}, result["causes"])
    if args.against:
        against = json.loads(args.against.read_text())
        print(search_variant.paired(against, result))
        print(split(against, result))


if __name__ == "__main__":
    main()
