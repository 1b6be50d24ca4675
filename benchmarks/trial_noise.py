"""Trial-to-trial noise: what the windows, the warm-up and the statistic do to one trial's CV.

    python benchmarks/trial_noise.py [--workloads tiny,cnn10,userwork:convnet] [--rounds 8]
        [--variants 2x1.5,3x1,6x0.5] [--budget S] [--records trial_noise.jsonl]
    python benchmarks/trial_noise.py --analyse trial_noise.jsonl

The tuner decides on the log ratio of two trials' figures, so the noise that
matters is the coefficient of variation (CV) of one trial's figure when the
same configuration runs again and again in fresh processes.

A variant is `REPEATSxSECONDS`: that many timed windows of about that many
seconds each (`TrialSpec.repeats`, `target_seconds`), so `2x1.5`, `3x1` (the
tuner's default) and `6x0.5` time about the same work. The variants are
interleaved: every round runs each workload once in each variant, the order
rotated from round to round, so load that comes and goes on a shared machine
falls on all of them alike. Records are appended to `--records` as they land.

Each trial's figure is then summarised by several statistics, all from the
same windows (`metrics.window_s`), so comparing statistics costs no runs:
`median` (the protocol's figure), `best` (the fastest window), `mean` (all
timed samples over all timed seconds) and `trimmed` (the mean rate with the
fastest and the slowest window left out). Each has a `+1` form that drops the
first timed window: a warm-up one window longer, at the same wall time, with
one window less timed.

The CV is the standard deviation of the log figure over the trials (the
scale the tuner decides on), with a 95% chi-square interval. `vs median`
is the CV's ratio to the `median` statistic's on the same trials, with a
paired bootstrap interval; `vs 3x1` is its ratio to the same statistic's CV
in the default variant (an unpaired bootstrap). `net CV` is the spread of
each trial's log figure less its round's level (`round_levels`): the noise
left once the machine's slow drift in load, which every variant shares, is
taken out; it is closer to what two trials run back to back see.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from fitspeed.core.record import TrialSpec

FIXTURES = Path(__file__).resolve().parent.parent / "tests" / "fixtures"
DEFAULT_VARIANT = "3x1"


def parse_variant(text: str) -> tuple[int, float]:
    """`REPEATSxSECONDS` as (repeats, target seconds).

    >>> parse_variant("6x0.5")
    (6, 0.5)
    """
    repeats, _, seconds = text.partition("x")
    return int(repeats), float(seconds)


def rotated(items: Sequence[str], round_: int) -> list[str]:
    """The round's order: the list rotated by the round's number.

    >>> rotated(["a", "b", "c"], 0), rotated(["a", "b", "c"], 1), rotated(["a", "b", "c"], 4)
    (['a', 'b', 'c'], ['b', 'c', 'a'], ['b', 'c', 'a'])
    """
    k = round_ % len(items)
    return [*items[k:], *items[:k]]


# ---- statistics of one trial's windows (window seconds -> samples/s) ----

def _rates(windows: Sequence[float], samples: float) -> list[float]:
    return [samples / w for w in windows]


def median_rate(windows: Sequence[float], samples: float) -> float:
    return statistics.median(_rates(windows, samples))


def best_rate(windows: Sequence[float], samples: float) -> float:
    return samples / min(windows)


def mean_rate(windows: Sequence[float], samples: float) -> float:
    """All the timed samples over all the timed seconds.

    >>> mean_rate([1.0, 3.0], 100.0)
    50.0
    """
    return samples * len(windows) / sum(windows)


def trimmed_rate(windows: Sequence[float], samples: float) -> float:
    """The mean rate with the fastest and the slowest window left out (with fewer than three: the mean rate).

    >>> trimmed_rate([1.0, 2.0, 2.0, 4.0], 100.0), trimmed_rate([1.0, 4.0], 100.0)
    (50.0, 40.0)
    """
    if len(windows) < 3:
        return mean_rate(windows, samples)
    kept = sorted(windows)[1:-1]
    return samples * len(kept) / sum(kept)


BASE_STATISTICS: dict[str, Callable[[Sequence[float], float], float]] = {
    "median": median_rate, "best": best_rate, "mean": mean_rate, "trimmed": trimmed_rate,
}
STATISTICS = [*BASE_STATISTICS, *(f"{name}+1" for name in BASE_STATISTICS)]


def figure(record: dict, statistic: str) -> float | None:
    """One ok trial's samples/s by `statistic`; a `+1` statistic drops the first window (None with one window)."""
    if record.get("status") != "ok" or record["metrics"].get("stopped_early"):
        return None
    metrics = record["metrics"]
    windows = list(metrics["window_s"])
    name, drop = (statistic[:-2], 1) if statistic.endswith("+1") else (statistic, 0)
    windows = windows[drop:]
    if not windows:
        return None
    return BASE_STATISTICS[name](windows, metrics["steps_per_repeat"] * metrics["batch_size"])


