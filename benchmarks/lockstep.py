"""A/A noise of lockstep rounds against sequential pairs, measured in one run, and its levels.

    python benchmarks/lockstep.py [--workloads tiny,cnn-low] [--loads quiet,bursty] [--rounds 16]
        [--variants 3x1] [--designs lockstep,sequential] [--records lockstep.jsonl] [--budget S] [--json]
    python benchmarks/lockstep.py --analyse lockstep.jsonl [--json]

Both arms of every pair are the same configuration (an A/A test: the true
ratio is 1), so the spread of log(B/A) over pairs is the noise a comparison
pays. Two designs take turns, round by round, the first of each two chosen by
a coin, so the machine's load falls on both alike:

- **sequential**: A's trial process runs (start, warm-up, timed windows) and
  exits, then B's, as `fitspeed tune` measured a pair before lockstep;
- **lockstep**: A's and B's processes start together and take turns window
  by window (`fitspeed.measure.rounds`), as every pair is measured now.

A variant is `REPEATSxSECONDS`: that many timed windows of about that many
seconds each per trial (`3x1` is `fitspeed tune`'s); several variants are
interleaved round by round like the designs.

Each workload is measured under each load: `quiet` (nothing else runs) and
`bursty` (a background process that switches `--load-cores` busy loops on and
off at random every 2-8 s, the load of a shared machine).

The analysis, per workload, load and design:
- `sd`: the standard deviation of log(B/A) over rounds, with a 95% chi-square
  interval; `ratio`: lockstep's sd over sequential's, with a bootstrap
  interval over rounds;
- the variance of a trial's log figure split into its levels (Kalibera and
  Jones): `common` (the part both trials of a round share: the machine's load
  at the time; the covariance of A's and B's log figures over rounds),
  `process` (each process's own: memory layout, thread placement, the
  frequency it got), and `window` (the spread of one trial's windows, and
  what it leaves in the median of `repeats` windows);
- `idle_cost`: a lockstep trial's figure over a sequential trial's (the
  geometric means over the rounds, interleaved): what an idle neighbour
  blocked on its turn costs the timed process.

Records are appended to `--records` as each round lands, so a run that is
stopped keeps what it measured; `--analyse` reads them back.
"""

from __future__ import annotations

import argparse
import json
import math
import multiprocessing
import os
import random
import statistics
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from fitspeed.core.record import TrialRecord, TrialSpec
from fitspeed.machine import environment
from fitspeed.measure.rounds import Rounds, sequential_round

DESIGNS = ("lockstep", "sequential")


def _burn(stop: Any) -> None:
    while not stop.is_set():
        sum(i * i for i in range(10_000))


def bursty_load(cores: int, seed: int, stop: Any) -> None:
    """On for 2-8 s with `cores` busy loops, off for 2-8 s, at random, until `stop` is set."""
    rng = random.Random(seed)
    while not stop.is_set():
        halt = multiprocessing.Event()
        workers = [multiprocessing.Process(target=_burn, args=(halt,), daemon=True) for _ in range(cores)]
        for worker in workers:
            worker.start()
        stop.wait(rng.uniform(2.0, 8.0))
        halt.set()
        for worker in workers:
            worker.join()
        stop.wait(rng.uniform(2.0, 8.0))


class Load:
    """A background load for the length of a `with` block: none ("quiet") or "bursty"."""

    def __init__(self, kind: str, cores: int, seed: int) -> None:
        self.kind, self.cores, self.seed = kind, cores, seed
        self.stop: Any = None
        self.process: multiprocessing.Process | None = None

    def __enter__(self) -> Load:
        if self.kind == "bursty":
            self.stop = multiprocessing.Event()
            self.process = multiprocessing.Process(target=bursty_load, args=(self.cores, self.seed, self.stop),
                                                   daemon=True)
            self.process.start()
        elif self.kind != "quiet":
            raise SystemExit(f"Expected --loads to name quiet or bursty. Received: {self.kind!r}.")
        return self

    def __exit__(self, *exc: object) -> None:
        if self.process is not None:
            self.stop.set()
            self.process.join(30)
            if self.process.is_alive():
                self.process.kill()


