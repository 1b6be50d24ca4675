"""`fitspeed reproduce`'s chart and HTML page, drawn from plain data (`fitspeed.reproduce.output`).

The chart: one bar per configuration, its time as % of its baseline's (lower
is faster), the article's figure hatched beside it where the article gave
one, and the held-out accuracy written at the bar's end (red where it fell
below the baseline's by more than its spread over seeds allows: the numerics
guard's check, `fitspeed.search.guard.compare`). The page: one section per
reproduction, autoescaped like `fitspeed report`'s.
"""

from __future__ import annotations

import time
from pathlib import Path

import jinja2

from fitspeed.core.files import write_atomically
from fitspeed.core.json_data import JSONObject


def chart(data: JSONObject, path: Path) -> Path:
    """Draw the chart into `path` (a figure saying so where no configuration finished)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from fitspeed.report.plots import BAD_COLOR, BASE_COLOR, OTHER_COLOR, png_bytes

    bars = data["bars"]
    fig, ax = plt.subplots(figsize=(9.5, 0.5 * max(len(bars), 2) + 1.8))
    has_article = any(b["article"] is not None for b in bars)
    height = 0.38 if has_article else 0.7
    labelled = False
    for index, bar in enumerate(bars):
        ours = bar["percent"] or 0.0
        color = BASE_COLOR if bar["baseline"] else OTHER_COLOR
        ax.barh(index - (height / 2 if has_article else 0), ours, height=height, color=color,
                label=None if bar["baseline"] or labelled else "this machine (grey: baselines)")
        labelled = labelled or not bar["baseline"]
        if bar["article"] is not None:
            ax.barh(index + height / 2, bar["article"], height=height, color="white", edgecolor="black",
                    hatch="//", label="the article")
        text = f" {ours:.0f}%" if bar["percent"] else f" {bar['status']}"
        if bar["accuracy"] is not None:
            text += f"  acc {100 * bar['accuracy']:.1f}%" + ("  ⚠" if bar["marked"] else "")
        ax.text(max(ours, bar["article"] or 0.0), index, text, va="center", fontsize=8,
                color=BAD_COLOR if bar["marked"] or not bar["percent"] else "black")
    ax.axvline(100, color=BASE_COLOR, linewidth=0.8, linestyle="--")
    ax.set_yticks(range(len(bars)), [b["label"] for b in bars], fontsize=8)
    ax.invert_yaxis()
    widest = max([b["percent"] or 0.0 for b in bars] + [b["article"] or 0.0 for b in bars] + [100.0])
    ax.set_xlim(0, widest * 1.45)
    ax.set_xlabel("time as % of the baseline's (lower is faster); held-out accuracy at the bar's end")
    ax.set_title(data["title"], fontsize=10)
    handles, labels = ax.get_legend_handles_labels()
    if has_article:
        unique = dict(zip(labels, handles))
        ax.legend(unique.values(), unique.keys(), fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.16),
                  ncol=2, frameon=False)
    fig.tight_layout()
    return write_atomically(path, png_bytes(fig, 110))


def page(sections: list[JSONObject], path: Path) -> Path:
    """The HTML page: a section per reproduction (its table, context lines and chart)."""
    environment = jinja2.Environment(
        loader=jinja2.PackageLoader("fitspeed.report", "templates"),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
    )
    html = environment.get_template("reproductions.html").render(
        sections=sections, generated=time.strftime("%Y-%m-%d %H:%M:%S %Z"))
    return write_atomically(path, html)
