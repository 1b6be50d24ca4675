"""`fitspeed doctor`: is training input-bound? Its trials, and its diagnosis drawn as terminal tables.

The diagnosis itself is `fitspeed.measure.doctor`, its measurements in the
trial child `fitspeed.trial.doctor`; `doctor --model` prints with
`fitspeed.cli.model_check`.
"""

from __future__ import annotations

import json
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

from fitspeed.cli.interrupt import interruptible
from fitspeed.cli.options import DEFAULT_RESULTS, JsonOpt, ResultsOpt
from fitspeed.cli.workload import check_user_error, profile_dir, workload_command
from fitspeed.console.terminal import err, out
from fitspeed.console.workload import Workload
from fitspeed.core.json_data import JSONObject
from fitspeed.core.record import Metrics, Mode, Status, TrialRecord
from fitspeed.core.sequential import Verdict
from fitspeed.measure import results


@workload_command(after="repeats", through="model", memory_limit=False)
def doctor(
    workload: Workload,
    epochs: Annotated[int, typer.Option("--epochs", min=2, help="Epochs of the fit() timed at its edges.")] = 4,
    fixes: Annotated[bool, typer.Option("--fixes/--no-fixes", help="Try the candidate fixes and measure their gain.")] = True,
    model: Annotated[bool, typer.Option("--model", help="Check the model instead: sizes, RNN kernels, XLA blockers, output dtype; FLOPs against the measured matmul rate; the slowest layers.")] = False,
    results_path: ResultsOpt = DEFAULT_RESULTS,
    as_json: JsonOpt = False,
) -> None:
    """Is training input-bound? Input alone, training alone, both; epoch-edge stalls; ranked fixes. With --model: the model's own findings."""
    from fitspeed.measure.doctor import diagnose

    spec = workload.spec()
    results.check_writable(results_path)
    if model:  # one trial in mode "model" (fitspeed.trial.model_check)
        import dataclasses

        from fitspeed.cli.model_check import print_model_check
        from fitspeed.measure.runner import run_trial

        spec = dataclasses.replace(spec, mode=Mode.MODEL, profile_dir=profile_dir(workload.model))
        with interruptible(), err.status(f"checking {workload.model}…"):
            record = run_trial(spec)
        check_user_error(record)
        results.append(results_path, [record.to_dict()])
        print(json.dumps(record.to_dict(), indent=2)) if as_json else print_model_check(out, record)
        raise typer.Exit(0 if record.status == Status.OK else 1)

    def landed(name: str, record: TrialRecord) -> None:
        check_user_error(record)
        results.append(results_path, [record.to_dict()])
        metrics = record.metrics or Metrics()
        detail = (f"{metrics.ms_per_step:.1f} ms per step" if metrics.ms_per_step is not None
                  else f"{metrics.other.get('lost_s', 0):.2f} s lost at epoch edges" if "lost_s" in metrics.other
                  else record.reason)
        err.print(f"{name:>9}: {record.status}, {detail}", highlight=False)

    with interruptible(), err.status(f"diagnosing {workload.model}…"):
        diagnosis = diagnose(spec.model, spec.data, spec.config, steps=workload.steps, repeats=workload.repeats,
                             epochs=epochs, seed=workload.seed, timeout_s=workload.timeout_s, try_fixes=fixes,
                             on_trial=landed, script=workload.script)
    summary = diagnosis.summary()
    if as_json:
        print(json.dumps(summary, indent=2, default=str))
    else:
        print_diagnosis(out, summary)


def print_diagnosis(console: Console, summary: JSONObject) -> None:
    """Print a `Diagnosis.summary()` as tables."""
    ms = summary["ms_per_step"]
    table = Table(title=f"{summary['model']} · {summary['data'] or 'synthetic'} · {summary.get('kind')}")
    table.add_column("measurement")
    table.add_column("ms per step", justify="right")
    rows = (("input pipeline alone", ms["input"]), ("training alone (batches in memory)", ms["compute"]),
            ("both together", ms["together"]))
    for name, value in rows:
        table.add_row(name, f"{value:.1f}" if value else "failed")
    console.print(table)
    if "wait_share" in summary:
        console.print(f"waiting for input: {summary['wait_share']:.0%} of each step → {summary['verdict']}",
                      highlight=False)
        gap = ms["together"] - ms["compute"] if ms["together"] and ms["compute"] else 0.0
        if ms["input"] and gap > ms["input"] * 1.5 and gap > 0.05 * ms["together"]:
            console.print(f"  the steps together are {gap:.1f} ms slower than training alone, but the input alone "
                          f"takes {ms['input']:.1f} ms a batch, so the rest of that gap is not waiting for input "
                          "(the two trials' own noise, or work fit() does around the step)", highlight=False)
    lost = summary.get("epochs")
    if lost:
        gaps = ", ".join(f"{g:.2f}" for g in lost["boundary_s"])
        console.print(f"epoch edges: {gaps} s between epochs, {lost['end_s']:.2f} s from the last batch to fit() "
                      f"returning; {lost['lost_s']:.2f} s of {lost['fit_s']:.2f} s ({lost['lost_share']:.0%}) "
                      f"with no training step running", highlight=False)
    if summary.get("pipeline"):
        console.print("pipeline: " + " -> ".join(summary["pipeline"]), highlight=False)
    profile = summary.get("profile")
    if profile:
        prof = Table(title=f"loader __getitem__ under cProfile: {profile['ms_per_batch']:.1f} ms per batch")
        for column in ("function", "calls", "own s", "cumulative s"):
            prof.add_column(column, justify="left" if column == "function" else "right")
        for row in profile["top"][:8]:
            prof.add_row(row["function"], str(row["calls"]), f"{row['own_s']:.3f}", f"{row['cumulative_s']:.3f}")
        console.print(prof)
    recs = summary["recommendations"]
    if recs:
        rec = Table(title="recommendations, by measured gain")
        for column in ("#", "set", "gain", "measured", "why"):
            rec.add_column(column)
        for index, fix in enumerate(recs, 1):
            measured = fix["measured"] or ""
            confirmed = fix.get("confirmed")
            if confirmed and confirmed.get("low") is not None:
                measured += (f"; confirmed in {confirmed['pairs']} pair(s): {confirmed['ratio']:.2f}× "
                             f"(95% CI {confirmed['low']:.2f}–{confirmed['high']:.2f})")
            rec.add_row(str(index), _sets(fix["change"]), f"{fix['gain']:.2f}×", measured, fix["why"])
        console.print(rec)
    for fix in summary.get("unconfirmed", []):
        console.print(f"not confirmed: {_sets(fix['change'])} came in at {fix['gain']:.2f}× in its one trial "
                      f"({fix['measured']}), but only the top fix is confirmed in pairs; try it with "
                      f"`fitspeed compare` before using it", highlight=False)
    for fix in summary["no_gain"]:
        detail = fix["measured"] or f"{fix['status']}: {fix['reason']}"
        if fix.get("confirmed") and fix["confirmed"]["verdict"] != Verdict.FASTER:
            detail += f"; not confirmed in {fix['confirmed']['pairs']} interleaved pair(s) ({fix['confirmed']['verdict']})"
        console.print(f"no gain from {_sets(fix['change'])}: {detail}", highlight=False)
    for name, reason in summary["failed"].items():
        console.print(f"{name} measurement failed: {reason}", highlight=False)


def _sets(changes: dict[str, Any]) -> str:
    return " ".join(f"--set {k}={v}" for k, v in changes.items())