def summary(record: TrialRecord) -> dict[str, Any]:
    """What the analysis needs of a trial: its figure, its windows (as samples/s) and how it ran."""
    metrics = record.metrics
    windows = list(record.measured("window_s") or [])
    steps, batch = record.measured("steps_per_repeat"), metrics.batch_size if metrics else None
    rates = [steps * batch / w for w in windows] if steps and batch else []
    return {"status": str(record.status), "figure": record.throughput, "windows": rates,
            "round": record.extra.get("round"), "warm_start": record.warm_start, "wall_s": record.wall_s,
            "peak_host_mb": record.measured("peak_host_mb") if metrics else None}


def parse_variant(text: str) -> tuple[int, float]:
    """`REPEATSxSECONDS` as (repeats, target seconds).

    >>> parse_variant("9x1"), parse_variant("6x0.5")
    ((9, 1.0), (6, 0.5))
    """
    repeats, _, seconds = text.partition("x")
    return int(repeats), float(seconds)


def measure(workloads: list[str], loads: list[str], rounds: int, out: Path, cores: int, budget: float | None,
            seed: int, variants: Sequence[str] = ("3x1",), designs_asked: Sequence[str] = DESIGNS) -> None:
    started = time.perf_counter()
    runner = Rounds()
    rng = random.Random(seed)
    for load in loads:
        for workload in workloads:
            with Load(load, cores, seed):
                for index in range(rounds):
                    cells = [(d, v) for d in designs_asked for v in variants]
                    rng.shuffle(cells)
                    for design, variant in cells:
                        repeats, seconds = parse_variant(variant)
                        spec = TrialSpec(model=workload, repeats=repeats, target_seconds=seconds)
                        if budget and time.perf_counter() - started > budget:
                            print("the --budget is spent", flush=True)
                            return
                        first = rng.randrange(2)
                        began = time.perf_counter()
                        done = (runner.round([spec, spec], first) if design == "lockstep"
                                else sequential_round([spec, spec], first, runner))
                        line = {"workload": workload, "load": load, "design": done.design, "asked": design,
                                "variant": variant,
                                "round": index, "first": first, "turns": done.turns, "why": done.why,
                                "wall_s": time.perf_counter() - began, "loadavg": os.getloadavg()[0],
                                "trials": [summary(r) for r in done.records]}
                        with out.open("a") as stream:
                            stream.write(json.dumps(line) + "\n")
                        a, b = line["trials"][0]["figure"], line["trials"][1]["figure"]
                        ratio = f"{b / a:6.3f}" if a and b else "  --  "
                        print(f"{load:6s} {workload:10s} round {index + 1:2d} {done.design:10s} {variant:5s} B/A {ratio} "
                              f"({line['wall_s']:4.1f} s, load {line['loadavg']:.2f})", flush=True)


def chi2_interval(sd: float, n: int, level: float = 0.95) -> tuple[float, float]:
    """A 95% interval for a standard deviation from `n` values (n - 1 degrees of freedom)."""
    from scipy.stats import chi2

    df = n - 1
    tail = (1 - level) / 2
    return sd * math.sqrt(df / chi2.ppf(1 - tail, df)), sd * math.sqrt(df / chi2.ppf(tail, df))


def figure(trial: dict[str, Any], statistic: str = "mean") -> float | None:
    """A trial's samples/s from its windows: their geometric mean (`mean`, the trial's figure) or their median;
    its recorded figure where the windows were not kept."""
    windows = [w for w in trial.get("windows") or () if w > 0]
    if trial.get("status") != "ok" or not windows:
        return trial.get("figure") if trial.get("status") == "ok" else None
    if statistic == "median":
        return statistics.median(windows)
    return math.exp(statistics.fmean(math.log(w) for w in windows))


