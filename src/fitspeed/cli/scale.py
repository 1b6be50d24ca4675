"""`fitspeed scale`: run the scaling experiment, show its table, write its JSON and plot.

The experiment itself is `fitspeed.search.scale`; this module shows its
progress, rewrites `OUT/scale.json` after every trial (so an interrupted run
loses nothing it measured), draws `OUT/scaling.png` and prints the table.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer
from rich import box
from rich.console import Console
from rich.table import Table
from rich.text import Text

from fitspeed.cli.options import JsonOpt
from fitspeed.cli.workload import workload_command
from fitspeed.console import terminal
from fitspeed.console.option_values import parse_int_list
from fitspeed.console.tables import loss_column, print_table
from fitspeed.console.workload import Workload
from fitspeed.core.errors import UserError
from fitspeed.core.json_data import JSONObject
from fitspeed.core.record import Metrics, Status, TrialRecord, TrialSpec, brief_reason, to_json
from fitspeed.measure.comparison import check
from fitspeed.report.numbers import number

RESULT_FILE, PLOT_FILE = "scale.json", "scaling.png"


@workload_command(after="fit", through="guard_margin")
def scale(
    workload: Workload,
    devices: Annotated[str | None, typer.Option("--devices", help="Device counts to measure against 1 device, such as 1,2,4 (1,2 unless --processes).")] = None,
    processes: Annotated[str | None, typer.Option("--processes", help="Process counts to measure against 1 process instead, such as 1,2 (JAX; each process over --set devices=N).")] = None,
    pairs: Annotated[int, typer.Option("--pairs", min=2, max=100, help="Interleaved pairs (1 device, N devices) per count.")] = 5,
    statistic: Annotated[str, typer.Option("--statistic", help="A trial's samples/s: mean (the geometric mean of its windows), median (of its windows) or best (its fastest window).")] = "mean",
    guard_margin: Annotated[float, typer.Option("--guard-margin", min=0.0, max=1.0, help="The numerics guard, as tune's: N against 1 over paired seeds, rejected only where its held-out loss is shown worse than 1's by more than this share of 1's loss.")] = 0.01,
    out_dir: Annotated[Path, typer.Option("--out", help="Folder for scale.json (every trial) and scaling.png.")] = Path("fitspeed-scale"),
    as_json: JsonOpt = False,
) -> None:
    """Data-parallel scaling over 1..N devices (or processes): speed-up, efficiency and loss, against 1 in pairs."""
    if devices is not None and processes is not None:
        raise UserError(f"Expected one of --devices and --processes. Received: --devices {devices} --processes "
                        f"{processes}. Scale one of them; give each process its devices with --set devices=N.")
    axis, counts = ("processes", parse_int_list(processes, "--processes")) if processes is not None else (
        "devices", parse_int_list(devices or "1,2", "--devices"))
    run(workload.spec(), counts, pairs=pairs, statistic=statistic, guard_margin=guard_margin,
        out_dir=out_dir, as_json=as_json, out=terminal.out, err=terminal.err, axis=axis)


def run(spec: TrialSpec, counts: tuple[int, ...], *, pairs: int, statistic: str, guard_margin: float,
        out_dir: Path, as_json: bool, out: Console, err: Console, axis: str = "devices") -> None:
    """Measure, write and show; exit 1 when a count could not be compared."""
    from fitspeed.search.scale import Scaling, check_counts  # not for `fitspeed --help`

    check(statistic, None)
    check_counts(counts, getattr(spec.config, axis), axis)
    for count in counts:
        spec.config.replace(**{axis: count})  # a backend that cannot do it says why (PyTorch), before any trial
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise UserError(f"Expected --out to name a folder fitspeed can write. Received: {str(out_dir)!r} "
                        f"({error.strerror}). Choose another folder with --out.") from None
    scaling = Scaling(spec, counts, axis=axis, pairs=pairs, statistic=statistic, guard_margin=guard_margin)
    result_path = out_dir / RESULT_FILE

    from rich.progress import Progress

    try:
        with Progress(console=err, transient=True) as progress:
            task = progress.add_task("scaling", total=None)

            def landed(role: str, record: TrialRecord) -> None:
                if record.user_error:
                    raise UserError(record.reason or "")
                _write(result_path, scaling.result())
                metrics = record.metrics or Metrics()
                speed = metrics.samples_per_s
                detail = (f"{speed.median:,.0f} samples/s" if speed and record.status == Status.OK
                          else f"final loss {number(metrics.final_loss, 3)}" if record.status == Status.OK
                          else brief_reason(record.reason))
                err.print(f"{role:>28}: {record.status}, {detail}", highlight=False)
                progress.update(task, description=role)

            scaling.run(on_trial=landed)
    except KeyboardInterrupt:
        _write(result_path, scaling.result())
        err.print(f"Interrupted. Every finished trial is in {result_path}.", highlight=False)
        raise typer.Exit(130) from None
    result = scaling.result()
    _write(result_path, result)
    from fitspeed.report.scale import draw

    title = f"{spec.model} · {spec.data or 'synthetic'} · {spec.config.backend}, {spec.config.batch_size} per device" + (
        f", {spec.config.devices} device(s) per process" if axis == "processes" else "")
    plot = draw(result["rows"], out_dir / PLOT_FILE, title)
    if as_json:
        print(json.dumps(result, indent=2, default=str))
    else:
        print_scale(out, result)
    err.print(f"results in {result_path}" + (f", plot in {plot}" if plot else "; no plot: no count above 1 was measured"),
              highlight=False)
    if result["status"] != Status.OK:
        raise typer.Exit(1)


def _write(path: Path, result: JSONObject) -> None:
    from fitspeed.core.files import write_atomically

    write_atomically(path, json.dumps(json.loads(to_json(result)), indent=2) + "\n")


def _interval(low: float | None, high: float | None, scale: float = 1.0, digits: int = 2) -> str:
    return "–" if low is None or high is None else f"{scale * low:.{digits}f}–{scale * high:.{digits}f}"


def scale_table(result: JSONObject) -> Table:
    """One row per device count: samples/s, speed-up with its interval, efficiency, loss and guard."""
    table = Table(title=f"{result['model']} · {result['data'] or 'synthetic'} · {result['backend']}, data parallel",
                  header_style="bold", box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False)
    processes = result.get("axis") == "processes"
    columns = ("processes", "devices") if processes else ("devices",)
    for column in (*columns, "batch", "samples/s", "speed-up (95% CI)", "efficiency", "loss", "guard"):
        table.add_column(column, justify="left" if column == "guard" else "right",
                         no_wrap=True, min_width=len("changed") if column == "guard" else len(column))
    losses = loss_column([row["final_loss"] for row in result["rows"]])
    for row, loss in zip(result["rows"], losses, strict=True):
        one = row.get("processes", row["devices"]) == 1
        verdict = row["guard"]
        interval = "" if one else f" ({_interval(row['speedup_low'], row['speedup_high'])})"
        asked = row["devices"] * row.get("processes", 1)
        table.add_row(
            *([str(row["processes"])] if processes else []),
            str(row["used"]) + (f" ({asked} asked)" if row["used"] != asked else ""),
            str(row["global_batch"]),
            number(row["samples_per_s"], 0),
            "–" if row["speedup"] is None else f"{row['speedup']:.2f}×{interval}",
            "–" if row["efficiency"] is None else f"{100 * row['efficiency']:.0f}%",
            loss,
            "–" if one else Text("ok", style="green") if verdict and verdict["ok"]
            else Text("changed", style="red") if verdict else row["guard_status"] or "not run",
        )
    return table


def pairs_phrase(rows: list[JSONObject]) -> str:
    """What each count's speed-up is the median of: the pairs that ran whole, out of those that ran.

    >>> whole = {"devices": 2, "pairs_ok": 5, "pairs_run": 5, "pairs_lost": {}}
    >>> pairs_phrase([{"devices": 1}, whole])
    'the median of 5 interleaved pairs'
    >>> pairs_phrase([{"devices": 1}, {**whole, "pairs_ok": 3, "pairs_lost": {"crashed": 2}}])
    'the median of 3 of 5 pairs; 2 crashed'
    >>> pairs_phrase([{"devices": 1}, whole, {"devices": 4, "pairs_ok": 0, "pairs_run": 5,
    ...                                        "pairs_lost": {"crashed": 4, "timeout": 1}}])
    'at 2 devices the median of 5 interleaved pairs; at 4 devices none of 5 pairs ran whole: 4 crashed, 1 timeout'
    """
    def phrase(row: JSONObject) -> str:
        lost = ", ".join(f"{n} {status}" for status, n in row["pairs_lost"].items())
        if not row["pairs_ok"]:
            return f"none of {row['pairs_run']} pairs ran whole" + (f": {lost}" if lost else "")
        if row["pairs_ok"] == row["pairs_run"]:
            return f"the median of {row['pairs_ok']} interleaved pairs"
        return f"the median of {row['pairs_ok']} of {row['pairs_run']} pairs" + (f"; {lost}" if lost else "")

    counts = [{"pairs_run": row["pairs_ok"], "pairs_lost": {}, **row} for row in rows[1:]]  # older files: no pairs_run
    phrases = [phrase(row) for row in counts]
    if len(set(phrases)) <= 1:
        return phrases[0] if phrases else "no pairs ran"
    return "; ".join(f"at {row.get('processes', row['devices'])} {'processes' if 'processes' in row else 'devices'} "
                     f"{text}" for row, text in zip(counts, phrases, strict=True))


def print_scale(console: Console, result: JSONObject) -> None:
    print_table(console, scale_table(result))
    axis = result.get("axis", "devices")
    if axis == "processes":
        console.print(f"speed-up: samples/s on N processes over 1 process, {pairs_phrase(result['rows'])}. "
                      "efficiency = speed-up ÷ N (100% is linear).", highlight=False)
        console.print(f"batch: the global batch, {result['per_device_batch']} per device × every process's devices "
                      "(re-tune the learning rate). loss: the final loss after the same steps from the same seed, "
                      "against 1 process's.", highlight=False)
    else:
        console.print(f"speed-up: samples/s on N devices over 1 device, {pairs_phrase(result['rows'])}. "
                      "efficiency = speed-up ÷ N (100% is linear).", highlight=False)
        console.print(f"batch: the global batch, {result['per_device_batch']} per device × N (re-tune the learning "
                      "rate). loss: the final loss after the same steps from the same seed, against 1 device's.",
                      highlight=False)
    for row in result["rows"][1:]:
        if row["guard"]:
            console.print(f"guard, {axis}={row.get(axis, row['devices'])}: {row['guard']['reason']}", highlight=False)
    for note in result["notes"]:
        console.print(note, highlight=False)
    for row in result["rows"][1:]:
        if row["verdict"] and row["speedup"] is None:
            console.print(f"{axis}={row.get(axis, row['devices'])}: {row['verdict']}", highlight=False)
    from fitspeed.console.tables import print_failures
    from fitspeed.report.plot_data import failures  # it imports optuna, which `fitspeed --help` must not wait for

    print_failures(console, failures((_role(record), record) for record in map(TrialRecord.from_dict, result["trials"])))


def _role(record: TrialRecord) -> str:
    """What a scaling trial was for, as its progress line said: 'pair 2/5, 2 device(s)' or 'guard, 1 device(s)'."""
    config = record.spec.config
    count = f"{config.processes} process(es)" if config.processes > 1 else f"{config.devices} device(s)"
    if "pair" in record.extra:
        return f"pair {record.extra['pair'] + 1}, {count}"
    return f"guard, {count}"
