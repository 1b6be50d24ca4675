"""Terminal tables, drawn with rich from plain records.

Each function takes the data and a Console, so tests render into a
`Console(file=io.StringIO(), width=..., color_system=None)` and read the text.
Text that came from a user or a workload (names, values, error messages) is
never read as rich markup: fitspeed's own styles are `Text` objects, and the
CLI's consoles have markup off.

A table never cuts a value: its text columns wrap at words, and a table
that cannot fit the console even so (`fits`: its narrowest layout, every
word whole, is wider than the console; `fitspeed knobs | cat` at 80
columns) prints one row per block instead, as `pip show` prints a package
(`print_table`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from rich import box
from rich.console import Console, Group, RenderableType
from rich.measure import Measurement
from rich.table import Table
from rich.text import Text

from fitspeed.core.backends import BACKENDS
from fitspeed.core.json_data import JSONObject
from fitspeed.core.keras_options import NOT_KNOBS
from fitspeed.core.knobs import KNOBS
from fitspeed.core.record import Metrics, Status, TrialRecord, brief_reason
from fitspeed.core.stats import Spread
from fitspeed.core.workloads import DATA, MODELS
from fitspeed.measure.comparison import Comparison, speed
from fitspeed.report.numbers import number

_STATUS_STYLE = {"ok": "green", "nan": "red", "oom": "red", "failed": "red",
                 "timeout": "yellow", "crashed": "red"}


def fits(console: Console, table: Table) -> bool:
    """Whether `table` fits the console with every word of every cell whole (rich crops what does not).

    rich measures a column's narrowest as its longest word, even where the
    column does not wrap (`no_wrap`): such a column needs its widest cell.
    """
    unbounded = console.options.update(max_width=10**6)  # measured at the console's width, its minimum is capped to it
    needed = Measurement.get(console, unbounded, table).minimum
    for column in table.columns:
        if column.no_wrap:
            cells = [column.header] if table.show_header else []
            measured = [Measurement.get(console, unbounded, cell) for cell in (*cells, *column.cells)]
            floor = column.min_width or 0
            needed += max(floor, *(m.maximum for m in measured)) - max(floor, *(m.minimum for m in measured))
    return needed <= console.width


def blocks(table: Table) -> Group:
    """`table` one row per block: the first column's name and cell as its heading ('knob: precision'), then each
    other column's name and cell, indented.

    The names line up, and the cells wrap at words in what the console has left beside them.
    """
    def plain(header: RenderableType) -> str:
        return " ".join(str(header).split())

    columns = table.columns
    first, *names = [plain(column.header) if table.show_header else "" for column in columns]
    parts: list[RenderableType] = []
    if table.title:
        parts.append(Text(plain(table.title), style="bold"))
    for row in zip(*(list(column.cells) for column in columns), strict=True):
        heading, *cells = row
        parts.append(Text())  # a blank line before each block
        label = f"{first}: " if first else ""
        parts.append(Text.assemble((label, "bold"), (heading, "bold") if isinstance(heading, str) else heading)
                     if isinstance(heading, (str, Text)) else heading)
        grid = Table.grid(padding=(0, 2))
        grid.add_column(no_wrap=True)
        grid.add_column(overflow="fold")
        for name, cell in zip(names, cells, strict=True):
            grid.add_row(f"  {name}", cell)
        parts.append(grid)
    if table.caption:
        parts.append(Text(plain(table.caption)))
    parts.append(Text())  # and after the last, before whatever follows
    return Group(*parts)


def print_table(console: Console, table: Table) -> None:
    """`table` as a table where it fits the console, else one row per block (`blocks`)."""
    console.print(table if fits(console, table) else blocks(table))


def _loss(value: float | None) -> str:
    return loss_column([value])[0]


def loss_column(values: Sequence[float | None]) -> list[str]:
    """Losses for one column, in one notation: 4 significant digits, in e-notation for all where one needs it.

    >>> loss_column([2.2519, 0.0001945, None])
    ['2.252', '0.0001945', '–']
    >>> loss_column([0.0001945, 9.468e-05])
    ['1.945e-04', '9.468e-05']
    """
    texts = [None if value is None else f"{value:.4g}" for value in values]
    if any(text is not None and "e" in text for text in texts):
        texts = [None if value is None else f"{value:.3e}" for value in values]
    return ["–" if text is None else text for text in texts]


def _config_label(record: TrialRecord) -> str:
    return record.spec.config.label()


def _speed(speed: Spread | None) -> tuple[str, str]:
    if not speed:
        return "–", "–"
    return (
        f"{speed.median:,.0f} ({speed.min:,.0f}–{speed.max:,.0f})",
        f"{100 * speed.cv:.1f}%",
    )


# A trial times the data's first batches again and again, so its loss says that the step learns, not what the
# training reaches (a transformer's trial ended at 0.23 where its real run ends at 0.69).
LOSS_NOTE = ("* the trial repeats the data's first batches for its timing: this loss is not what your training "
             "reaches")


def whole_words(values: Sequence[Any], cap: int = 40) -> int:
    """A column's min_width that keeps its longest word (`jit_compile=True`) whole, up to `cap`.

    >>> whole_words(["steps_per_execution=64 jit_compile=True", "defaults"])
    22
    """
    return min(cap, max((len(word) for value in values for word in str(value).split()), default=0))


def trials_table(records: Sequence[TrialRecord], title: str | None = None) -> Table:
    """One row per trial: speed with its spread, step time, compile time, loss at the last timed step."""
    # collapse_padding and no edge padding: at 80 columns the widest knob=value (data_format=channels_first)
    # still fits whole beside the figures
    table = Table(title=title, header_style="bold", caption=LOSS_NOTE if records else None, collapse_padding=True,
                  pad_edge=False)
    table.add_column("config", min_width=whole_words([_config_label(r) for r in records], cap=26))
    table.add_column("status")
    table.add_column("samples/s\n(min–max)", justify="right")
    table.add_column("ms/step", justify="right")
    table.add_column("compile s", justify="right")
    table.add_column("loss*", justify="right")
    watched = any(record.monitor for record in records)
    for column in _MONITOR_COLUMNS if watched else ():
        table.add_column(column, justify="right")
    losses = loss_column([(record.metrics or Metrics()).final_loss for record in records])
    for record, loss in zip(records, losses, strict=True):
        metrics = record.metrics or Metrics()
        speed, _ = _speed(metrics.samples_per_s) if record.status == Status.OK else ("–", "–")
        speed = speed.replace(" (", "\n(")  # the median, its range under it: narrow enough for 80 columns
        table.add_row(
            _config_label(record),
            _status(record.status),
            speed,
            number(metrics.ms_per_step, 2),
            number(metrics.other.get("compile_s"), 2),
            loss,
            *(_monitor_cells(record.monitor or {}) if watched else ()),
        )
    return table


# `--monitor` summaries (fitspeed.machine.usage.usage_figures): CPU % is the trial's process tree, 100 = one core
_MONITOR_COLUMNS = ("CPU %", "threads", "GPU % (peak)", "GPU MiB", "GPU W")


def _mean_peak(mean: float | None, peak: float | None) -> str:
    return "–" if mean is None else f"{mean:,.0f} ({number(peak, 0)})"


def _monitor_cells(summary: Mapping[str, Any]) -> tuple[str, ...]:
    return (
        number(summary.get("cpu_percent_mean"), 0),
        number(summary.get("threads_peak"), 0),
        _mean_peak(summary.get("device_util_mean"), summary.get("device_util_peak")),
        number(summary.get("device_memory_peak_mb"), 0),
        number(summary.get("power_mean_w"), 0),
    )


def monitor_brief(summary: Mapping[str, Any] | None) -> str:
    """A trial's monitor summary in one phrase, for progress lines ('' without one).

    >>> monitor_brief({"cpu_percent_mean": 183.4, "threads_peak": 37, "device_util_mean": None})
    '; CPU 183%, 37 threads'
    """
    if not summary or summary.get("cpu_percent_mean") is None:
        return ""
    text = f"; CPU {summary['cpu_percent_mean']:.0f}%, {number(summary.get('threads_peak'), 0)} threads"
    if summary.get("device_util_mean") is not None:
        text += f", GPU {summary['device_util_mean']:.0f}% ({number(summary.get('device_memory_peak_mb'), 0)} MiB)"
    return text


def _monitor_rows(summary: Mapping[str, Any]) -> list[tuple[str, str]]:
    """Rows for one summary: CPU and threads, then the GPUs if there were any."""
    rows = [
        ("CPU % mean (peak), 100 = one core", _mean_peak(summary.get("cpu_percent_mean"), summary.get("cpu_percent_peak"))),
        ("host CPU % mean, all cores", number(summary.get("host_cpu_percent_mean"), 0)),
        ("threads peak", number(summary.get("threads_peak"), 0)),
    ]
    if summary.get("gpus") or summary.get("device_util_mean") is not None:
        rows += [
            ("GPU utilization % mean (peak)", _mean_peak(summary.get("device_util_mean"), summary.get("device_util_peak"))),
            ("GPU memory peak MiB, whole device (NVML)", number(summary.get("device_memory_peak_mb"), 0)),
            ("GPU power mean W", number(summary.get("power_mean_w"), 0)),
        ]
    return rows


def _status(status: str) -> Text:
    return Text(status, style=_STATUS_STYLE.get(status, ""))


def measure_table(record: TrialRecord) -> Table:
    """One trial, one figure per row."""
    spec, typed = record.spec, record.metrics or Metrics()
    metrics = typed.other  # the figures without a field of their own
    ok = record.status == Status.OK
    speed, cv = _speed(typed.samples_per_s) if ok else ("–", "–")
    table = Table(title=f"{spec.model} · {spec.data or 'synthetic'}", show_header=False)
    table.add_column("", style="bold")
    table.add_column("", justify="right")
    rows: list[tuple[str, str | Text]] = [
        ("config", _config_label(record)),
        ("status", _status(record.status)),
        ("samples/s median (min–max)", speed),
        ("coefficient of variation", cv),
        ("ms/step", number(typed.ms_per_step, 2)),
        *_device_rows(record.environment, typed.batch_size),
        *_process_rows(record),
        ("timed steps × repeats",
         f"{metrics['steps_per_repeat']} × {len(metrics['window_s'])}" if ok else "–"),
        ("compile s (excluded)", number(metrics.get("compile_s"), 2)),
        ("peak host memory MiB", number(metrics.get("peak_host_mb"), 0)),
        ("peak device memory MiB, the framework's own", number(metrics.get("peak_device_mb"), 0)),
        ("loss at the last timed step*", _loss(typed.final_loss)),
    ]
    if ok:
        table.caption = LOSS_NOTE
    check = record.extra.get("determinism")
    if check:  # a deterministic=true trial's proof (fitspeed.trial.determinism)
        rows.append(("determinism", f"check failed: {check['error']}" if "error" in check else
                     f"{'bit-identical' if check['identical'] else 'differed'}: weights of "
                     f"{check['runs']} runs of {check['steps']} steps from one seed"))
    # imported here: it imports optuna, which `fitspeed --help` must not wait for
    from fitspeed.report import plot_data

    rows += plot_data.cpu_rows(record.environment)
    watched = record.monitor
    if watched:
        rows.append(("monitor samples", f"{watched['samples']} over the {watched.get('scope', 'trial')}"))
        rows += _monitor_rows(watched)
    for name, value in rows:
        table.add_row(name, value)
    return table


def _device_rows(environment: Mapping[str, Any] | None, batch: int | None) -> list[tuple[str, str]]:
    """The batch row, and with devices=N (or processes=N) their row: the batch is global, per-device × N (× processes).

    >>> placement = {"asked": 2, "used": 2, "kind": "GPU", "strategy": "tf.distribute.MirroredStrategy"}
    >>> _device_rows({"devices": placement}, 64)
    [('devices', '2 GPU, tf.distribute.MirroredStrategy'), ('batch size (global)', '64 = 32 per device × 2')]
    >>> _device_rows({"devices": {**placement, "asked": 1, "used": 1, "kind": "CPU", "processes": 2,
    ...                           "strategy": "keras.distribution.DataParallel"}}, 64)[0]
    ('processes', '2, each on 1 CPU, keras.distribution.DataParallel')
    """
    placement = (environment or {}).get("devices")
    processes = (placement or {}).get("processes", 1)
    if not placement or (placement["asked"] == 1 and processes == 1) or batch is None:
        return [("batch size", number(batch, 0))]
    used = placement["used"]
    devices = f"{used} {placement['kind']}" + (f", {placement['strategy']}" if placement["strategy"] else "")
    if used < placement["asked"]:
        devices += f" ({placement['asked']} asked)"
    if processes > 1:
        per_device = batch / used / processes
        return [("processes", f"{processes}, each on {devices}"),
                ("batch size (global)", f"{batch} = {per_device:g} per device × {used} × {processes} processes")]
    return [("devices", devices), ("batch size (global)", f"{batch} = {batch / used:g} per device × {used}")]


def _process_rows(record: TrialRecord) -> list[tuple[str, str]]:
    """Each process's own samples/s and status, where the trial ran as several (`fitspeed.measure.processes`).

    >>> from fitspeed.core.record import TrialSpec
    >>> _process_rows(TrialRecord(id="t", status=Status.OK, spec=TrialSpec(model="tiny"), extra={"processes": [
    ...     {"process": 0, "status": "ok", "samples_per_s": 2233.4}, {"process": 1, "status": "crashed",
    ...     "samples_per_s": None}]}))
    [('process 0', 'ok, 2,233 samples/s'), ('process 1', 'crashed')]
    """
    return [(f"process {p['process']}", p["status"] + (f", {p['samples_per_s']:,.0f} samples/s"
                                                      if p.get("samples_per_s") else ""))
            for p in record.extra.get("processes") or ()]


def print_trials(console: Console, records: Sequence[TrialRecord], title: str | None = None) -> None:
    if len(records) == 1:
        print_table(console, measure_table(records[0]))
    else:
        print_table(console, trials_table(records, title))
    for record in records:
        if record.status != Status.OK and record.reason:
            console.print(Text.assemble((record.status, "bold"), f": {brief_reason(record.reason)}"),
                          highlight=False)
            if brief_reason(record.reason) != record.reason:
                console.print("(the whole message is in the record: --json, or the results file)", highlight=False)


def print_failures(console: Console, failures: Sequence[Mapping[str, str]]) -> None:
    """Each trial that crashed, timed out or ran out of memory (`report.plot_data.failures`): its reason, then its
    stderr's last lines as the trial wrote them (the native abort message, the fault handler's stacks, the signal)."""
    for failure in failures:
        console.print(Text.assemble((f"{failure['trial']}: {failure['status']}", "bold"),
                                    f", {brief_reason(failure['reason'])}. The end of its stderr:"), highlight=False)
        for line in failure["tail"].splitlines():
            console.print(Text(f"  {line}" if line else ""), highlight=False, soft_wrap=True)


def print_comparison(console: Console, comparison: Comparison) -> None:
    table = Table(title=f"A: {comparison.spec_a.config.label()}   B: {comparison.spec_b.config.label()}",
                  header_style="bold")
    table.add_column("pair", justify="right")
    table.add_column("A samples/s", justify="right")
    table.add_column("B samples/s", justify="right")
    table.add_column("B / A", justify="right")
    for index, (a, b) in enumerate(comparison.pairs, start=1):
        ta, tb = speed(a, comparison.statistic), speed(b, comparison.statistic)
        table.add_row(
            str(index),
            number(ta, 0) if ta else a.status,
            number(tb, 0) if tb else b.status,
            f"{tb / ta:.3f}" if ta and tb else "–",
        )
    print_table(console, table)
    estimate = comparison.estimate()
    if estimate and len(estimate.ratios) >= 2:
        of = " (each trial's fastest window)" if comparison.statistic == "best" else ""
        console.print(
            f"median B/A {estimate.median:.3f}, {100 * estimate.confidence:g}% CI {estimate.low:.3f}–{estimate.high:.3f} "
            f"(width {estimate.high - estimate.low:.3f}) over {len(estimate.ratios)} pairs{of}",
            highlight=False,
        )
        if comparison.until_width is not None and estimate.high - estimate.low > comparison.until_width:
            console.print(f"the interval is still wider than --until-width {comparison.until_width:g}: "
                          "the pair cap was reached (raise --max-pairs)", highlight=False)
    if comparison.designs:
        console.print(f"measured as {comparison.design()}", highlight=False)
    console.print(Text(comparison.verdict(), style="bold"), highlight=False)
    for pair in comparison.pairs:
        for record in pair:
            if record.status != Status.OK:
                console.print(f"{record.extra['arm']} (pair {record.extra['pair'] + 1}) {record.status}: "
                              f"{record.reason}", highlight=False)


def print_knobs(console: Console, full: bool = False) -> None:
    """One line a knob (its values, default and backends); `full`: each knob's description, each backend's own
    knobs, and the Keras options that are not knobs."""
    if not full:
        short = Table(title="knobs (--all: what each does, each backend's own, what is not a knob)",
                      header_style="bold", box=box.SIMPLE_HEAD, pad_edge=False)
        short.add_column("knob", no_wrap=True)
        short.add_column("values", max_width=30)
        short.add_column("default", no_wrap=True)
        short.add_column("backends", no_wrap=True)
        for knob in KNOBS:
            backends = knob.backends()
            short.add_row(knob.name, knob.values, str(knob.default), "all" if len(backends) == len(BACKENDS)
                          else " ".join("tf" if b == "tensorflow" else b for b in backends))
        console.print(short)
        return
    table = Table(title="knobs", header_style="bold")
    table.add_column("knob", no_wrap=True)
    table.add_column("values")
    table.add_column("default", no_wrap=True)
    table.add_column("scope", no_wrap=True)
    table.add_column("backends")
    table.add_column("description", min_width=34)
    for knob in KNOBS:
        table.add_row(knob.name, knob.values, str(knob.default), knob.scope,
                      ", ".join(knob.backends()), knob.description)
    print_table(console, table)
    own = Table(title="each backend's own knobs: measured on top of it when tune tries it as another backend",
                header_style="bold")
    for column in ("knob", *(backend.title for backend in BACKENDS.values())):
        own.add_column(column, no_wrap=column == "knob")
    for name in dict.fromkeys(k for backend in BACKENDS.values() for k in backend.own_knobs):
        own.add_row(name, *("measured" if name in backend.own_knobs and backend.why_not_on_top(name) is None
                            else f"skipped: {backend.why_not_on_top(name) or 'not its own'}"
                            for backend in BACKENDS.values()))
    print_table(console, own)
    options = Table(title="Keras options that are not knobs here", header_style="bold")
    options.add_column("option", no_wrap=True)
    options.add_column("why not")
    for option, why in NOT_KNOBS.items():
        options.add_row(option, why)
    print_table(console, options)


def print_workloads(console: Console) -> None:
    models = Table(title="models", header_style="bold")
    for column in ("model", "parameters", "input (channels_last)", "description"):
        models.add_column(column, justify="right" if column == "parameters" else "left")
    for info in MODELS.values():
        models.add_row(info.name, f"{info.params:,}", "×".join(map(str, info.input_shape)),
                       info.description)
    models.add_row("module:function", "–", "–", "your builder, returning a keras.Model")
    data = Table(title="data (--data)", header_style="bold")
    data.add_column("data")
    data.add_column("description")
    for entry in DATA.values():
        data.add_row(entry.name, entry.description)
    print_table(console, models)
    print_table(console, data)


def print_monitor(console: Console, summary: JSONObject, samples: int) -> None:
    """What `fitspeed monitor` saw, in a few figures (the CSV and the plot have the rest)."""
    table = Table(title=f"monitor · {samples} samples every {number(summary.get('interval_s'), 2)} s", show_header=False)
    table.add_column("", style="bold")
    table.add_column("", justify="right")
    rows = _monitor_rows(summary)
    if summary.get("rss_peak_mb") is not None:
        rows.insert(3, ("resident memory peak MiB", number(summary.get("rss_peak_mb"), 0)))
    for name, value in rows:
        table.add_row(name, value)
    print_table(console, table)


def print_profile(console: Console, profile: JSONObject) -> None:
    """The traced window: its ten most expensive ops, and how to open the trace."""
    if profile.get("error"):
        console.print(Text.assemble(("profile failed", "bold"), f": {profile['error']}"), highlight=False)
    ops = profile.get("top_ops") or []
    if ops:
        where = "device" if profile.get("where") == "device" else "host"
        speed = profile.get("samples_per_s")
        table = Table(title=f"top {len(ops)} ops by self time on the {where}, one traced window of "
                            f"{profile.get('steps')} steps" + (f" ({speed:,.0f} samples/s under the profiler)" if speed else ""),
                      header_style="bold")
        for column in ("ms", "share", "calls"):
            table.add_column(column, justify="right", no_wrap=True)
        table.add_column("op [type]", overflow="fold")
        for op in ops:
            kind = (" [" + op["op_type"] + "]", "dim") if op.get("op_type") else ""
            table.add_row(number(op["self_ms"], 2), f"{100 * op['share']:.1f}%", str(op["count"]),
                          Text.assemble(op["op"], kind))
        print_table(console, table)
    for path in profile.get("trace_files") or []:
        console.print(f"trace: {path}", highlight=False, soft_wrap=True)
    command, *needs = profile.get("open") or [None]
    if command:
        console.print(Text.assemble("open it: ", (command, "bold")), highlight=False, soft_wrap=True)
        for line in needs:
            console.print(f"  {line}", highlight=False, soft_wrap=True)
