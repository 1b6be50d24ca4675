"""`fitspeed report`: one offline HTML page and its PNG plots, from a study or a results file.

The page and the terminal table are drawn from one `StudySummary` (`search.summary.study_summary`);
`plot_data` turns it into the plots' series, `plots` draws them, and a
Jinja2 template with autoescaping renders the page, so every string that came
from a user or a workload (study names, module paths, error messages) is
escaped. Nothing is fetched from the network: the CSS and the table-sorting
script are inline, and the plots are files beside `index.html`.
"""

from __future__ import annotations

import dataclasses
import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import jinja2

from fitspeed.core.errors import UserError
from fitspeed.core.files import write_atomically
from fitspeed.core.record import to_json
from fitspeed.core.study_summary import StudySummary
from fitspeed.report import batch_sweep, plot_data
from fitspeed.report.numbers import number, ratio
from fitspeed.core import best_json

if TYPE_CHECKING:
    from fitspeed.search.summary import StudyData

CAPTIONS = {
    "time_bars": ("Time per configuration",
                  "Seconds to train 10,000 samples, with each configuration's time as % of the "
                  "baseline's (grey: baseline; green: the verified best)."),
    "waterfall": ("Speed-up waterfall",
                  "From the baseline through each knob of the best configuration to the verified best; "
                  "hatched bars are estimated from single-knob runs, the error bar is the verified interval."),
    "knob_panels": ("Throughput against each knob",
                    "Samples/s at each value tried alone, all other knobs at the baseline (grey)."),
    "compile": ("Compile time",
                "The cost side: first execution less a steady one, by steps_per_execution and XLA."),
    "loss_curves": ("Numerics guard",
                    "Training loss from the same seed, data and steps: the baseline against each "
                    "configuration whose numerics could change (dotted: rejected)."),
}
MISSING = {
    "time_bars": "no configuration finished yet",
    "waterfall": "no speed-up to break down (the baseline did not finish, or nothing beat it)",
    "knob_panels": "no knob was measured alone yet",
    "compile": "no configuration that varies only steps_per_execution or XLA finished yet",
    "loss_curves": "no loss was recorded yet",
}


@dataclass(frozen=True)
class Report:
    folder: Path
    index: Path
    plots: dict[str, Path | None]
    summary: StudySummary


def load_summary(source: str | None, study: str | None, storage: str,
                 workload: str | None = None) -> StudySummary:
    """The summary of a study (newest by default) or of a results file."""
    from fitspeed.search.summary import study_summary

    if source is not None and not source.endswith((".db", ".sqlite", ".sqlite3")):
        data = _results_data(Path(source), workload)
    else:
        if source is not None:
            storage = f"sqlite:///{source}"  # load_study refuses a file that does not exist, and creates none
        from fitspeed.search.studies import load_study
        from fitspeed.search.summary import study_data

        data = study_data(load_study(study, storage))
    # each crash with the end of its stderr
    return dataclasses.replace(study_summary(data), failures=tuple(plot_data.study_failures(data)))


def _results_data(path: Path, workload: str | None) -> StudyData:
    from fitspeed.measure import results

    if not path.is_file():
        raise UserError(f"No results file at {str(path)!r}. Expected a JSON-lines file written by "
                        "`fitspeed measure` or `compare`, or a study database (.db).")
    try:
        records, skipped = results.read(path)
    except (OSError, UnicodeDecodeError) as error:
        raise UserError(f"Could not read {str(path)!r} as a fitspeed results file: {error}. Pass the "
                        "fitspeed-results.jsonl that `fitspeed measure` or `compare` wrote.") from None
    names = plot_data.workloads_in(records)
    if not names:
        raise UserError(f"Expected {str(path)!r} to hold fitspeed trial records, as `fitspeed measure` or "
                        f"`compare` append them. It holds none ({len(skipped)} line(s) skipped"
                        + (f", {skipped[0]}" if skipped else "") + ").")
    if workload is not None and workload not in names:
        raise UserError(f"No records for workload {workload!r} in {str(path)!r}. "
                        f"Expected one of: {', '.join(repr(n) for n in names)}.")
    data = plot_data.from_results(records, workload)
    data["read_notes"] = [f"{str(path)!r}: skipped {line}" for line in skipped]
    if workload is None and len(names) > 1:
        chosen = data["meta"]["workload"]
        others = ", ".join(repr(n) for n in names if n != chosen)
        data["read_notes"].append(f"{str(path)!r} holds {len(names)} workloads; this report is {chosen!r}, "
                                  f"the newest. Pick another with --workload: {others}.")
    return data


def render(summary: StudySummary, plots: dict[str, Path | None]) -> str:
    """The page's HTML (autoescaped), with plot files named relative to the page."""
    environment = jinja2.Environment(
        loader=jinja2.PackageLoader("fitspeed.report", "templates"),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
    )
    figures = [{"file": path.name if path else None, "title": CAPTIONS[key][0],
                "caption": CAPTIONS[key][1], "missing": MISSING[key]} for key, path in plots.items()]
    return environment.get_template("report.html").render(
        summary=summary,
        notes=plot_data.notes(summary),
        environment=plot_data.environment_rows(summary),
        resolution=plot_data.resolution(summary),
        baseline_label=summary.baseline.config.label(),
        snippet=best_json.snippet(summary.best.config),
        plots=figures,
        generated=time.strftime("%Y-%m-%d %H:%M:%S %Z"),
        num=number,
        ratio=ratio,
        batch_sentence=batch_sweep.sentence,
    )


def write(summary: StudySummary, folder: Path) -> Report:
    """Write the plots, `index.html` and `report.json` (the plain data) into `folder`."""
    from fitspeed.report.plots import draw_all  # matplotlib: imported only when drawing

    try:
        folder.mkdir(parents=True, exist_ok=True)
        data = plot_data.all_series(summary)
        drawn = draw_all(data, folder)
        index = folder / "index.html"
        write_atomically(folder / "report.json", json.dumps(
            json.loads(to_json({"summary": summary.to_dict(), "plots": data})), indent=2) + "\n")
        write_atomically(index, render(summary, drawn))
    except OSError as error:
        raise UserError(f"Could not write the report into {str(folder)!r}: {error.strerror}. "
                        "Pass --out with a writable folder; the study itself is unchanged.") from None
    return Report(folder=folder, index=index, plots=drawn, summary=summary)
