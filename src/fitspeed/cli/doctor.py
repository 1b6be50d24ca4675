"""`fitspeed doctor`'s diagnosis, drawn as terminal tables."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.table import Table


def print_diagnosis(console: Console, summary: dict[str, Any]) -> None:
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
        if fix.get("confirmed") and fix["confirmed"]["verdict"] != "faster":
            detail += f"; not confirmed in {fix['confirmed']['pairs']} interleaved pair(s) ({fix['confirmed']['verdict']})"
        console.print(f"no gain from {_sets(fix['change'])}: {detail}", highlight=False)
    for name, reason in summary["failed"].items():
        console.print(f"{name} measurement failed: {reason}", highlight=False)


def _sets(changes: dict[str, Any]) -> str:
    return " ".join(f"--set {k}={v}" for k, v in changes.items())
