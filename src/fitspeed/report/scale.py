"""`fitspeed scale`'s plot: speed-up and scaling efficiency against the device count (processes × devices).

Draws the rows of `fitspeed.search.scale.Scaling.rows` (plain data): on the
left the speed-up over 1 device with its confidence interval beside the line
of linear scaling, on the right the efficiency (speed-up ÷ N) against 100%.
A count whose pairs never finished ok is left out. matplotlib (Agg) only here.
"""

from __future__ import annotations

from itertools import pairwise
from pathlib import Path

from fitspeed.core.files import write_atomically
from fitspeed.core.json_data import JSONObject

LINEAR_COLOR, MEASURED_COLOR = "#7f7f7f", "#2ca02c"  # the report's baseline grey and best green


def _error(rows: list[JSONObject], key: str) -> list[list[float]]:
    """Asymmetric error bars from each row's interval (zero where there is none)."""
    lows = [r[key] - r[f"{key}_low"] if r[f"{key}_low"] is not None else 0.0 for r in rows]
    highs = [r[f"{key}_high"] - r[key] if r[f"{key}_high"] is not None else 0.0 for r in rows]
    return [lows, highs]


def axis_labels(rows: list[JSONObject]) -> tuple[list[str], str, str]:
    """The x axis: each row's tick, the axis's label, and what the speed-up is over. Rows of the processes axis
    are placed at every process's devices and marked processes × devices per process.

    >>> axis_labels([{"devices": 1, "used": 1}, {"devices": 2, "used": 2}])
    (['1', '2'], 'devices', '1 device')
    >>> axis_labels([{"processes": 1, "devices": 2, "used": 2}, {"processes": 2, "devices": 2, "used": 4}])
    (['1×2', '2×2'], 'processes × devices per process (placed at the devices in all)', '1 process')
    """
    if "processes" not in rows[0]:
        return [str(r["used"]) for r in rows], "devices", "1 device"
    return ([f"{r['processes']}×{r['devices']}" for r in rows],
            "processes × devices per process (placed at the devices in all)", "1 process")


def draw(rows: list[JSONObject], path: Path, title: str) -> Path | None:
    """The two panels as a PNG at `path`; None when no count above 1 was measured."""
    from fitspeed.report.plots import png_bytes, subplots  # matplotlib's Agg canvas, no pyplot

    shown = [r for r in rows if r["speedup"] is not None]
    if len(shown) < 2:
        return None
    counts = [r["used"] for r in shown]
    ticks, axis, one = axis_labels(shown)
    fig, (left, right) = subplots(1, 2, figsize=(10, 4))
    left.plot(counts, [c / counts[0] for c in counts], linestyle="--", color=LINEAR_COLOR, label="linear")
    left.errorbar(counts, [r["speedup"] for r in shown], yerr=_error(shown, "speedup"), marker="o",
                  color=MEASURED_COLOR, capsize=4, label="measured (95% CI)")
    for row in shown:
        if row["samples_per_s"]:
            left.annotate(f"{row['samples_per_s']:,.0f}/s\nbatch {row['global_batch']}", (row["used"], row["speedup"]),
                          textcoords="offset points", xytext=(6, -18), fontsize=7)
    left.set_xlabel(axis)
    left.set_ylabel(f"speed-up over {one} (samples/s ratio)")
    left.set_xticks(counts, ticks)
    left.set_ylim(0, max(max(counts) / counts[0], max(r["speedup_high"] or r["speedup"] for r in shown)) * 1.15)
    left.legend(fontsize=8, loc="upper left")
    left.set_title("Speed-up")
    efficiency = [100 * r["efficiency"] for r in shown]
    error = [[100 * e for e in side] for side in _error(shown, "efficiency")]
    right.axhline(100, linestyle="--", color=LINEAR_COLOR, label="linear (100%)")
    right.bar(counts, efficiency, color=MEASURED_COLOR, width=0.35 * min(b - a for a, b in pairwise(counts)))
    right.errorbar(counts, efficiency, yerr=error, fmt="none", color="black", capsize=4)
    for count, value in zip(counts, efficiency):
        right.text(count, 2, f"{value:.0f}%", ha="center", va="bottom", fontsize=8, color="white")
    right.set_xlabel(axis)
    right.set_ylabel("scaling efficiency: speed-up ÷ devices (%)")
    right.set_xticks(counts, ticks)
    right.set_ylim(0, max(110.0, max(efficiency) + max(error[1]) + 10))
    right.legend(fontsize=8, loc="upper right")
    right.set_title("Efficiency")
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    return write_atomically(path, png_bytes(fig, 110))
