"""The numerics guard's four rates at its margin, measured through the real rule (`guard.seeds_needed`, `guard.judge`, `guard.replicate`).

    python benchmarks/guard_power.py --json            # simulated seeds: a few minutes of CPU at 2,000 studies
    python benchmarks/guard_power.py --real --models tiny --seeds 10   # trained for real: minutes to hours

Simulated: each study draws a baseline's held-out loss at 2 x MAX_SEEDS seeds,
1.0 + sigma x e_b, and a candidate's at the same seeds, 1.0 + gap + sigma x
(rho x e_b + sqrt(1 - rho^2) x e_c): rho is how much a seed's two runs agree
(the same init and data order), the noise e is normal, heavy-tailed (t, 3
degrees of freedom) or skewed (a centred lognormal), each scaled to sd 1. The
margin is the guard's default, 1% of the baseline's loss (0.01), and sigma is
set so that a seed's gap varies by `ratio` margins (0.5 to 4: where it is over
1, the rule's 24 seeds cannot see twice the margin at 80%, and a pass says so).
The runs become `GuardRun`s; the first FIRST_SEEDS pairs go to
`guard.seeds_needed`, the first N of each to `guard.judge`, and where they
fail on the paired gap alone, seeds N to 2N - 1 to `guard.replicate`, as the
tuner does. Four candidates, in margins: one that learns the same
(`false_rejections`: share rejected, at worst), one half a margin worse
(`pass_at_half_margin`: share passed, at worst), one two margins worse
(`power_at_2x_margin`: share rejected, at worst where the seeds can see it;
beside it the power where they cannot, and how often such a pass said so) and
one a margin lower (`lower_loss_rejections`); and how many rejections had an
observed mean gap at or below the margin (the rule cannot make one).

--real trains workloads for real (`--models`: tiny, cnn10, the builder module
examples/bn_cnn.py, and the script tests/fixtures/scripts/conv_train.py as
`-- python conv_train.py` runs it), each run a train-mode trial as the tuner's
guard runs it (`guard.guard_spec`): the baseline, and the candidates
mixed_bfloat16, a learning rate x10 (FITSPEED_TEST_FAULT=lr_x10), the softmax
output in float16 (softmax_float16, under mixed_bfloat16) and the training
labels permuted (label_shuffle); a script's trial applies no fault, so a
script is judged on mixed_bfloat16 alone. Each side runs the first stage (at
least --seeds seeds) and then the seeds the rule asks for, at most --most. It
reports the baseline's seed-to-seed sd, each candidate's paired correlation
(rho) and gap, the verdict through the real rule, the verdict on the loss
alone (without the float32-output check) and the wall time a run. Every run
is kept in --out (a JSON line each), so a rerun goes on where one stopped.
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

RHOS = (0.0, 0.8, 0.95)
# sd of a seed's gap (candidate - baseline) over the margin: 0.5-1 the rule's 24 seeds see twice the margin at 80%;
# 2 and 4 they cannot (it would take 72 and 288), and the verdict says so (`PairedGap.blind`)
RATIOS = (0.5, 1.0, 2.0, 4.0)
SEEABLE = 1.0  # the largest ratio at which MAX_SEEDS seeds reach POWER at twice the margin
GAPS = {"false_rejections": 0.0, "half_margin_rejections": 0.5, "power_at_2x_margin": 2.0,  # in margins
        "lower_loss_rejections": -1.0}


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
          ratio: float = 1.0) -> tuple[bool, float, int, bool, bool]:
    """One guard decision on simulated seeds, as the tuner makes it, at the default margin (1% of a loss of 1.0):
    (rejected, the observed mean gap over the rule's N seeds, in margins, the seeds it took a side, whether a
    failure was replicated on N fresh seeds, whether a pass said its seeds could not see twice the margin).

    `gap` is the candidate's true gap in margins; `ratio` the sd of a seed's gap over the margin; `rho` how much a
    seed's two runs agree (it sets each run's own sd, which the spread test reads).
    """
    delta = guard.MARGIN
    sigma = ratio * delta / math.sqrt(2 * (1 - rho))  # each run's seed-to-seed sd, for a gap sd of ratio x delta
    base, cand = [], []
    for _ in range(2 * guard.MAX_SEEDS):  # the rule's N, and N fresh seeds where a failure is replicated
        shared, own = noise(rng), noise(rng)
        base.append(1.0 + sigma * shared)
        cand.append(1.0 + gap * delta + sigma * (rho * shared + math.sqrt(1 - rho * rho) * own))
    baseline, candidate = _runs(base), _runs(cand)
    n = guard.seeds_needed(baseline[:guard.FIRST_SEEDS], candidate[:guard.FIRST_SEEDS])
    verdict = guard.judge(baseline[:n], candidate[:n])
    again = guard.replicates(baseline[:n], candidate[:n], verdict)
    if again:
        verdict = guard.replicate(verdict, baseline[n:2 * n], candidate[n:2 * n])
    blind = verdict.ok and any(check.blind for check in verdict.checks[:1])
    observed = (statistics.fmean(cand[:n]) - statistics.fmean(base[:n])) / delta
    return not verdict.ok, observed, 2 * n if again else n, again, blind


def simulate(studies: int, seed: int) -> dict[str, Any]:
    rng = random.Random(seed)
    rows = []
    for shape, noise in SHAPES.items():
        for rho in RHOS:
            for ratio in RATIOS:
                row: dict[str, Any] = {"shape": shape, "rho": rho, "ratio": ratio}
                for name, gap in GAPS.items():
                    found = [study(rng, rho, gap, noise, ratio) for _ in range(studies)]
                    rejected = sum(r for r, *_ in found)
                    row[name] = rejected / studies
                    row[name + "_ci"] = share_interval(rejected, studies)
                    row[name + "_at_or_below_margin"] = sum(r and d <= 1.0 for r, d, *_ in found)
                    row[name + "_seeds"] = statistics.fmean(n for _, _, n, _, _ in found)
                    row[name + "_replicated"] = sum(again for _, _, _, again, _ in found) / studies
                    row[name + "_said_blind"] = sum(blind for *_, blind in found) / studies
                rows.append(row)
    seeable = [r for r in rows if r["ratio"] <= SEEABLE]
    blind = [r for r in rows if r["ratio"] > SEEABLE]
    return {
        "false_rejections": max(r["false_rejections"] for r in rows),
        "pass_at_half_margin": min(1 - r["half_margin_rejections"] for r in rows),
        "power_at_2x_margin": min(r["power_at_2x_margin"] for r in seeable),
        "lower_loss_rejections": max(r["lower_loss_rejections"] for r in rows),
        # where the seeds cannot see twice the margin: the power they have, and how often a pass said so
        "power_at_2x_margin_where_seeds_cannot_see_it": min(r["power_at_2x_margin"] for r in blind),
        "passes_at_2x_margin_that_said_so": min(
            r["power_at_2x_margin_said_blind"] / max(1e-9, 1 - r["power_at_2x_margin"]) for r in blind),
        "rejections_with_mean_gap_at_or_below_margin": sum(r[n + "_at_or_below_margin"] for r in rows for n in GAPS),
        "mean_seeds": {name: statistics.fmean(r[name + "_seeds"] for r in rows) for name in GAPS},
        "studies_per_setting": studies, "seed": seed,
        "rule": {"first_seeds": guard.FIRST_SEEDS, "max_seeds": guard.MAX_SEEDS, "level": guard.LEVEL,
                 "gap_level": guard.GAP_LEVEL, "power": guard.POWER, "replication_level": guard.REPLICATION_LEVEL,
                 "margin": guard.MARGIN},
        "settings": rows,
    }


MODELS = ("tiny", "cnn10", "bn_cnn", "script")
SCRIPT = "tests/fixtures/scripts/conv_train.py"  # a user's BN convnet as a script: `fitspeed tune -- python conv_train.py`
# (label, precision, test fault): the candidates each model is judged on; a script's trial applies no fault
CANDIDATES = (("mixed_bfloat16", "mixed_bfloat16", None), ("lr_x10", "float32", "lr_x10"),
              ("softmax_float16", "mixed_bfloat16", "softmax_float16"), ("label_shuffle", "float32", "label_shuffle"))


def _model_spec(name: str, folder: str) -> tuple[Any, dict[str, str], str | None]:
    """The workload's TrialSpec, the environment its trials need, and the folder a script runs in."""
    import sys

    from fitspeed.core.record import TrialSpec
    from fitspeed.measure import training_command

    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = {k: v for k, v in os.environ.items() if k != "FITSPEED_TEST_FAULT"} | {"TF_CPP_MIN_LOG_LEVEL": "3"}
    if name == "bn_cnn":  # examples/bn_cnn.py: a user's builder module, as `fitspeed tune bn_cnn:model` takes it
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [os.path.join(root, "examples"), env.get("PYTHONPATH")]))
        return TrialSpec(model="bn_cnn:model", seed=0), env, None
    if name == "script":
        script = training_command.describe([sys.executable, os.path.join(root, SCRIPT)], cwd=folder)
        return (TrialSpec(model=training_command.label(script), data=training_command.DATA, script=script, seed=0),
                env, folder)
    return TrialSpec(model=name, seed=0), env, None


