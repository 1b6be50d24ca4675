"""A monitor CSV as a PNG: one panel per quantity over time, devices overlaid.

Compute first, draw second: `series` reads the CSV into plain `Panel`s (what a
test checks), `draw` hands them to matplotlib. A torn last row, left by a
kill, is skipped. matplotlib is imported only in `draw`.
"""

from __future__ import annotations

import csv
import re
from dataclasses import dataclass, field
from pathlib import Path

from fitspeed.core.files import write_atomically

# (title, unit, column pattern, label for each match); the pattern's group names the line
_PANELS: tuple[tuple[str, str, str, str], ...] = (
    ("CPU per core", "%", r"cpu(\d+)_percent", "core {}"),
    ("process tree CPU (100 = one core)", "%", r"(proc)_cpu_percent", "tree"),
    ("process tree threads", "threads", r"(proc)_threads", "tree"),
    ("process tree resident memory", "MiB", r"(proc)_rss_mb", "tree"),
    ("process tree storage I/O (cumulative)", "MiB", r"proc_(read|write)_mb", "{}"),
    ("host memory in use", "MiB", r"(mem)_used_mb", "host"),
    ("GPU utilization", "%", r"gpu(\d+)_util_percent", "GPU {}"),
    ("GPU memory used", "MiB", r"gpu(\d+)_memory_used_mb", "GPU {}"),
    ("GPU power", "W", r"gpu(\d+)_power_w", "GPU {}"),
    ("GPU temperature", "°C", r"gpu(\d+)_temperature_c", "GPU {}"),
    ("GPU SM clock", "MHz", r"gpu(\d+)_sm_clock_mhz", "GPU {}"),
)


@dataclass(frozen=True)
class Panel:
    title: str
    unit: str
    lines: dict[str, list[float | None]] = field(default_factory=dict)


@dataclass(frozen=True)
class PlotData:
    elapsed_s: list[float]
    panels: list[Panel]


def _number(text: str) -> float | None:
    try:
        return float(text) if text else None
    except ValueError:
        return None


def read_rows(path: Path) -> tuple[list[str], list[list[str]]]:
    """The header and the whole rows of a monitor CSV (a torn last row is dropped)."""
    with path.open(newline="", encoding="utf-8") as stream:
        reader = csv.reader(stream)
        header = next(reader, [])
        rows = [r for r in reader if len(r) == len(header)]
    if rows and _number(rows[-1][1]) is None:
        rows.pop()
    return header, rows


def series(path: Path) -> PlotData:
    """The panels to draw: every quantity with at least one reading, in a fixed order."""
    header, rows = read_rows(path)
    elapsed = [_number(r[1]) or 0.0 for r in rows]
    panels = []
    for title, unit, pattern, label in _PANELS:
        lines: dict[str, list[float | None]] = {}
        for index, name in enumerate(header):
            match = re.fullmatch(pattern, name)
            if match:
                values = [_number(r[index]) for r in rows]
                if any(v is not None for v in values):
                    lines[label.format(match.group(1))] = values
        if lines:
            panels.append(Panel(title, unit, lines))
    return PlotData(elapsed, panels)


def draw(data: PlotData, png: Path, title: str | None = None) -> Path:
    """Write the panels to `png`, stacked, sharing the time axis."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from fitspeed.report.plots import png_bytes

    count = max(1, len(data.panels))
    # constrained layout leaves room for the figure's title above the first panel's (tight_layout does not)
    figure, axes = plt.subplots(count, 1, figsize=(9, 1.9 * count + 0.6), sharex=True, squeeze=False,
                                layout="constrained")
    for axis, panel in zip(axes[:, 0], data.panels):
        for label, values in panel.lines.items():
            points = [(t, v) for t, v in zip(data.elapsed_s, values) if v is not None]
            axis.plot([p[0] for p in points], [p[1] for p in points], label=label, linewidth=1.2)
        axis.set_title(panel.title, fontsize=9, loc="left")
        axis.set_ylabel(panel.unit, fontsize=8)
        axis.tick_params(labelsize=8)
        axis.grid(alpha=0.3)
        if panel.unit == "%":
            top = max((v for values in panel.lines.values() for v in values if v is not None), default=100.0)
            axis.set_ylim(0, max(105.0, top * 1.05))
        if 1 < len(panel.lines) <= 8:
            axis.legend(fontsize=7, loc="upper right", ncol=min(4, len(panel.lines)))
    axes[-1, 0].set_xlabel("seconds", fontsize=8)
    if title:  # the user's command line: a `$` in it is text, not mathtext
        figure.suptitle(title, fontsize=10, parse_math=False)
    png.parent.mkdir(parents=True, exist_ok=True)
    return write_atomically(png, png_bytes(figure, 100))


def plot(csv_path: Path, png: Path | None = None, title: str | None = None) -> Path:
    """Read `csv_path` and draw it to `png` (default: the same name, .png)."""
    return draw(series(csv_path), png or csv_path.with_suffix(".png"), title)
