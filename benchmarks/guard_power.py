"""The numerics guard's three rates, measured through the real rule (`guard.seeds_needed`, `guard.judge`).

    python benchmarks/guard_power.py --json            # simulated seeds: about 30 s of CPU
    python benchmarks/guard_power.py --real --seeds 10  # tiny, trained for real: about 10 minutes on 2 cores

Simulated: each study draws a baseline's held-out loss at MAX_SEEDS seeds,
1.0 + sigma x e_b, and a candidate's at the same seeds, 1.0 + gap + sigma x
(rho x e_b + sqrt(1 - rho^2) x e_c): rho is how much a seed's two runs agree
(the same init and data order), the noise e is normal, heavy-tailed (t, 3
degrees of freedom) or skewed (a centred lognormal), each scaled to sd 1. The
runs become `GuardRun`s; the first FIRST_SEEDS pairs go to
`guard.seeds_needed`, the first N of each to `guard.judge`, as the tuner does.
Three candidates, in baseline sds: one worse by one sd (`power_at_1sd`: share
rejected, at worst; `power_at_1sd_rho_0.8_or_more` where the pairs
correlate), one that learns the same (`false_rejections`), one lower by one sd
(`lower_loss_rejections`) and one lower by a quarter sd; beside them, how many rejections had a
mean gap at or below 0 (never allowed) and the mean seeds used. Each is
reported per setting and at its worst.

--real trains `tiny` for real at --seeds seeds (train-mode trials as the
tuner's guard runs them, `guard.guard_spec`): the baseline, mixed_bfloat16, and
the baseline with the test fault FITSPEED_TEST_FAULT=lr_x10 (the learning rate
x10), and reports the baseline's seed-to-seed sd, each candidate's paired
correlation and gap, and the guard's verdict through the real rule.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import os
import random
import statistics
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from fitspeed.core.stats import share_interval
from fitspeed.search import guard

RHOS = (0.0, 0.5, 0.8, 0.95)
GAPS = {"power_at_1sd": 1.0, "false_rejections": 0.0, "lower_loss_rejections": -1.0,  # in baseline sds
        "lower_by_quarter_sd_rejections": -0.25}


def _normal(rng: random.Random) -> float:
    return rng.gauss(0.0, 1.0)


def _heavy(rng: random.Random) -> float:  # Student's t, 3 degrees of freedom, scaled to sd 1 (its sd is sqrt(3))
    return rng.gauss(0.0, 1.0) / math.sqrt(sum(rng.gauss(0.0, 1.0) ** 2 for _ in range(3)) / 3) / math.sqrt(3)


def _skewed(rng: random.Random) -> float:  # lognormal(0, 0.75), centred and scaled to sd 1
    s = 0.75
    mean, sd = math.exp(s * s / 2), math.sqrt((math.exp(s * s) - 1) * math.exp(s * s))
    return (math.exp(rng.gauss(0.0, s)) - mean) / sd


SHAPES: dict[str, Callable[[random.Random], float]] = {"normal": _normal, "heavy": _heavy, "skewed": _skewed}


def _runs(losses: list[float]) -> list[guard.GuardRun]:
    return [guard.GuardRun("ok", curve=(2.3, loss), val_loss=loss) for loss in losses]


def study(rng: random.Random, rho: float, gap: float, noise: Callable[[random.Random], float],
          sigma: float = 0.05) -> tuple[bool, float, int]:
    """One guard decision on simulated seeds: (rejected, the observed mean gap, the seeds it took)."""
    base, cand = [], []
    for _ in range(guard.MAX_SEEDS):
        shared, own = noise(rng), noise(rng)
        base.append(1.0 + sigma * shared)
        cand.append(1.0 + gap * sigma + sigma * (rho * shared + math.sqrt(1 - rho * rho) * own))
    baseline, candidate = _runs(base), _runs(cand)
    n = guard.seeds_needed(baseline[:guard.FIRST_SEEDS], candidate[:guard.FIRST_SEEDS])
    verdict = guard.judge(baseline[:n], candidate[:n])
    return not verdict.ok, statistics.fmean(cand[:n]) - statistics.fmean(base[:n]), n


def simulate(studies: int, seed: int) -> dict[str, Any]:
    rng = random.Random(seed)
    rows = []
    for shape, noise in SHAPES.items():
        for rho in RHOS:
            row: dict[str, Any] = {"shape": shape, "rho": rho}
            for name, gap in GAPS.items():
                found = [study(rng, rho, gap, noise) for _ in range(studies)]
                rejected = sum(r for r, _, _ in found)
                row[name] = rejected / studies
                row[name + "_ci"] = share_interval(rejected, studies)
                row[name + "_at_or_below_0"] = sum(r and d <= 0 for r, d, _ in found)
                row[name + "_seeds"] = statistics.fmean(n for _, _, n in found)
            rows.append(row)
    worst = {"power_at_1sd": min(r["power_at_1sd"] for r in rows),
             "false_rejections": max(r["false_rejections"] for r in rows),
             "lower_loss_rejections": max(r["lower_loss_rejections"] for r in rows),
             "lower_by_quarter_sd_rejections": max(r["lower_by_quarter_sd_rejections"] for r in rows)}
    pooled_false = statistics.fmean(r["false_rejections"] for r in rows)
    return {
        **worst,
        "power_at_1sd_rho_0.8_or_more": min(r["power_at_1sd"] for r in rows if r["rho"] >= 0.8),
        "false_rejections_pooled": pooled_false,
        "rejections_with_mean_gap_at_or_below_0": sum(r[n + "_at_or_below_0"] for r in rows for n in GAPS),
        "mean_seeds": statistics.fmean(r[n + "_seeds"] for r in rows for n in GAPS),
        "studies_per_setting": studies, "seed": seed,
        "rule": {"first_seeds": guard.FIRST_SEEDS, "max_seeds": guard.MAX_SEEDS, "level": guard.LEVEL,
                 "power": guard.POWER},
        "settings": rows,
    }


def real(seeds: int) -> dict[str, Any]:
    """tiny trained for real at `seeds` seeds: the baseline, mixed_bfloat16, and a learning rate x10."""
    from fitspeed.core.config import TrialConfig
    from fitspeed.core.record import TrialSpec
    from fitspeed.measure.runner import run_trial
    from fitspeed.trial import faults

    spec = TrialSpec(model="tiny", seed=0)

    def train(config: TrialConfig, fault: str | None) -> list[guard.GuardRun]:
        env = {k: v for k, v in os.environ.items() if k != faults.ENV} | ({faults.ENV: fault} if fault else {})
        specs = [guard.guard_spec(dataclasses.replace(spec, config=config), TrialConfig(), s)
                 for s in guard.seeds(spec, seeds)]
        with ThreadPoolExecutor(max_workers=2) as pool:
            return [guard.GuardRun.from_record(r) for r in pool.map(lambda s: run_trial(s, env=env), specs)]

    started = time.perf_counter()
    baseline = train(TrialConfig(), None)
    base = [r.val_loss for r in baseline if r.val_loss is not None]
    out: dict[str, Any] = {"model": "tiny", "seeds": seeds, "baseline_val_loss": base,
                           "baseline_sd": statistics.stdev(base) if len(base) > 1 else None, "candidates": {}}
    for label, config, fault in (("mixed_bfloat16", TrialConfig(precision="mixed_bfloat16"), None),
                                 ("lr_x10", TrialConfig(), "lr_x10")):
        runs = train(config, fault)
        losses = [r.val_loss for r in runs]
        paired = [(b, c) for b, c in zip(base, losses) if c is not None and math.isfinite(c)]
        n = guard.seeds_needed(baseline[:guard.FIRST_SEEDS], runs[:guard.FIRST_SEEDS])
        verdict = guard.judge(baseline[:n], runs[:n])
        every = guard.judge(baseline, runs)
        out["candidates"][label] = {
            "val_loss": losses,
            "correlation": statistics.correlation(*zip(*paired)) if len(paired) > 2 else None,
            "gap_in_sds": (statistics.fmean(c - b for b, c in paired) / out["baseline_sd"]
                           if paired and out["baseline_sd"] else None),
            "seeds_used": n, "ok": verdict.ok, "reason": verdict.reason,
            "ok_at_every_seed": every.ok}
    out["wall_s"] = time.perf_counter() - started
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--studies", type=int, default=800, help="simulated guard decisions per setting and gap")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--real", action="store_true", help="train tiny for real instead (minutes)")
    parser.add_argument("--seeds", type=int, default=guard.MAX_SEEDS, help="--real: seeds per configuration")
    args = parser.parse_args()
    started = time.perf_counter()
    result = real(args.seeds) if args.real else simulate(args.studies, args.seed)
    if args.json:
        print(json.dumps(result, indent=1))
        return
    if args.real:
        print(f"tiny, {args.seeds} seeds: baseline held-out loss sd {result['baseline_sd']:.4g}")
        for label, c in result["candidates"].items():
            print(f"  {label}: correlation {c['correlation']}, gap {c['gap_in_sds']} sds, {c['seeds_used']} seeds: "
                  f"{'passes' if c['ok'] else 'REJECTED'}: {c['reason']}")
        return
    print("| noise | rho | power at 1 sd | false rejections (95% CI) | rejections 1 sd lower / ¼ sd lower | "
          "mean seeds (1 sd worse / same) |")
    print("|---|---|---|---|---|---|")
    for r in result["settings"]:
        low, high = r["false_rejections_ci"]
        print(f"| {r['shape']} | {r['rho']:g} | {100 * r['power_at_1sd']:.1f}% | {100 * r['false_rejections']:.1f}% "
              f"({100 * low:.1f}–{100 * high:.1f}%) | {100 * r['lower_loss_rejections']:.1f}% / "
              f"{100 * r['lower_by_quarter_sd_rejections']:.1f}% | "
              f"{r['power_at_1sd_seeds']:.1f} / {r['false_rejections_seeds']:.1f} |")
    print(f"\nworst: power at 1 sd {100 * result['power_at_1sd']:.1f}% (where a seed's runs correlate at 0.8 or "
          f"more {100 * result['power_at_1sd_rho_0.8_or_more']:.1f}%), false rejections "
          f"{100 * result['false_rejections']:.1f}% (pooled {100 * result['false_rejections_pooled']:.2f}%), "
          f"rejections of a loss 1 sd lower {100 * result['lower_loss_rejections']:.1f}% (¼ sd lower "
          f"{100 * result['lower_by_quarter_sd_rejections']:.1f}%); rejections with a mean gap <= 0: "
          f"{result['rejections_with_mean_gap_at_or_below_0']}; {time.perf_counter() - started:.0f} s")


if __name__ == "__main__":
    main()