# ---- the CV and its intervals ----

def log_cv(values: Sequence[float]) -> float:
    """The standard deviation of the logs: the CV on the scale the tuner decides on.

    >>> round(log_cv([100.0, 110.0, 90.0]), 4)
    0.1004
    """
    logs = [math.log(v) for v in values]
    return statistics.stdev(logs)


def chi2_interval(cv: float, n: int, level: float = 0.95) -> tuple[float, float]:
    """A chi-square interval for a standard deviation from `n` normal values.

    >>> [round(x, 3) for x in chi2_interval(0.1, 10)]
    [0.069, 0.183]
    """
    from scipy.stats import chi2

    alpha = 1 - level
    df = n - 1
    return cv * math.sqrt(df / chi2.ppf(1 - alpha / 2, df)), cv * math.sqrt(df / chi2.ppf(alpha / 2, df))


def bootstrap_ratio(a: Sequence[float], b: Sequence[float], *, paired: bool, draws: int = 2000,
                    seed: int = 0) -> tuple[float, float, float] | None:
    """CV(b) / CV(a) and its 95% percentile bootstrap interval; `paired` resamples the trials together.

    None where `a` does not vary (no ratio to take).
    """
    if _stdev_or_none(a) is None:
        return None
    rng = random.Random(seed)
    ratios = []
    for _ in range(draws):
        if paired:
            index = [rng.randrange(len(a)) for _ in a]
            ra, rb = [a[i] for i in index], [b[i] for i in index]
        else:
            ra = [a[rng.randrange(len(a))] for _ in a]
            rb = [b[rng.randrange(len(b))] for _ in b]
        ca, cb = _stdev_or_none(ra), _stdev_or_none(rb)
        if ca and cb is not None:
            ratios.append(cb / ca)
    ratios.sort()
    if not ratios:
        return None
    return log_cv(b) / log_cv(a), ratios[int(0.025 * len(ratios))], ratios[int(0.975 * len(ratios)) - 1]


def _stdev_or_none(values: Sequence[float]) -> float | None:
    return log_cv(values) if len(set(values)) > 1 else None


@dataclass(frozen=True)
class Row:
    workload: str
    variant: str
    statistic: str
    n: int
    cv: float
    low: float
    high: float
    net_cv: float  # the CV net of the round's level (the load of the moment): see `round_levels`
    vs_median: tuple[float, float, float] | None
    vs_default: tuple[float, float, float] | None
    wall_s: float


def round_levels(records: Sequence[dict]) -> dict[tuple[str, int], float]:
    """Each workload's level in each round: the mean log `median` figure of the round's trials of it, all variants.

    The machine is shared, and its load drifts over minutes: a round's trials, run back to back, share it.
    A trial's figure over its round's level is what is left when that drift is taken out; every variant
    and statistic is measured against the same level.

    >>> r = lambda k, w: {"status": "ok", "metrics": {"window_s": [w], "steps_per_repeat": 1, "batch_size": 1},
    ...                   "bench": {"workload": "tiny", "round": k}}
    >>> {key: round(math.exp(v), 3) for key, v in round_levels([r(0, 1.0), r(0, 0.25), r(1, 0.5)]).items()}
    {('tiny', 0): 2.0, ('tiny', 1): 2.0}
    """
    logs: dict[tuple[str, int], list[float]] = {}
    for record in records:
        value = figure(record, "median")
        if value:
            logs.setdefault((record["bench"]["workload"], record["bench"]["round"]), []).append(math.log(value))
    return {key: statistics.fmean(values) for key, values in logs.items()}


