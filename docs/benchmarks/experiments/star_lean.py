"""The lean step as a star, paired against main: the 2026-11-29 (day) development note.

    PYTHONPATH=$PWD/src python docs/benchmarks/experiments/star_lean.py --first 3014000 --worlds 1200 --jobs 2 \
        --out star.json --against main.json [--most-pairs 24]

First pass: every knob with no evidence of its own is looked at together against one incumbent. Each round
measures the incumbent once and the incumbent less each knob still open once, in a random order; each knob's
sequential test (LEAN_DESIGN, its prior as on main) takes the pair (incumbent less it, the round's incumbent).
Then each knob that showed no share goes, smallest estimate first (through the guard, as on main). A knob that
went while its pairs leaned its way (estimate >= MIN_SHARE) is looked at once more on top of the leaner
incumbent, in ordinary pairs, where more than one went. `--most-pairs` sets the lean step's most pairs (16 on
main) for both passes. `--sequential` keeps main's one-at-a-time pass instead: a knob whose test ends without a
share goes at once, and the knobs still open are measured against the leaner incumbent from the next round on
(the 2026-11-29 (afternoon) note). Development seeds only.

Both variants patch the one-at-a-time lean step of main at 998ef94, the tree they were measured on: run them
there (`git worktree add /tmp/t 998ef94`, PYTHONPATH=/tmp/t/src). The sequential variant, with each test's prior
widened by its two sides' own noise, is the lean step since the nineteenth round (`fitspeed.search.lean`).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import random
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "benchmarks"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import search_diagnosis  # noqa: E402
import search_variant  # noqa: E402

from fitspeed.core.sequential import step  # noqa: E402
from fitspeed.core.config import TrialConfig  # noqa: E402
from fitspeed.search import lean as lean_module  # noqa: E402
from fitspeed.search.decider import decision_id, search_noise, wider  # noqa: E402
from fitspeed.search.lean import MIN_SHARE, Lean, _shows_share, changed_knobs, own_evidence  # noqa: E402
from fitspeed.search.phase import Phase  # noqa: E402
from fitspeed.search.decision import Decision  # noqa: E402
from fitspeed.core.sequential import Verdict  # noqa: E402


def measure_round(self: Lean, incumbent: TrialConfig, arms: dict[str, TrialConfig], rng: random.Random,
                  label: str) -> dict[str | None, float | None]:
    """One round: the incumbent (key None) and each arm once, in a random order; each one's samples/s or None."""
    order: list[str | None] = [None, *arms]
    rng.shuffle(order)
    speeds: dict[str | None, float | None] = {}
    for k in order:
        config = incumbent if k is None else arms[k]
        record = self.tuner.measure(config, Phase.LEAN, f"{label}{k or 'inc'}", budgeted=False)
        speeds[k] = record.throughput if record else None
    return speeds


def run(self: Lean) -> TrialConfig:
    design = lean_module.LEAN_DESIGN
    tuner = self.tuner
    incumbent = tuner.ledger.incumbent()
    changes = changed_knobs(incumbent, tuner.base)
    if len(changes) < 2:
        return incumbent
    arms: dict[str, TrialConfig] = {}
    for knob, value in changes.items():
        if own_evidence(tuner.ledger.decisions(), knob, value) is not None:
            continue
        without = tuner.config_of({**changes, knob: getattr(tuner.base, knob)})
        if without is not None:
            arms[knob] = without
    if not arms:
        return incumbent
    ident = decision_id(Phase.LEAN, incumbent, incumbent) + "star"
    pairs: dict[str, list[tuple[float, float]]] = {k: [] for k in arms}
    priors = {k: search_noise(wider(tuner.ledger.noise(), tuner.ledger.pair_noise(w, incumbent))) for k, w in arms.items()}
    results = {k: step([], design, priors[k]) for k in arms}
    rng = random.Random(f"{tuner.settings.seed}/{ident}")
    for r in range(design.max_pairs):
        active = [k for k in arms if not results[k].verdict]
        if not active:
            break
        speeds = measure_round(self, incumbent, {k: arms[k] for k in active}, rng, f"#{ident}:{r}")
        middle = speeds[None]
        if middle is None:
            continue
        for k in active:
            side = speeds[k]
            if side is None:
                continue
            pairs[k].append((side, middle))
            results[k] = step([b / a for a, b in pairs[k]], design, priors[k])
    decisions = {k: tuner.decider.store(Phase.LEAN, arms[k], incumbent, pairs[k], results[k], design)
                 for k in arms}
    out = sorted((k for k in arms if not _shows_share(decisions[k])), key=lambda k: decisions[k].ratio or 0.0)
    gone = []
    for k in out:
        to = tuner.config_of({**changed_knobs(incumbent, tuner.base), k: getattr(tuner.base, k)})
        if to is None:
            continue
        incumbent, moved = self._move(incumbent, to)
        if moved:
            gone.append(k)
    if len(gone) > 1:
        for k in gone:
            if (decisions[k].ratio or 0.0) < MIN_SHARE:
                continue
            back = tuner.config_of({**changed_knobs(incumbent, tuner.base), k: changes[k]})
            if back is not None and _shows_share(tuner.decider.decide(Phase.LEAN, incumbent, back, design,
                                                                      budgeted=False)):
                incumbent, _ = self._move(incumbent, back)
    return incumbent


