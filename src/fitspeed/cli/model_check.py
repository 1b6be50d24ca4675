"""`fitspeed doctor --model`: the model check of a trial record, drawn as terminal text and tables."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table
from rich.text import Text

from fitspeed.core.json_data import JSONObject
from fitspeed.core.record import Status, TrialRecord
from fitspeed.report.numbers import number, si


def print_model_check(console: Console, record: TrialRecord) -> None:
    """Print a record's `model_check`: the roofline, the findings, the slowest layers."""
    check = record.extra.get("model_check")
    if record.status != Status.OK or not check:
        console.print(Text.assemble(("model check not run", "bold"),
                                    f": {record.status}: {record.reason or 'no reason given'}"))
        return
    if check.get("error"):
        console.print(Text.assemble(("model check failed", "bold"), f": {check['error']}"))
        return
    console.print(Text.assemble((f"{check['model']}", "bold"),
                                f" · {check['params']:,} parameters · batch {check['batch_size']} · "
                                f"{check['precision']} · {check['backend']}"), highlight=False)
    _print_roofline(console, check)
    xla = check.get("xla")
    if xla:
        console.print(f"XLA: {'compiles' if xla['compiles'] else 'does not compile'} ({xla['how']})", highlight=False)
    _print_findings(console, check["findings"])
    _print_layers(console, check["slowest_layers"])
    for path in (record.extra.get("profile") or {}).get("trace_files") or []:
        console.print(f"trace: {path}", highlight=False, soft_wrap=True)


def _print_roofline(console: Console, check: JSONObject) -> None:
    flops, matmul, roof = check["flops"], check["matmul"], check.get("roofline")
    if flops.get("error"):
        console.print(f"FLOPs per sample: not counted ({flops['error']})", highlight=False)
    else:
        console.print(f"FLOPs per sample: {si(flops['per_sample'], 'FLOP')} forward + backward "
                      f"(forward {si(flops['forward_per_sample'], 'FLOP')})", highlight=False)
    console.print(f"measured dense matmul rate ({matmul['dtype']}, {matmul['n']}×{matmul['n']}): "
                  f"{si(matmul['flop_per_s'], 'FLOP/s')}", highlight=False)
    if roof:
        console.print(Text.assemble(
            "achieved: ", (si(roof["achieved_flop_per_s"], "FLOP/s"), "bold"),
            f" at {number(roof['samples_per_s'])} samples/s = ",
            (f"{100 * roof['share_of_matmul']:.2g}% of the measured matmul rate", "bold")), highlight=False)


def _print_findings(console: Console, findings: list[JSONObject]) -> None:
    main = [f for f in findings if f["severity"] != "tpu"]
    tpu = [f for f in findings if f["severity"] == "tpu"]
    console.print(Text(f"findings: {len(main) or 'none'}" + (" (and TPU-only sizes below)" if tpu else ""),
                       style="bold"), highlight=False)
    for index, item in enumerate(main, 1):
        console.print(Text.assemble(f"{index:>2}. ", (item["layer"] or "the model", "bold"), f": {item['what']}"),
                      highlight=False)
        console.print(f"    cost: {item['cost']}", highlight=False)
        console.print(f"    fix: {item['fix']}", highlight=False)
    if tpu:
        sizes = "; ".join(f"{item['layer'] or 'the'} {item['what'].split(' is ')[0]}" for item in tpu)
        console.print(f"on a TPU only (multiples of 8, not of 128; padded to 128 there): {sizes}", highlight=False)


def _print_layers(console: Console, slowest: JSONObject) -> None:
    if slowest.get("error"):
        console.print(f"slowest layers: not found ({slowest['error']})", highlight=False)
        return
    table = Table(title=f"slowest layers (profiler, one traced window of {slowest['steps']} steps)",
                  header_style="bold")
    for column in ("layer", "class", "ms per step", "time", "FLOPs", "its top op"):
        table.add_column(column, justify="right" if column in ("ms per step", "time", "FLOPs") else "left",
                         overflow="fold")
    for row in slowest["layers"]:
        flops = "–" if row.get("flops_share") is None else f"{row['flops_share']:.0%}"
        table.add_row(row["layer"], row.get("class") or "–", number(row["ms_per_step"], 2), f"{row['share']:.0%}",
                      flops, short_op(row["top_op"]))
    console.print(table)
    console.print(f"({slowest['how']})", highlight=False)


def short_op(name: str) -> str:
    """An op's own name without its scopes; `grad` for an op of the backward pass.

    >>> short_op("gradient_tape/convnet_1/conv2d_1_2/convolution/Conv2DBackpropFilter"), short_op("adam/truediv_9")
    ('grad Conv2DBackpropFilter', 'truediv_9')
    """
    own = name.rsplit("/", 1)[-1]
    return f"grad {own}" if name.startswith("gradient_tape/") else own