def log_ratios(lines: Sequence[dict[str, Any]], statistic: str = "mean") -> list[float]:
    out = []
    for line in lines:
        a, b = (figure(t, statistic) for t in line["trials"])
        if a and b:
            out.append(math.log(b / a))
    return out


def bootstrap_sd_ratio(x: Sequence[float], y: Sequence[float], draws: int = 4000,
                       seed: int = 7) -> tuple[float, float]:
    """A 95% percentile interval for sd(x) / sd(y), each resampled on its own."""
    rng = random.Random(seed)
    found = []
    for _ in range(draws):
        sx = statistics.stdev(rng.choices(x, k=len(x)))
        sy = statistics.stdev(rng.choices(y, k=len(y)))
        if sy > 0:
            found.append(sx / sy)
    found.sort()
    return found[int(0.025 * len(found))], found[int(0.975 * len(found)) - 1]


def levels(lines: Sequence[dict[str, Any]]) -> dict[str, float | None]:
    """A trial's log-figure variance split into common (shared by a round), process and window parts, as sds."""
    xa, xb, within, counts = [], [], [], []
    for line in lines:
        a, b = line["trials"]
        fa, fb = figure(a), figure(b)
        if not (fa and fb):
            continue
        xa.append(math.log(fa))
        xb.append(math.log(fb))
        for trial in (a, b):
            logs = [math.log(w) for w in trial["windows"] if w > 0]
            if len(logs) > 1:
                within.append(statistics.variance(logs))
                counts.append(len(logs))
    if len(xa) < 3:
        return {"common": None, "process": None, "window": None, "trial": None}
    common = max(0.0, statistics.covariance(xa, xb))
    total = (statistics.variance(xa) + statistics.variance(xb)) / 2
    window = statistics.fmean(within) if within else 0.0
    n = round(statistics.median(counts)) if counts else 1
    in_figure = window / n  # the figure is the windows' mean log rate
    process = max(0.0, total - common - in_figure)
    return {"common": math.sqrt(common), "process": math.sqrt(process), "window": math.sqrt(window),
            "window_in_figure": math.sqrt(in_figure), "trial": math.sqrt(total)}