def run_sequential(self: Lean) -> TrialConfig:
    """The star that keeps main's one-at-a-time pass: a knob whose test ends without a share goes at once, and the
    knobs still open are measured from the next round on against the leaner incumbent (their earlier pairs kept)."""
    design = lean_module.LEAN_DESIGN
    tuner = self.tuner
    incumbent = tuner.ledger.incumbent()
    changes = changed_knobs(incumbent, tuner.base)
    if len(changes) < 2:
        return incumbent
    open_knobs = [k for k, v in changes.items() if own_evidence(tuner.ledger.decisions(), k, v) is None]

    def arm(k: str) -> TrialConfig | None:
        return tuner.config_of({**changed_knobs(incumbent, tuner.base), k: getattr(tuner.base, k)})

    arms = {k: a for k in open_knobs if (a := arm(k)) is not None}
    if not arms:
        return incumbent
    built_on = {k: incumbent for k in arms}  # the incumbent each arm is that incumbent less its knob
    ident = decision_id(Phase.LEAN, incumbent, incumbent) + "seqstar"
    pairs: dict[str, list[tuple[float, float]]] = {k: [] for k in arms}
    priors = {k: search_noise(wider(tuner.ledger.noise(), tuner.ledger.pair_noise(w, incumbent))) for k, w in arms.items()}
    results = {k: step([], design, priors[k]) for k in arms}
    rng = random.Random(f"{tuner.settings.seed}/{ident}")
    gone: dict[str, Decision] = {}
    for r in range(design.max_pairs):
        active = [k for k in arms if not results[k].verdict]
        if not active:
            break
        speeds = measure_round(self, incumbent, {k: arms[k] for k in active}, rng, f"#{ident}:{r}")
        middle = speeds[None]
        if middle is not None:
            for k in active:
                side = speeds[k]
                if side is not None:
                    pairs[k].append((side, middle))
                    results[k] = step([b / a for a, b in pairs[k]], design, priors[k])
        ended = [k for k in active if results[k].verdict or r == design.max_pairs - 1]
        for k in sorted(ended, key=lambda k: results[k].ratio or 0.0):
            decision = tuner.decider.store(Phase.LEAN, arms[k], built_on[k], pairs[k], results[k], design)
            if _shows_share(decision):
                continue
            to = arm(k)
            if to is None:
                continue
            incumbent, moved = self._move(incumbent, to)
            if moved:
                gone[k] = decision
                for j in [j for j in arms if j != k and not results[j].verdict and j not in ended]:
                    rebuilt = arm(j)
                    if rebuilt is None:
                        del arms[j]
                    else:
                        arms[j], built_on[j] = rebuilt, incumbent
        for k in ended:
            if not results[k].verdict:
                results[k] = dataclasses.replace(results[k], verdict=Verdict.NOT_CONFIRMED)
    if len(gone) > 1:
        for k, decision in gone.items():
            if (decision.ratio or 0.0) < MIN_SHARE:
                continue
            back = tuner.config_of({**changed_knobs(incumbent, tuner.base), k: changes[k]})
            if back is not None and back != incumbent and _shows_share(
                    tuner.decider.decide(Phase.LEAN, incumbent, back, design, budgeted=False)):
                incumbent, _ = self._move(incumbent, back)
    return incumbent


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--first", type=int, default=3_014_000)
    parser.add_argument("--worlds", type=int, default=600)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--jobs", type=int, default=1)
    parser.add_argument("--against", type=Path)
    parser.add_argument("--most-pairs", type=int, default=lean_module.LEAN_DESIGN.max_pairs)
    parser.add_argument("--sequential", action="store_true", help="a knob without a share goes as its test ends")
    args = parser.parse_args()
    lean_module.LEAN_DESIGN = dataclasses.replace(lean_module.LEAN_DESIGN, max_pairs=args.most_pairs)
    lean_module.LEAN_AGAIN = dataclasses.replace(lean_module.LEAN_DESIGN, alpha=lean_module.LEAN_DESIGN.alpha / 2)
    lean_module.Lean.run = run_sequential if args.sequential else run  # type: ignore[method-assign]
    result = search_diagnosis.diagnose(range(args.first, args.first + args.worlds), 40, 0.10, args.jobs)
    args.out.write_text(json.dumps(result))
    print("star", result["right"], result["helps"], round(result["captured"], 4),
          {name: round(count, 1) for name, count in result["trials"].items()})
    if args.against:
        print(search_variant.paired(json.loads(args.against.read_text()), result))


if __name__ == "__main__":
    main()
