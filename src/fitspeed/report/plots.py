"""The report's five PNG plots, drawn from `plot_data.all_series` (matplotlib's Agg canvas, without pyplot).

Each drawer takes plain data and a path and returns the path, or None when it
has nothing to draw (the page then says why). Nothing here computes a figure:
that is `plot_data`'s job, which is what the tests check.
"""

from __future__ import annotations

import io
import textwrap
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from fitspeed.core.files import write_atomically

if TYPE_CHECKING:
    from fitspeed.report.plot_data import Bar, CompilePoint, LossCurves, PanelPoint, Series, Step

BASE_COLOR, BEST_COLOR, OTHER_COLOR, BAD_COLOR = "#7f7f7f", "#2ca02c", "#1f77b4", "#d62728"


def subplots(*args: Any, figsize: tuple[float, float], **kwargs: Any) -> tuple[Figure, Any]:
    """pyplot.subplots without pyplot: a figure on its own Agg canvas.

    Nothing here selects a backend or registers a figure, so drawing from a
    notebook (`TuneResult._repr_html_`) leaves its inline figures and backend
    as they were.
    """
    fig = Figure(figsize=figsize)
    FigureCanvasAgg(fig)
    return fig, fig.subplots(*args, **kwargs)


def png_bytes(fig: Figure, dpi: int) -> bytes:
    """The figure as PNG bytes: nothing is written until it is whole."""
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=dpi)
    return buffer.getvalue()


def _save(fig: Figure, path: Path) -> Path:
    fig.tight_layout()
    return write_atomically(path, png_bytes(fig, 110))


def wrapped(label: str, width: int = 26) -> str:
    """A configuration's label on as many lines as it needs, one knob=value never split.

    >>> wrapped("steps_per_execution=64 precision=mixed_bfloat16 intra_op_threads=1")
    'steps_per_execution=64\\nprecision=mixed_bfloat16\\nintra_op_threads=1'
    """
    return textwrap.fill(label, width=width, break_long_words=False, break_on_hyphens=False)


def time_bars(bars: list[Bar], path: Path) -> Path | None:
    """Plot 1: seconds per 10,000 samples per configuration, labelled with % of the baseline."""
    if not bars:
        return None
    labels = [wrapped(bar["label"]) for bar in bars]
    lines = sum(label.count("\n") + 1 for label in labels)
    fig, ax = subplots(figsize=(9, 0.3 * lines + 0.25 * len(bars) + 1.6))
    seconds = [bar["seconds"] for bar in bars]
    colors = [BASE_COLOR if b["baseline"] else BEST_COLOR if b["best"] else OTHER_COLOR for b in bars]
    positions = range(len(bars))
    ax.barh(positions, seconds, color=colors)
    ax.set_yticks(list(positions), labels, fontsize=8)
    ax.invert_yaxis()
    for index, bar in enumerate(bars):
        text = f" {bar['seconds']:.2f} s" + (f" ({bar['percent']:.0f}%)" if bar["percent"] is not None else "")
        ax.text(bar["seconds"], index, text, va="center", fontsize=8)
    ax.set_xlim(0, max(seconds) * 1.45)  # room for the longest figure at a bar's end
    ax.set_xlabel("seconds per 10,000 samples (lower is faster); in brackets, % of the baseline's time")
    ax.set_title("Time per configuration")
    return _save(fig, path)


def waterfall(steps: list[Step], path: Path) -> Path | None:
    """Plot 2: from the baseline (1.0×) through each accepted knob to the best."""
    if len(steps) < 2:
        return None
    return _save(waterfall_figure(steps), path)


def waterfall_figure(steps: list[Step]) -> Figure:
    """The waterfall, drawn: each step's label sits above its bar and its error bar's cap."""
    fig, ax = subplots(figsize=(max(6.5, 1.6 * len(steps)), 4.2))
    previous, highest = 0.0, 1.0
    for index, step in enumerate(steps):
        ratio = step["ratio"]
        if step["kind"] == "step":
            bottom, height = min(previous, ratio), abs(ratio - previous)
            color = BEST_COLOR if ratio >= previous else BAD_COLOR
        else:
            bottom, height, color = 0.0, ratio, BASE_COLOR if step["kind"] == "start" else BEST_COLOR
        ax.bar(index, height, bottom=bottom, color=color, hatch=None if step["measured"] else "//",
               edgecolor="black", linewidth=0.5)
        ci = step.get("ci")
        top = max(previous, ratio, ci[1] if ci else 0.0)
        # above the bar and its error bar's cap, a fixed distance in points whatever the axis's scale
        ax.annotate(f"{ratio:.2f}×", (index, top), xytext=(0, 6), textcoords="offset points", ha="center",
                    va="bottom", fontsize=9)
        highest = max(highest, top)
        if ci:
            low, high = ci
            ax.errorbar(index, ratio, yerr=[[ratio - low], [high - ratio]], color="black", capsize=4)
        previous = ratio
    ax.set_ylim(0, highest * 1.2)
    ax.axhline(1.0, color=BASE_COLOR, linewidth=0.8, linestyle="--")
    ax.set_xticks(range(len(steps)), [s["label"] for s in steps], rotation=20, ha="right", fontsize=8)
    ax.set_ylabel("speed-up over the baseline")
    ax.set_title("Speed-up, knob by knob")
    fig.tight_layout()
    return fig