def _losses(baseline: list[guard.GuardRun], candidate: list[guard.GuardRun]) -> tuple[str, list[float], list[float]]:
    """The measure the guard judges and each side's values: held-out loss where every run has one (as `judge`)."""
    runs = [*baseline, *candidate]
    if all(run.val_loss is not None for run in runs):
        return ("held-out loss", [r.val_loss for r in baseline if r.val_loss is not None],
                [r.val_loss for r in candidate if r.val_loss is not None])
    return ("final training loss", [r.final for r in baseline if r.final is not None],
            [r.final for r in candidate if r.final is not None])


def _store(path: str) -> dict[str, dict[str, Any]]:
    """The guard runs made so far (a JSON line each, appended and flushed): a rerun goes on where one stopped."""
    found: dict[str, dict[str, Any]] = {}
    if os.path.exists(path):
        with open(path) as lines:
            for line in lines:
                try:
                    row = json.loads(line)
                except json.JSONDecodeError:  # a half-written last line
                    continue
                found[row["key"]] = row
    return found


def real_model(name: str, seeds: int, most: int, out: str, only: tuple[str, ...] = ()) -> dict[str, Any]:
    """One workload trained for real through the guard's rule: the baseline and each candidate.

    Each side runs the first FIRST_SEEDS seeds (and at least `seeds`, for the
    correlation), then the seeds `guard.seeds_needed` asks for, at most `most`, and N fresh seeds where a
    failure on the gap alone is replicated (`guard.replicates`; where 2N is over `most`, the first N's verdict stands)
    (where the rule asks for more, the verdict is at `most` and says so).
    """
    from fitspeed.core.config import TrialConfig
    from fitspeed.measure.runner import run_trial
    from fitspeed.trial import faults

    os.makedirs(out, exist_ok=True)
    folder = os.path.join(out, f"{name}-cwd")
    os.makedirs(folder, exist_ok=True)
    spec, env, cwd = _model_spec(name, folder)
    path = os.path.join(out, "runs.jsonl")
    done = _store(path)

    def train(label: str, precision: str, fault: str | None, upto: int) -> list[guard.GuardRun]:
        config = TrialConfig(precision=precision)
        wanted = guard.seeds(spec, upto)
        todo = [s for s in wanted if f"{name}/{label}/{s}" not in done]
        child = env | ({faults.ENV: fault} if fault else {})

        def one(seed: int) -> dict[str, Any]:
            started = time.perf_counter()
            record = run_trial(guard.guard_spec(dataclasses.replace(spec, config=config), TrialConfig(), seed),
                               env=child, cwd=cwd)
            row = {"key": f"{name}/{label}/{seed}", "run": guard.GuardRun.from_record(record).to_dict(),
                   "wall_s": time.perf_counter() - started, "notes": list(record.notes)}
            with open(path, "a") as lines:
                lines.write(json.dumps(row) + "\n")
                lines.flush()
            return row

        with ThreadPoolExecutor(max_workers=2) as pool:  # two trial processes at once on a 2-core machine
            for row in pool.map(one, todo):
                done[row["key"]] = row
        return [guard.GuardRun.from_dict(done[f"{name}/{label}/{s}"]["run"]) for s in wanted]

    started = time.perf_counter()
    first = max(guard.FIRST_SEEDS, seeds)
    baseline = train("baseline", "float32", None, first)
    result: dict[str, Any] = {"model": spec.model, "candidates": {}}
    candidates = [c for c in CANDIDATES if (c[2] is None or name != "script") and (not only or c[0] in only)]
    for label, precision, fault in candidates:
        runs = train(label, precision, fault, first)
        loss_alone = [dataclasses.replace(r, output_dtype=None) for r in runs]  # what the loss shows by itself
        needed = guard.seeds_needed(baseline[:guard.FIRST_SEEDS], loss_alone[:guard.FIRST_SEEDS])
        if needed > first:
            upto = min(needed, most)
            baseline = train("baseline", "float32", None, max(upto, len(baseline)))
            runs = train(label, precision, fault, upto)
            loss_alone = [dataclasses.replace(r, output_dtype=None) for r in runs]
        n = min(needed, len(runs))
        script = name == "script"
        verdict = guard.judge(baseline[:n], runs[:n], script=script)
        alone = guard.judge(baseline[:n], loss_alone[:n], script=script)
        again = [guard.replicates(baseline[:n], side[:n], judged) for side, judged in ((runs, verdict),
                                                                                        (loss_alone, alone))]
        if any(again) and n == needed and 2 * n <= most:  # a failure on the gap alone: N fresh seeds replicate it
            baseline = train("baseline", "float32", None, max(2 * n, len(baseline)))
            runs = train(label, precision, fault, max(2 * n, len(runs)))
            loss_alone = [dataclasses.replace(r, output_dtype=None) for r in runs]
            if again[0]:
                verdict = guard.replicate(verdict, baseline[n:2 * n], runs[n:2 * n], script=script)
            if again[1]:
                alone = guard.replicate(alone, baseline[n:2 * n], loss_alone[n:2 * n], script=script)
        measure, base, cand = _losses(baseline[:len(runs)], runs)
        pairs = [(b, c) for b, c in zip(base, cand) if math.isfinite(b) and math.isfinite(c)]
        sd = statistics.stdev(b for b, _ in pairs) if len(pairs) > 1 else None
        walls = [done[f"{name}/{label}/{s}"]["wall_s"] for s in guard.seeds(spec, len(runs))]
        result["candidates"][label] = {
            "fault": fault, "precision": precision, "measure": measure, "losses": cand,
            "rho": statistics.correlation(*zip(*pairs)) if len(pairs) > 2 else None,
            "gap": statistics.fmean(c - b for b, c in pairs) if pairs else None,
            "gap_in_sds": statistics.fmean(c - b for b, c in pairs) / sd if pairs and sd else None,
            "sd": statistics.stdev(cand) if len(cand) > 1 else None,
            "output_dtype": runs[0].output_dtype, "seeds_run": len(runs), "seeds_needed": needed, "seeds_judged": n,
            "replicated": again[0] and verdict.runs[0] > n, "replication_wanted": again[0],
            "ok": verdict.ok, "reason": verdict.reason, "ok_on_loss_alone": alone.ok, "reason_on_loss_alone": alone.reason,
            "wall_s_per_run": statistics.fmean(walls), "fault_notes": sorted({n for s in guard.seeds(spec, len(runs))
                                                                              for n in done[f"{name}/{label}/{s}"]["notes"]
                                                                              if "test fault" in n})}
    measure, base, _ = _losses(baseline, baseline)
    walls = [done[f"{name}/baseline/{s}"]["wall_s"] for s in guard.seeds(spec, len(baseline))]
    result.update(measure=measure, baseline_losses=base, baseline_sd=statistics.stdev(base) if len(base) > 1 else None,
                  baseline_seeds=len(base), baseline_wall_s_per_run=statistics.fmean(walls),
                  wall_s=time.perf_counter() - started)
    return result


