"""What a reproduction writes: results.json, the table (Markdown; cli prints it in the terminal),
the chart and the HTML page.

`table(summary)` turns the summary into strings once; the Markdown here, the
terminal table (`fitspeed.cli.reproduce`) and the HTML section
(`fitspeed.report.reproduction`) all print that one table. The folder's
results.json keeps the summary and every trial record.

Layout: `OUT/NAME/results.json`, `OUT/NAME/table.md`, `OUT/NAME/chart.png`,
and `OUT/index.html`, one section per reproduction found under OUT.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from fitspeed.core.errors import UserError
from fitspeed.core.files import write_atomically
from fitspeed.core.json_data import JSONObject
from fitspeed.core.record import Status, to_json
from fitspeed.reproduce.experiment import (
    ONE_SEED_TOLERANCE,
    Results,
    differences,
    summarize,
)
from fitspeed.search.guard import SPREAD_MULTIPLE

MARK = "⚠"


def _number(value: Any, digits: int = 0) -> str:
    if value is None:
        return "–"
    if isinstance(value, str):
        return value
    return f"{value:,.{digits}f}"


def accuracy_text(accuracy: JSONObject | None) -> str:
    """'81.2%' for one value, '81.2% (80.1–82.3, 3 runs)' for several.

    >>> accuracy_text({"mean": 0.8125, "min": 0.8, "max": 0.825, "n": 2})
    '81.2% (80.0–82.5, 2 runs)'
    """
    if not accuracy:
        return "–"
    text = f"{100 * accuracy['mean']:.1f}%"
    if accuracy["n"] > 1:
        text += f" ({100 * accuracy['min']:.1f}–{100 * accuracy['max']:.1f}, {accuracy['n']} runs)"
    return text


def table(summary: JSONObject) -> JSONObject:
    """The table as strings: headers, rows (one per configuration), and which rows are baselines."""
    headers = [header for _, header in summary["columns"]]
    headers += ["status", "samples/s", "time % of baseline"]
    if summary["article_unit"]:
        headers.append("article's %")
    headers += [header for _, header in summary["extra_columns"]]
    headers += ["held-out accuracy", "accuracy mark"]
    rows = []
    for row in summary["rows"]:
        cells = [str(row["cells"].get(key, "")) for key, _ in summary["columns"]]
        status = row["status"] if row["status"] == Status.OK else f"{row['status']}: {row['reason']}"
        cells += [status, _number(row["samples_per_s"]),
                  "100 (base)" if row["baseline"] and row["samples_per_s"] else
                  _number(row["percent_of_baseline_time"], 1)]
        if summary["article_unit"]:
            cells.append(_number(row["article"], 1))
        extra = row["extra"] or {}
        for key, _ in summary["extra_columns"]:
            value = extra.get(key)
            cells.append(_number(value, 1 if isinstance(value, float) else 0))
        cells += [accuracy_text(row["accuracy"]), f"{MARK} {row['accuracy_mark']}" if row["accuracy_mark"] else ""]
        rows.append(cells)
    return {"headers": headers, "rows": rows, "baselines": [r["baseline"] for r in summary["rows"]]}


def context_lines(summary: JSONObject) -> list[str]:
    """The sentences printed with every table: data, sizes, machine, differences, accuracy rule."""
    here = summary["ran_on"]
    versions = ", ".join(f"{k} {v}" for k, v in here["versions"].items())
    one_seed = len(summary["seeds"]) == 1
    return [
        f"Article {summary['article']}: {summary['claim']}",
        f"Data: {summary['data']}.",
        *([f"The article's % is {summary['article_unit']}."] if summary["article_unit"] else []),
        (f"Sizes: {summary['sizes']}; seed{'s' if len(summary['seeds']) > 1 else ''} "
         f"{', '.join(map(str, summary['seeds']))}."),
        (f"Ran on: {here['device']}, {here['cores']} cores, backend {here['backend']}, "
         f"CPU features {' '.join(here['cpu_features']) or 'unknown'}, oneDNN "
         f"{'on' if here['onednn'] else 'off' if here['onednn'] is False else 'unknown'}; {versions}."),
        "Differs from the article: " + "; ".join(differences(summary)) + ".",
        "Accuracy: on held-out data never trained on; "
        + (f"one seed, so there is no spread over seeds (runs of one seed repeat each other): a configuration is "
           f"marked {MARK} when it falls more than {100 * ONE_SEED_TOLERANCE:.0f} points below its baseline."
           if one_seed else f"marked {MARK} when below its baseline by more than {SPREAD_MULTIPLE:g} times the "
           f"baseline's standard deviation over seeds (and at least {100 * ONE_SEED_TOLERANCE:.0f} points), "
           "the numerics guard's check."),
        *summary["notes"],
        *([("Speed: one trial per configuration (the median of its later epochs or timed windows); on a shared "
            "machine a single trial scatters by 10-20%, so smaller differences are not resolved here: "
            "`fitspeed compare` measures one pair with an interval.")]
          if len(summary["seeds"]) == 1 and summary["trials"] <= len(summary["rows"]) else []),
        f"{summary['trials']} trials in {summary['wall_s']:.0f} s.",
    ]


def markdown(summary: JSONObject) -> str:
    """The table in Markdown, with its context, and the article's own table where it printed one."""
    shown = table(summary)
    lines = [f"### {summary['name']} (article {summary['article']}): {summary['title']}", ""]
    lines += ["| " + " | ".join(shown["headers"]) + " |", "|" + "---|" * len(shown["headers"])]
    for cells in shown["rows"]:
        lines.append("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")
    lines.append("")
    lines += [f"- {line}" for line in context_lines(summary)]
    if summary["article_table"]:
        keys = list(summary["article_table"][0])
        lines += ["", "The article's own table:", "", "| " + " | ".join(keys) + " |", "|" + "---|" * len(keys)]
        lines += ["| " + " | ".join(str(row[k]) for k in keys) + " |" for row in summary["article_table"]]
    return "\n".join(lines) + "\n"


