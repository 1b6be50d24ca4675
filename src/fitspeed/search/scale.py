"""`fitspeed scale`: data-parallel scaling over 1..N devices (article 004's multi-device experiment).

The experiment, in the order it runs:
1. The numerics guard's baseline: the model trained on 1 device from the seed
   (`guard.guard_spec`). Its record says how many accelerators the host has
   (`environment.devices.available`); counts above that are measured as what
   exists, and said so (`plan`). On a host without accelerators the CPU is
   split into as many logical devices as asked.
2. For each count N > 1: interleaved pairs, 1 device then N devices, each a
   fresh process (`fitspeed.measure.comparison.interleave`). The speed-up is
   the pairs' median ratio of samples/s with its confidence interval; the
   scaling efficiency is the speed-up ÷ N (1.0 is linear scaling). A pair
   whose trial crashed, timed out or ran out of memory is left out of the
   median, and its row says so (`pairs_ok` of `pairs_run`, `pairs_lost` by
   how the pair's failed trial ended).
3. For each N: the tuner's numerics guard (`guard.paired`), N devices against
   1, trained from the same seeds for the same steps and judged on held-out
   loss, paired seed by seed, against `guard_margin` of the baseline's loss;
   a lower loss is never rejected. The 1-device runs are shared by every N.
   The global batch is the per-device batch × N, so the loss may move as with
   a larger batch: the learning rate must be re-tuned, and the guard says
   whether it has to be.

`Scaling.result()` is plain data (rows, the comparisons' records, the guard's
verdicts and every trial record) that the CLI writes as JSON, prints as a
table and `fitspeed.report.scale` draws.

Framework-free: trials run in child processes.
"""

from __future__ import annotations

import dataclasses
import statistics
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

from fitspeed.core.config import TrialConfig
from fitspeed.core.errors import UserError
from fitspeed.core.json_data import JSONObject
from fitspeed.core.record import SCHEMA_VERSION, OnTrial, Status, TrialRecord, TrialRunner, TrialSpec
from fitspeed.measure.comparison import Comparison, interleave, speed
from fitspeed.measure.rounds import RoundRunner, Rounds
from fitspeed.search import guard



UNITS = {"devices": "device(s)", "processes": "process(es)"}  # what a count counts, on each axis


def plan(asked: Sequence[int], available: int | None) -> tuple[tuple[int, ...], list[str]]:
    """The device counts to measure, 1 first, and a note for each count the host cannot give.

    `available` is the number of accelerators (None on a host without any,
    where the CPU is split into as many logical devices as asked):

    >>> plan([2, 1, 4], None)
    ((1, 2, 4), [])
    >>> plan([1, 2, 4, 8], 2)
    ((1, 2), ['this host has 2 accelerator(s): devices=4, 8 measured as the 2 that exist'])
    >>> plan([4], 1)
    ((1,), ['this host has 1 accelerator(s): devices=4 measured as the 1 that exist'])
    """
    counts = sorted({1, *asked})
    if available is None:
        return tuple(counts), []
    over = [n for n in counts if n > available]
    if not over:
        return tuple(counts), []
    note = (f"this host has {available} accelerator(s): devices={', '.join(map(str, over))} measured as the "
            f"{available} that exist")
    return tuple(sorted({min(n, available) for n in counts})), [note]


def check_counts(counts: Sequence[int], base: int, axis: str = "devices") -> None:
    """Refuse --devices (or --processes) without a count above 1, or --set devices=N (processes=N) beside it."""
    unit = UNITS[axis].split("(")[0]
    if base != 1:
        raise UserError(f"Expected the {unit} counts in --{axis} only. Received: --set {axis}={base} "
                        f"as well. Drop --set {axis}=... and list the counts as --{axis} 1,2,4.")
    if not counts or max(counts) < 2:
        raise UserError(f"Expected --{axis} to list at least one count above 1, such as 1,2,4. Received: "
                        f"{','.join(map(str, counts)) or 'nothing'}. Scaling compares N {axis} against 1.")


