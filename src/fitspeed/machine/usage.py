"""The few figures a record keeps from a sampler's samples.

`usage_figures` is the mean and peak of each quantity; `trial_usage` keeps
only the samples taken during a trial's timed `fit()`. Pure over `Sample`s;
runs in the parent.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from fitspeed.core.record import TrialRecord
from fitspeed.machine.sampler import Sample, Sampler


def _mean(values: Sequence[float]) -> float | None:
    return sum(values) / len(values) if values else None


def _peak(values: Sequence[float]) -> float | None:
    return max(values) if values else None


def usage_figures(samples: Sequence[Sample], interval_s: float | None = None) -> dict[str, Any]:
    """Mean and peak figures over `samples`; a figure with no readings is None.

    `cpu_percent_*` is the process tree's when one was followed (100 = one
    core), else the host's (0-100); `host_cpu_percent_mean` is always the
    host's. Device figures: utilization averaged over devices per sample,
    memory and power summed over devices per sample.
    """
    trees = [s.tree for s in samples if s.tree is not None]
    cpu = [t.cpu_percent for t in trees] if trees else [s.cpu_percent for s in samples]
    gpu_samples = [s.gpus for s in samples if s.gpus]
    util = [[g.util_percent for g in gpus if g.util_percent is not None] for gpus in gpu_samples]
    memory = [[g.memory_used_mb for g in gpus if g.memory_used_mb is not None] for gpus in gpu_samples]
    power = [[g.power_w for g in gpus if g.power_w is not None] for gpus in gpu_samples]
    return {
        "samples": len(samples),
        "interval_s": interval_s,
        "cpu_percent_mean": _mean(cpu),
        "cpu_percent_peak": _peak(cpu),
        "host_cpu_percent_mean": _mean([s.cpu_percent for s in samples]),
        "threads_peak": _peak([t.threads for t in trees]),
        "rss_peak_mb": _peak([t.rss_mb for t in trees]),
        "device_util_mean": _mean([sum(u) / len(u) for u in util if u]),
        "device_util_peak": _peak([max(u) for u in util if u]),
        "device_memory_peak_mb": _peak([sum(m) for m in memory if m]),
        "power_mean_w": _mean([sum(p) for p in power if p]),
    }


def trial_usage(sampler: Sampler, record: TrialRecord) -> dict[str, Any]:
    """The `monitor` field of a trial record: the samples taken during the timed fit.

    The child stores the wall-clock span of its timed `fit()` as the record's
    `timed_wall`; import, build, warm-up and compilation fall outside it. A
    trial without one (failed early), or a timed fit shorter than one
    interval, is summarized over the whole trial, and `scope` says so.
    """
    span = record.extra.get("timed_wall") or None
    # a sample taken once the trial's process had exited (its last moments: the grace below) describes nothing of it
    taken = [s for s in sampler.samples if s.tree is not None] if sampler.tree is not None else sampler.samples
    chosen: list[Sample] = []
    if span:
        start, end = span
        # a sample at t covers (t - interval, t]: keep those that end inside the span
        chosen = [s for s in taken if start < s.time <= end + sampler.interval_s / 2]
    scope = "timed fit" if chosen else "whole trial"
    summary = usage_figures(chosen or taken or sampler.samples, sampler.interval_s)
    return {"scope": scope, **summary, "gpus": sampler.gpu_names}