def knob_panels(panels: dict[str, list[PanelPoint]], path: Path) -> Path | None:
    """Plot 3: throughput against each knob's values, one small panel per knob."""
    if not panels:
        return None
    columns = min(3, len(panels))
    rows = -(-len(panels) // columns)
    fig, axes = subplots(rows, columns, figsize=(4.0 * columns, 3.0 * rows), squeeze=False)
    for ax, (knob, points) in zip(axes.flat, panels.items()):
        labels = [str(p["value"]) for p in points]
        speeds = [p["samples_per_s"] or 0.0 for p in points]
        colors = [BASE_COLOR if p["baseline"] else OTHER_COLOR if p["samples_per_s"] else BAD_COLOR
                  for p in points]
        ax.bar(range(len(points)), speeds, color=colors)
        for index, point in enumerate(points):
            if not point["samples_per_s"]:
                ax.text(index, 0, point["status"], ha="center", va="bottom", color=BAD_COLOR, fontsize=8)
        ax.set_xticks(range(len(points)), labels, fontsize=8, rotation=30 if len(points) > 4 else 0)
        ax.set_title(knob, fontsize=10)
        ax.set_ylabel("samples/s", fontsize=8)
        ax.tick_params(axis="y", labelsize=8)
    for ax in list(axes.flat)[len(panels):]:
        ax.set_visible(False)
    fig.suptitle("Throughput against each knob's values (grey: the baseline)")
    return _save(fig, path)


def compile_cost(points: list[CompilePoint], path: Path) -> Path | None:
    """Plot 4: compile time against steps_per_execution, one line per XLA setting."""
    if not points:
        return None
    fig, ax = subplots(figsize=(6.5, 3.8))
    series: dict[str, list[tuple[int, float]]] = {}
    for point in points:
        series.setdefault(point.get("label") or f"jit_compile={point['jit_compile']}", []).append(
            (point["steps_per_execution"], point["compile_s"]))
    for name, values in sorted(series.items()):
        values.sort()
        ax.plot([v[0] for v in values], [v[1] for v in values], marker="o", label=name)
    ax.set_xscale("log", base=2)
    ax.set_ylim(0, max(p["compile_s"] for p in points) * 1.25)  # from zero: 1.24 s against 1.32 s is no cliff
    ax.set_xlabel("steps_per_execution")
    ax.set_ylabel("compile time (s)")
    ax.set_title("The cost side: compile time")
    ax.legend(fontsize=8)
    return _save(fig, path)


def loss_curves(curves: LossCurves, path: Path) -> Path | None:
    """Plot 5: the numerics guard's loss curves, the baseline against each checked configuration."""
    baseline = curves["baseline"]
    if not baseline and not curves["checked"]:
        return None
    fig, ax = subplots(figsize=(6.5, 3.8))
    if baseline:
        ax.plot(range(1, len(baseline) + 1), baseline, color="black", linewidth=2, label="baseline")
    for entry in curves["checked"]:
        curve = entry["curve"]
        style = "-" if entry["ok"] else ":"
        ax.plot(range(1, len(curve) + 1), curve, linestyle=style, marker="o",
                label=f"{entry['label']} ({'kept' if entry['ok'] else 'rejected'})")
    ax.set_xlabel("epoch")
    ax.set_ylabel("training loss")
    title = curves.get("title") or "Numerics guard: loss curves"
    ax.set_title(title)
    ax.legend(fontsize=7)
    return _save(fig, path)


PLOTS: dict[str, tuple[str, Callable[[Any, Path], Path | None]]] = {
    "time_bars": ("time_per_config.png", time_bars),
    "waterfall": ("speedup_waterfall.png", waterfall),
    "knob_panels": ("throughput_by_knob.png", knob_panels),
    "compile": ("compile_time.png", compile_cost),
    "loss_curves": ("loss_curves.png", loss_curves),
}


def draw_all(data: Series, folder: Path) -> dict[str, Path | None]:
    """Draw every plot into `folder`; None for a plot with nothing to draw."""
    series: Mapping[str, object] = data
    return {key: draw(series[key], folder / name) for key, (name, draw) in PLOTS.items()}