def chart_data(summary: JSONObject) -> JSONObject:
    """The chart's plain data: per timed row, our % of its baseline's time, the article's, and accuracy."""
    bars = [{"label": row["label"], "percent": row["percent_of_baseline_time"], "article": row["article"],
             "accuracy": row["accuracy"]["mean"] if row["accuracy"] else None,
             "baseline": row["baseline"], "marked": bool(row["accuracy_mark"]), "status": row["status"]}
            for row in summary["rows"] if row["status"] != "skipped" and (row["percent_of_baseline_time"]
                                                                         or row["status"] != Status.OK)]
    return {"title": f"{summary['name']} (article {summary['article']}) on {summary['ran_on']['device']}",
            "bars": bars, "article_unit": summary["article_unit"]}


def write(results: Results, out: Path) -> tuple[JSONObject, Path]:
    """Write NAME/results.json, table.md and chart.png, and refresh OUT/index.html; return the summary and the folder."""
    from fitspeed.report import reproduction

    summary = summarize(results)
    folder = out / summary["name"]
    try:
        folder.mkdir(parents=True, exist_ok=True)
        records = [r.to_dict() for rows in results.records.values() for r in rows]
        write_atomically(folder / "results.json",
                         json.dumps(json.loads(to_json({"summary": summary, "records": records})), indent=1) + "\n")
        write_atomically(folder / "table.md", markdown(summary))
        reproduction.chart(chart_data(summary), folder / "chart.png")
        page(out)
    except OSError as error:
        raise UserError(f"Could not write the reproduction into {str(folder)!r}: {error.strerror or error}. "
                        "Pass --out with a writable folder.") from None
    return summary, folder


def page(out: Path) -> Path:
    """OUT/index.html with a section for every NAME/results.json under OUT, in article order."""
    from fitspeed.report import reproduction

    sections = []
    for path in sorted(out.glob("*/results.json")):
        try:
            summary = json.loads(path.read_text())["summary"]
        except (OSError, ValueError, KeyError):
            continue
        sections.append({"summary": summary, "table": table(summary), "context": context_lines(summary),
                         "chart": f"{path.parent.name}/chart.png"})
    sections.sort(key=lambda s: s["summary"]["article"])
    return reproduction.page(sections, out / "index.html")