@dataclass
class Scaling:
    """One scaling experiment: the 1-device spec, the counts asked, and what was measured so far."""

    spec: TrialSpec  # the 1-device (1-process) configuration
    asked: tuple[int, ...]
    axis: str = "devices"  # what the counts scale: "devices", or "processes" (each over the spec's devices)
    pairs: int = 5
    statistic: str = "mean"
    guard_margin: float = guard.MARGIN  # the tuner's `--guard-margin`: a share of the baseline's held-out loss
    confidence: float = 0.95
    counts: tuple[int, ...] = ()
    notes: list[str] = field(default_factory=list)
    comparisons: dict[int, Comparison] = field(default_factory=dict)
    guard_runs: dict[int, TrialRecord] = field(default_factory=dict)  # devices -> train-mode record at spec.seed
    verdicts: dict[int, guard.GuardVerdict] = field(default_factory=dict)  # devices -> the paired-seed guard's
    trials: list[TrialRecord] = field(default_factory=list)
    created: str = field(default_factory=lambda: time.strftime("%Y-%m-%dT%H:%M:%S%z"))

    def spec_for(self, count: int) -> TrialSpec:
        return dataclasses.replace(self.spec, config=self.spec.config.replace(**{self.axis: count}))

    def run(self, on_trial: OnTrial | None = None, runner: TrialRunner | RoundRunner | None = None) -> Scaling:
        """Measure: the guard's baseline, the pairs for each count (rounds: lockstep where both fit), then the
        guard for each count."""
        base = self.spec.config
        runner = runner if runner is not None else Rounds()

        def landed(role: str, record: TrialRecord) -> None:
            self.trials.append(record)
            if on_trial:
                on_trial(role, record)

        unit = UNITS[self.axis]
        runs: dict[tuple[int, int], guard.GuardRun] = {}  # (count, seed): each run once, the baseline's shared

        def guard_run(config: TrialConfig, seed: int) -> guard.GuardRun:
            count = getattr(config, self.axis)
            if (count, seed) not in runs:
                record = runner(guard.guard_spec(self.spec_for(count), base, seed))
                self.guard_runs.setdefault(count, record)
                landed(f"guard, {count} {unit}, seed {seed}", record)
                runs[count, seed] = guard.GuardRun.from_record(record)
            return runs[count, seed]

        guard_run(base, self.spec.seed)
        available = ((self.guard_runs[1].environment or {}).get("devices") or {}).get("available")
        # processes are started as asked; devices beyond the accelerators a host has are not there to use
        self.counts, self.notes = plan(self.asked, available) if self.axis == "devices" else (
            tuple(sorted({1, *self.asked})), [])
        for devices in self.counts[1:]:
            def pair_landed(arm: str, record: TrialRecord, devices: int = devices) -> None:
                landed(f"pair {record.extra['pair'] + 1}/{self.pairs}: {1 if arm == 'a' else devices} {unit}", record)

            self.comparisons[devices] = interleave(
                self.spec, self.spec_for(devices), self.pairs, run=runner, on_trial=pair_landed,
                confidence=self.confidence, statistic=self.statistic)
        for devices in self.counts[1:]:  # the tuner's guard: paired seeds, against the margin (`guard.paired`)
            self.verdicts[devices] = guard.paired(guard_run, self.spec, base, self.spec_for(devices).config,
                                                  margin=self.guard_margin)
        return self

    def rows(self) -> list[JSONObject]:
        """One row per device count: samples/s, speed-up and efficiency with their intervals, loss, guard."""
        ones = [s for c in self.comparisons.values() for a, _ in c.pairs if (s := speed(a, self.statistic))]
        per = self.spec.config.devices if self.axis == "processes" else 1  # each process's devices
        rows = [self._axis(_row(1, per, self.spec.config.batch_size * per, ones, None, self.guard_runs.get(1), None,
                                base=per))]
        for count, comparison in self.comparisons.items():
            records = [b for _, b in comparison.pairs]
            used = _used(records, count * per)
            speeds = [s for b in records if (s := speed(b, self.statistic))]
            judged = self.verdicts.get(count)
            verdict = judged.to_dict() if judged is not None else None
            rows.append(self._axis(_row(count, used, self.spec.config.batch_size * used, speeds, comparison,
                                        self.guard_runs.get(count), verdict, base=per)))
        return rows

    def _axis(self, row: JSONObject) -> JSONObject:
        """A row of the processes axis: its count as `processes`, each process's devices as `devices`; `used` counts
        every process's devices, and the efficiency is the speed-up over their ratio to 1 process's."""
        if self.axis == "devices":
            return row
        return {**row, "processes": row["devices"], "devices": self.spec.config.devices}

    def result(self) -> JSONObject:
        """Everything measured, as one JSON-ready record."""
        rows = self.rows()
        measured = [r for r in rows[1:] if r["speedup"] is not None]
        done = bool(self.comparisons) and len(measured) == len(self.counts) - 1
        return {
            "schema": SCHEMA_VERSION,
            "kind": "scale",
            "created": self.created,
            "status": Status.OK if done else "partial" if self.trials else Status.FAILED,
            "model": self.spec.model,
            "data": self.spec.data,
            "backend": self.spec.config.backend,
            "base": self.spec.config.to_dict(),
            "per_device_batch": self.spec.config.batch_size,
            "axis": self.axis,
            f"{self.axis}_asked": list(self.asked),
            f"{self.axis}_measured": list(self.counts),
            "pairs": self.pairs,
            "statistic": self.statistic,
            "confidence": self.confidence,
            "guard_margin": self.guard_margin,
            "notes": self.notes,
            "rows": rows,
            "comparisons": [c.record() for c in self.comparisons.values()],
            "trials": [t.to_dict() for t in self.trials],
        }