def analyse(records: Sequence[dict]) -> list[Row]:
    """One row per workload, variant and statistic, from the trials' records (each with `bench` tags)."""
    levels = round_levels(records)
    groups: dict[tuple[str, str], list[dict]] = {}
    for record in records:
        groups.setdefault((record["bench"]["workload"], record["bench"]["variant"]), []).append(record)
    rows = []
    for (workload, variant), group in groups.items():
        ok = [r for r in group if all(figure(r, s) for s in BASE_STATISTICS)]
        wall = statistics.fmean(r["bench"]["wall_s"] for r in group)
        default = [r for r in groups.get((workload, DEFAULT_VARIANT), [])]
        for statistic in STATISTICS:
            trials: list[tuple[float, float, int]] = []  # (median, this statistic, round) of each trial
            for r in ok:
                m, f = figure(r, "median"), figure(r, statistic)
                if m and f:
                    trials.append((m, f, r["bench"]["round"]))
            if len(trials) < 3:
                continue
            values = [f for _, f, _ in trials]
            cv = log_cv(values)
            low, high = chi2_interval(cv, len(values))
            shared = len({k for _, _, k in trials}) < len(trials) or len(groups) > 1
            net_cv = (statistics.stdev(math.log(f) - levels[(workload, k)] for _, f, k in trials)
                      if shared else math.nan)  # one trial per round and nothing else run: no round level to take out
            vs_median = (bootstrap_ratio([m for m, _, _ in trials], values, paired=True)
                         if statistic != "median" else None)
            base = [f for f in (figure(r, statistic) for r in default) if f]
            vs_default = (bootstrap_ratio(base, values, paired=False)
                          if variant != DEFAULT_VARIANT and len(base) >= 3 else None)
            rows.append(Row(workload, variant, statistic, len(values), cv, low, high, net_cv, vs_median, vs_default,
                            wall))
    return rows


def render(rows: Sequence[Row]) -> str:
    def ratio(r: tuple[float, float, float] | None) -> str:
        return f"{r[0]:.2f} ({r[1]:.2f}-{r[2]:.2f})" if r else ""

    lines = [f"| workload | variant | statistic | n | CV % (95% CI) | net CV % | vs median | vs {DEFAULT_VARIANT} "
             "| wall s/trial |",
             "|---|---|---|---|---|---|---|---|---|"]
    for row in rows:
        lines.append(f"| {row.workload} | {row.variant} | {row.statistic} | {row.n} | "
                     f"{100 * row.cv:.2f} ({100 * row.low:.2f}-{100 * row.high:.2f}) | {100 * row.net_cv:.2f} | "
                     f"{ratio(row.vs_median)} | "
                     f"{ratio(row.vs_default)} | {row.wall_s:.1f} |")
    return "\n".join(lines)


def measure(workloads: list[str], variants: list[str], rounds: int, budget: float | None, out: Path) -> None:
    from fitspeed.measure.runner import run_trial

    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(FIXTURES), env.get("PYTHONPATH")]))  # userwork:...
    started = time.perf_counter()
    for round_ in range(rounds):
        if budget and time.perf_counter() - started > budget:
            print(f"the budget of {budget:.0f} s ran out after {round_} rounds", flush=True)
            break
        for workload in workloads:
            for variant in rotated(variants, round_):
                repeats, seconds = parse_variant(variant)
                spec = TrialSpec(model=workload, repeats=repeats, target_seconds=seconds, seed=round_)
                began = time.perf_counter()
                record = run_trial(spec, env=env)
                wall = time.perf_counter() - began
                bench = {"workload": workload, "variant": variant, "round": round_, "wall_s": wall,
                         "load": os.getloadavg()[0]}
                with out.open("a") as file:
                    file.write(json.dumps({**record.to_dict(), "bench": bench}) + "\n")
                metrics = record.metrics.to_dict() if record.metrics else {}
                print(f"round {round_} {workload:18s} {variant:6s} {record.status:6s} {wall:5.1f} s "
                      f"median {metrics.get('samples_per_s', {}).get('median', 0):8.0f} "
                      f"windows {len(metrics.get('window_s', []))} x {metrics.get('steps_per_repeat')} steps",
                      flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workloads", default="tiny,cnn10,userwork:convnet")
    parser.add_argument("--variants", default="2x1.5,3x1,6x0.5")
    parser.add_argument("--rounds", type=int, default=8)
    parser.add_argument("--budget", type=float, default=None, help="seconds; start no round after this")
    parser.add_argument("--records", type=Path, default=Path("trial_noise.jsonl"), help="append the records here")
    parser.add_argument("--analyse", type=Path, default=None, help="only summarise the records in this file")
    args = parser.parse_args()

    if args.analyse is None:
        measure(args.workloads.split(","), args.variants.split(","), args.rounds, args.budget, args.records)
    path = args.analyse or args.records
    records = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    from fitspeed.machine import environment

    host = environment.host()
    loads = [r["bench"]["load"] for r in records]
    print(f"machine: {host['cpu']} ({host['cpu_count']} cores), load average during the run "
          f"{min(loads):.1f}-{max(loads):.1f} (mean {statistics.fmean(loads):.1f}), fitspeed {host['fitspeed']}, "
          f"{len(records)} trials ({sum(r['status'] != 'ok' for r in records)} not ok)")
    print(render(analyse(records)))


if __name__ == "__main__":
    main()