def analyse(lines: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    groups: dict[tuple[str, str, str], dict[str, list[dict[str, Any]]]] = {}
    for line in lines:
        key = (line["workload"], line["load"], line.get("variant", "3x1"))
        groups.setdefault(key, {}).setdefault(line["asked"], []).append(line)
    rows = []
    for (workload, load, variant), by in groups.items():
        row: dict[str, Any] = {"workload": workload, "load": load, "variant": variant}
        ratios = {}
        for design in DESIGNS:
            found = by.get(design, [])
            values = log_ratios(found)
            ratios[design] = values
            entry: dict[str, Any] = {"rounds": len(found), "pairs": len(values),
                                     "ran_as": sorted({line["design"] for line in found}),
                                     "load_average": statistics.fmean(line["loadavg"] for line in found) if found else None,
                                     "wall_s": statistics.median(line["wall_s"] for line in found) if found else None}
            if len(values) >= 3:
                sd = statistics.stdev(values)
                low, high = chi2_interval(sd, len(values))
                medians = log_ratios(found, "median")
                entry.update(sd=sd, low=low, high=high, mean=statistics.fmean(values),
                             sd_of_medians=statistics.stdev(medians) if len(medians) >= 3 else None)
            entry["levels"] = levels(found)
            row[design] = entry
        if all(len(ratios.get(d, [])) >= 3 for d in DESIGNS):
            sd_l, sd_s = statistics.stdev(ratios["lockstep"]), statistics.stdev(ratios["sequential"])
            low, high = bootstrap_sd_ratio(ratios["lockstep"], ratios["sequential"])
            row["ratio"] = {"estimate": sd_l / sd_s if sd_s else None, "low": low, "high": high}
        # each round's mean log figure: a round's two trials share its load, so the round is the unit resampled
        figures = {d: [statistics.fmean(math.log(f) for f in found)
                       for line in by.get(d, []) if all(found := [figure(t) for t in line["trials"]])]
                   for d in DESIGNS}
        if all(len(figures[d]) >= 3 for d in DESIGNS):
            cost = math.exp(statistics.fmean(figures["lockstep"]) - statistics.fmean(figures["sequential"]))
            rng = random.Random(11)
            draws = sorted(math.exp(statistics.fmean(rng.choices(figures["lockstep"], k=len(figures["lockstep"])))
                                    - statistics.fmean(rng.choices(figures["sequential"], k=len(figures["sequential"]))))
                           for _ in range(4000))
            row["idle_cost"] = {"lockstep_over_sequential": cost, "low": draws[100], "high": draws[3899]}
        rows.append(row)
    return rows


def _f(value: float | None, digits: int = 3) -> str:
    return "–" if value is None else f"{value:.{digits}f}"


def render(rows: Sequence[dict[str, Any]]) -> str:
    lines = ["| workload | load | windows | design | pairs | sd of log(B/A) (95% CI) | by the windows' median "
             "| common | process | window (in figure) | load average | wall s a pair |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for row in rows:
        for design in DESIGNS:
            e = row.get(design) or {}
            if not e.get("rounds"):
                continue
            lv = e.get("levels") or {}
            lines.append(f"| {row['workload']} | {row['load']} | {row['variant']} | {design} | {e.get('pairs', 0)} | "
                         f"{_f(e.get('sd'))} ({_f(e.get('low'))}–{_f(e.get('high'))}) | {_f(e.get('sd_of_medians'))} | "
                         f"{_f(lv.get('common'))} | "
                         f"{_f(lv.get('process'))} | {_f(lv.get('window'))} ({_f(lv.get('window_in_figure'))}) | "
                         f"{_f(e.get('load_average'), 2)} | {_f(e.get('wall_s'), 1)} |")
    lines.append("")
    lines.append("| workload | load | windows | lockstep sd / sequential sd (95% CI) | idle neighbour: lockstep / "
                 "sequential figure (95% CI) |")
    lines.append("|---|---|---|---|---|")
    for row in rows:
        r, c = row.get("ratio") or {}, row.get("idle_cost") or {}
        if not r and not c:
            continue
        lines.append(f"| {row['workload']} | {row['load']} | {row['variant']} | {_f(r.get('estimate'), 2)} "
                     f"({_f(r.get('low'), 2)}–"
                     f"{_f(r.get('high'), 2)}) | {_f(c.get('lockstep_over_sequential'))} ({_f(c.get('low'))}–"
                     f"{_f(c.get('high'))}) |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--workloads", default="tiny,cnn-low")
    parser.add_argument("--loads", default="quiet,bursty")
    parser.add_argument("--rounds", type=int, default=16, help="rounds of each design, per workload and load")
    parser.add_argument("--load-cores", type=int, default=1, help="busy loops of the bursty load")
    parser.add_argument("--variants", default="3x1", help="REPEATSxSECONDS per trial, comma-separated")
    parser.add_argument("--designs", default=",".join(DESIGNS), help="lockstep, sequential or both")
    parser.add_argument("--records", default="lockstep.jsonl", help="each round's record, appended as it lands")
    parser.add_argument("--budget", type=float, default=None, help="seconds; start no round after this")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--analyse", default=None, help="read these records and analyse them; run nothing")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    path = Path(args.analyse or args.records)
    if not args.analyse:
        measure(args.workloads.split(","), args.loads.split(","), args.rounds, path, args.load_cores, args.budget,
                args.seed, args.variants.split(","), args.designs.split(","))
    lines = [json.loads(text) for text in path.read_text().splitlines() if text.strip()]
    rows = analyse(lines)
    host = environment.host()
    if args.json:
        print(json.dumps({"machine": {"cpu": host["cpu"], "cpu_count": host["cpu_count"]}, "rows": rows}, indent=2))
    else:
        print(f"machine: {host['cpu']} ({host['cpu_count']} cores)")
        print(render(rows))


if __name__ == "__main__":
    sys.exit(main())