def real(models: list[str], seeds: int, most: int, out: str, only: tuple[str, ...] = ()) -> dict[str, Any]:
    """Each of `models` trained for real through the guard's rule (`real_model`), on the candidates `only` names
    (every one where it names none)."""
    started = time.perf_counter()
    return {"models": {name: real_model(name, seeds, most, out, only) for name in models}, "seeds": seeds,
            "most": most, "wall_s": time.perf_counter() - started}


def _print_real(result: dict[str, Any]) -> None:
    for name, model in result["models"].items():
        print(f"{name} ({model['model']}): baseline {model['measure']} sd {model['baseline_sd']:.3g} over "
              f"{model['baseline_seeds']} seeds, {model['baseline_wall_s_per_run']:.0f} s a run; {model['wall_s']:.0f} s")
        for label, c in model["candidates"].items():
            rho = f"{c['rho']:.3f}" if c["rho"] is not None else "-"
            gap = f"{c['gap_in_sds']:+.2f} sd" if c["gap_in_sds"] is not None else "-"
            print(f"  {label}: rho {rho}, gap {gap}, {c['seeds_judged']} seeds judged (rule {c['seeds_needed']})"
                  f"{', replicated on as many fresh seeds' if c['replicated'] else ''}, "
                  f"{c['wall_s_per_run']:.0f} s a run: {'passes' if c['ok'] else 'REJECTED'}: {c['reason']}")
            if c["ok_on_loss_alone"] != c["ok"]:
                print(f"    on the loss alone: {'passes' if c['ok_on_loss_alone'] else 'REJECTED'}: "
                      f"{c['reason_on_loss_alone']}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--studies", type=int, default=2000, help="simulated guard decisions per setting and gap")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--real", action="store_true", help="train real models through the guard instead (minutes)")
    parser.add_argument("--models", default=",".join(MODELS), help=f"--real: which, of {', '.join(MODELS)}")
    parser.add_argument("--seeds", type=int, default=guard.FIRST_SEEDS,
                        help="--real: seeds each side runs at least (the rule's first stage is 5)")
    parser.add_argument("--most", type=int, default=guard.MAX_SEEDS,
                        help="--real: seeds each side runs at most, where the rule asks for more")
    parser.add_argument("--candidates", default="", help=f"--real: which, of {', '.join(c[0] for c in CANDIDATES)} "
                                                          "(all where empty)")
    parser.add_argument("--out", default="guard-power-runs", help="--real: the folder that keeps every run")
    args = parser.parse_args()
    started = time.perf_counter()
    if args.real:
        unknown = sorted(set(args.models.split(",")) - set(MODELS))
        if unknown:
            parser.error(f"Expected --models from {', '.join(MODELS)}. Received: {', '.join(unknown)}.")
        result = real(args.models.split(","), args.seeds, args.most, args.out,
                      tuple(c for c in args.candidates.split(",") if c))
    else:
        result = simulate(args.studies, args.seed)
    if args.json:
        print(json.dumps(result, indent=1))
        return
    if args.real:
        _print_real(result)
        return
    print("| noise | ρ | gap sd / margin | rejected at 0 (95% CI) | passed at ½ margin | rejected at 2× margin "
          "(passes that said the seeds could not see it) | rejected 1 margin lower | mean seeds a side (0 / 2×) |")
    print("|---|---|---|---|---|---|---|---|")
    for r in result["settings"]:
        low, high = r["false_rejections_ci"]
        blind = r["power_at_2x_margin_said_blind"] / max(1e-9, 1 - r["power_at_2x_margin"])
        print(f"| {r['shape']} | {r['rho']:g} | {r['ratio']:g} | {100 * r['false_rejections']:.2f}% "
              f"({100 * low:.2f}–{100 * high:.2f}%) | {100 * (1 - r['half_margin_rejections']):.1f}% | "
              f"{100 * r['power_at_2x_margin']:.1f}% ({100 * blind:.0f}%) | {100 * r['lower_loss_rejections']:.1f}% | "
              f"{r['false_rejections_seeds']:.1f} / {r['power_at_2x_margin_seeds']:.1f} |")
    print(f"\nfalse rejections {100 * result['false_rejections']:.2f}% at worst; passed at half the margin "
          f"{100 * result['pass_at_half_margin']:.1f}% at worst; power at twice the margin "
          f"{100 * result['power_at_2x_margin']:.1f}% at worst where the seeds can see it (gap sd at most "
          f"{SEEABLE:g} margin), {100 * result['power_at_2x_margin_where_seeds_cannot_see_it']:.1f}% where they "
          f"cannot, and {100 * result['passes_at_2x_margin_that_said_so']:.0f}% of those passes said so; "
          f"rejections of a loss one margin lower {100 * result['lower_loss_rejections']:.1f}%; rejections with a "
          f"mean gap at or below the margin: {result['rejections_with_mean_gap_at_or_below_margin']}; "
          f"{time.perf_counter() - started:.0f} s")


if __name__ == "__main__":
    main()
