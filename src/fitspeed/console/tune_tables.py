"""The tables `fitspeed tune` and `fitspeed show` print: a study's answer, its evidence, and what was rejected.

Drawn from the `StudySummary` alone (`fitspeed.search.summary`), with the
layout helpers of `fitspeed.console.tables`; `tune_text` gives the same text to
`TuneResult.table`.
"""

from __future__ import annotations

import io
import textwrap
from collections.abc import Mapping, Sequence
from typing import Any

from rich.console import Console
from rich.table import Table
from rich.text import Text

from fitspeed.console.tables import print_failures, print_table, whole_words
from fitspeed.core.study_summary import StudySummary, pairs_title, share_text
from fitspeed.report import batch_sweep
from fitspeed.report.numbers import level, number, ratio


def _of_trials(n: int) -> str:
    return f" (median of {n} trials)" if n and n > 1 else ""


def head_title(summary: StudySummary) -> str:
    """What the tables are about: the study, and its workload where the study is not named after it.

    >>> def named(study): return StudySummary.from_dict({"study": study, "model": "tiny", "baseline": {}, "best": {}})
    >>> head_title(named("tiny · synthetic"))
    'tiny · synthetic'
    >>> head_title(named("tiny-synthetic"))
    'study tiny-synthetic · tiny · synthetic'
    """
    workload = f"{summary.model} · {summary.data or 'synthetic'}"
    return workload if summary.study == workload else f"study {summary.study} · {workload}"


def share_line(shares: Sequence[Mapping[str, Any]]) -> str:
    """Each knob of the answer with its own share of the speed-up, how that share was measured, and its interval.

    >>> share_line([{"knob": "precision", "value": "mixed_bfloat16", "ratio": 1.62, "how": "added alone"},
    ...             {"knob": "steps_per_execution", "value": 64, "ratio": 1.06, "how": "taken out", "low": 1.03,
    ...              "high": 1.1, "confidence": 0.973}])
    'precision=mixed_bfloat16 1.62× (added alone), steps_per_execution=64 +6% (taken out; 97.3% CI 1.03–1.10)'
    """
    return ", ".join(share_text(s) for s in shares)


def processes_line(processes: Mapping[str, int]) -> str:
    """Where a study's trial processes went (`search.summary.processes`): `--trials` bounds the search's alone.

    >>> processes_line({"search": 33, "lean": 36, "verification": 6, "batch sizes": 0, "guarded": 2,
    ...                 "guard runs": 20, "trials": 40})
    '75 trial processes: 33 for the search (of --trials 40), 36 for the lean step, 6 for the verification; besides, the numerics guard checked 2 configurations in 20 training runs'
    >>> processes_line({"search": 12, "verification": 3, "guarded": 1})  # a results file keeps no guard runs
    '15 trial processes: 12 for the search, 3 for the verification; besides, the numerics guard checked 1 configuration'
    """
    parts = [(processes.get("search", 0), "for the search" + (f" (of --trials {processes['trials']})"
                                                              if processes.get("trials") else "")),
             (processes.get("lean", 0), "for the lean step"), (processes.get("verification", 0), "for the verification"),
             (processes.get("batch sizes", 0), "for the batch sizes")]
    line = f"{sum(n for n, _ in parts)} trial processes: " + ", ".join(f"{n} {what}" for n, what in parts if n)
    guarded, runs = processes.get("guarded", 0), processes.get("guard runs")
    if guarded:
        line += f"; besides, the numerics guard checked {guarded} configuration{'s' if guarded != 1 else ''}"
    if guarded and runs:
        line += f" in {runs} training run{'s' if runs != 1 else ''}"
    return line


def tune_text(summary: StudySummary, width: int = 100) -> str:
    """The tables `print_tune` prints, as plain text `width` columns wide (`fitspeed.TuneResult.table`)."""
    buffer = io.StringIO()
    print_tune(Console(file=buffer, width=width, color_system=None, markup=False), summary)
    return buffer.getvalue()