def _curve(record: TrialRecord | None) -> list[float | None]:
    return list(record.metrics.loss_curve) if record is not None and record.metrics is not None else []


def _used(records: Sequence[TrialRecord], asked: int) -> int:
    """The devices the trials ran on, every process's, as their records say (the count asked if none says)."""
    for record in records:
        placement = (record.environment or {}).get("devices")
        if placement:
            return int(placement["used"]) * int(placement.get("processes", 1))
    return asked


def lost_pairs(pairs: Sequence[tuple[TrialRecord, TrialRecord]]) -> dict[str, int]:
    """How many pairs the median lacks, by how each ended: its N-device trial's status where that one failed.

    >>> from fitspeed.core.record import Status, new_record
    >>> def trial(status): return new_record(TrialSpec(model="tiny"), status)
    >>> ok, crashed, timeout = trial(Status.OK), trial(Status.CRASHED), trial(Status.TIMEOUT)
    >>> lost_pairs([(ok, crashed), (ok, ok), (timeout, ok), (ok, crashed)])
    {'crashed': 2, 'timeout': 1}
    """
    lost: dict[str, int] = {}
    for a, b in pairs:
        failed = b if b.status != Status.OK else a if a.status != Status.OK else None
        if failed is not None:
            lost[failed.status.value] = lost.get(failed.status.value, 0) + 1
    return lost


def _change(verdict: JSONObject | None) -> float | None:
    """The guard's final loss relative to the 1-device baseline's, signed.

    >>> _change({"baseline_curve": [2.0, 1.0], "curve": [2.0, 0.9]})
    -0.09999999999999998
    """
    if not verdict or not verdict["curve"] or not verdict["baseline_curve"]:
        return None
    final, base = verdict["curve"][-1], verdict["baseline_curve"][-1]
    if final is None or base is None or not base:
        return None
    return float((final - base) / abs(base))


def _row(devices: int, used: int, global_batch: int, speeds: list[float], comparison: Comparison | None,
         guard_run: TrialRecord | None, verdict: JSONObject | None, base: int = 1) -> JSONObject:
    """One device count's figures; speed-up and efficiency are None until a pair finished ok.

    The efficiency is the speed-up over the devices' own ratio to the `base`
    row's (1 device; on the processes axis, 1 process's devices): 100% is
    linear either way.

    >>> row = _row(2, 2, 64, [900.0, 1100.0], None, None, None)
    >>> row["samples_per_s"], row["speedup"], row["efficiency"]
    (1000.0, None, None)
    >>> _row(1, 2, 64, [900.0], None, None, None, base=2)["efficiency"]  # 1 process of 2 devices
    1.0
    """
    estimate = comparison.estimate() if comparison is not None else None
    one = devices == 1
    speedup = 1.0 if one else estimate.median if estimate else None
    low = None if one or not estimate or len(estimate.ratios) < 2 else estimate.low
    high = None if one or not estimate or len(estimate.ratios) < 2 else estimate.high
    metrics = guard_run.metrics if guard_run is not None else None
    return {
        "devices": devices,
        "used": used,
        "global_batch": global_batch,
        "samples_per_s": statistics.median(speeds) if speeds else None,
        "speedup": speedup,
        "speedup_low": low,
        "speedup_high": high,
        "efficiency": None if speedup is None else speedup * base / used,
        "efficiency_low": None if low is None else low * base / used,
        "efficiency_high": None if high is None else high * base / used,
        "pairs_ok": len(estimate.ratios) if estimate else 0,
        "pairs_run": len(comparison.pairs) if comparison is not None else 0,
        "pairs_lost": lost_pairs(comparison.pairs) if comparison is not None else {},
        "final_loss": metrics.final_loss if metrics is not None else None,
        "loss_change": _change(verdict),
        "guard_status": guard_run.status if guard_run is not None else None,
        "guard": verdict,
        "verdict": None if one or comparison is None else comparison.verdict(),
    }