def print_tune(console: Console, summary: StudySummary) -> None:
    """The tuner's answer: baseline, verified best, each knob alone, rejections."""
    base, best = summary.baseline, summary.best
    console.print(Text(head_title(summary), style="bold"))  # the console wraps it at words, not a narrow table
    head = Table(show_header=False)
    head.add_column("", style="bold")
    head.add_column("")
    # the verdict speaks of A and B: the rows say which is which
    head.add_row("A: baseline", f"{base.config.label()}: "
                             f"{number(base.samples_per_s, 0)} samples/s{_of_trials(base.trials)}")
    head.add_row("B: best", f"{best.label}: {number(best.samples_per_s, 0)} samples/s{_of_trials(best.trials)}")
    estimate = best.estimate
    if estimate:
        head.add_row("verified", f"{estimate['median']:.2f}× "
                                 f"({level(estimate['confidence'])} CI {estimate['ci_low']:.2f}–{estimate['ci_high']:.2f}) "
                                 f"over {len(estimate['ratios'])} fresh pair(s), each in a random order")
    if best.shares:
        head.add_row("shares", share_line(best.shares))
    head.add_row("verdict", Text.assemble((best.verdict, "bold"), f" — {best.why}" if best.why else ""))
    if best.agreement:
        head.add_row("why they differ", best.agreement)
    if base.load:
        head.add_row("load", base.load)
    determinism = summary.determinism
    if determinism:
        head.add_row("determinism", f"{determinism['config']}: {ratio(determinism['ratio'])} the baseline's speed; "
                                    f"{determinism['held']} of {determinism['steps']} steps "
                                    f"(sha256 {determinism['hash'][:12]}…)")
    # imported here: it imports optuna, which `fitspeed --help` must not wait for
    from fitspeed.report import plot_data

    resolution = plot_data.resolution(summary)
    if resolution:
        head.add_row("resolution", resolution)
    if summary.processes:
        head.add_row("trials", processes_line(summary.processes))
    if summary.cost and summary.cost.get("line"):
        head.add_row("cost", summary.cost["line"])  # the tune's time, and what the answer saves per run
    print_table(console, head)

    effects = Table(title="each knob alone (screened in one trial each; samples/s: the median of the configuration's "
                          "own trials, against the median of all the baseline's; the screen's line during the run "
                          "compared one trial with the baseline timed beside it, so the two can differ)",
                    header_style="bold", pad_edge=False)
    knobs = whole_words([row["config"] for row in summary.effects]
                        + [k for names, _ in summary.skipped_groups for k in names], cap=28)
    for column in ("knob", "samples/s", "ratio", "outcome"):
        # the outcome is prose: a word longer than what is left of 80 columns folds, rather than the table crop
        effects.add_column(column, justify="right" if column in ("samples/s", "ratio") else "left",
                           min_width=knobs if column == "knob" else None,
                           overflow="fold" if column == "outcome" else "ellipsis")
    for row in summary.effects:
        effects.add_row(row["config"], number(row["samples_per_s"], 0), ratio(row["ratio"]), row["outcome"])
    for names, reason in summary.skipped_groups:
        effects.add_row(", ".join(names), "–", "–", f"skipped: {reason}")
    for refused in summary.refused:  # a combination the search proposed, refused before any trial
        # its reason shortened here (a few lines of the column, not a dozen); show --json and the page have it whole
        effects.add_row(refused["changes"], "–", "–",
                        f"not measured: {textwrap.shorten(refused['reason'], 100, placeholder=' …')}")
    print_table(console, effects)

    if summary.decisions:
        decided = Table(title=pairs_title(summary.decisions), header_style="bold")
        # the change and what it went on top of share a column, so that at 80 columns each knob=value stays whole
        labels = whole_words([row[k] for row in summary.decisions for k in ("change", "incumbent")], cap=30)
        # the verdict's prose gets what the console has left (rich would otherwise crop the table's right edge)
        left = console.width - (7 + labels + 5 + 9) - 2 * 5 - 6
        for column in ("step", "change, on top of", "pairs", "ratio, CI", "verdict"):
            decided.add_column(column, justify="right" if column in ("pairs", "ratio, CI") else "left",
                               min_width=labels if column == "change, on top of" else None,
                               max_width=max(9, left) if column == "verdict" else None,
                               no_wrap=column in ("step", "pairs"), overflow="fold")
        for step in summary.decisions:
            decided.add_row(step["purpose"], f"{step['change']}\non top of {step['incumbent']}", str(step["pairs"]),
                            ratio(step["ratio"]) + ("\n" + step["interval"].replace(" (", "\n(")
                                                    if step["interval"] != "–" else ""),
                            step["verdict"] + (f" ({step['why']})" if step.get("why") else ""))
        print_table(console, decided)

    if summary.rejected:
        rejected = Table(title="rejected", header_style="bold")
        rejected.add_column("config", min_width=whole_words([row["config"] for row in summary.rejected]))
        rejected.add_column("phase", no_wrap=True)
        rejected.add_column("reason", overflow="fold")
        for row in summary.rejected:
            rejected.add_row(row["config"], row["phase"] or "–", row["outcome"])
        print_table(console, rejected)

    batch = summary.batch_sizes
    if batch["rows"]:
        figures = batch  # with remat counted (`fitspeed.search.batch_figures`)
        sizes = Table(title="throughput against batch size (re-tune the learning rate if you change it)",
                      header_style="bold")
        for column in ("batch size", "remat", "status", "samples/s", "vs baseline"):
            sizes.add_column(column, justify="right")
        for row in figures["rows"]:
            sizes.add_row(str(row["batch_size"]), row["remat"], row["status"],
                          number(row["samples_per_s"], 0), ratio(row["ratio"]))
        print_table(console, sizes)
        found = batch_sweep.sentence(figures)
        if found:
            console.print(found, highlight=False)
        console.print("A larger batch changes the training recipe: re-tune the learning rate "
                      "(and check accuracy) before you keep it.", highlight=False)
    print_failures(console, summary.failures or [])
