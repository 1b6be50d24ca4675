"""`fitspeed convert`: a saved model rewritten for data_format and precision, checked, saved.

The conversion runs in a child process (`fitspeed.measure.convert`, which
starts `fitspeed.trial.convert`); this module prints its record: what changed,
layer by layer, the checks with their tolerances, and the parameter counts; or
the reason it was refused.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.console import Console
from rich.table import Table

from fitspeed.cli.options import JsonOpt
from fitspeed.console.terminal import err, out
from fitspeed.core.errors import UserError
from fitspeed.core.json_data import JSONObject
from fitspeed.core.record import Status


def convert(
    model: Annotated[Path, typer.Argument(help="A saved model.keras.", show_default=False)],
    output: Annotated[Path, typer.Option("-o", "--output", help="Where to save the converted model (.keras).", show_default=False)],
    set_: Annotated[Optional[list[str]], typer.Option("--set", help="data_format=... or precision=... (backend=, onednn= say where the check runs); repeat for more.")] = None,
    force: Annotated[bool, typer.Option("--force", help="Overwrite -o if it exists.")] = False,
    unsafe: Annotated[bool, typer.Option("--unsafe", help="Load Python code the file holds (a Lambda layer's function): only for a file you trust, such as one you saved yourself.")] = False,
    check_backends: Annotated[bool, typer.Option("--check-backends/--no-check-backends", help="Load the converted file on each other installed Keras backend and check that it computes the same (a few seconds each).")] = True,
    as_json: JsonOpt = False,
) -> None:
    """Rewrite a saved model for data_format and precision: same weights, outputs checked equal, then saved."""
    from fitspeed.core.backends import NAMES
    from fitspeed.measure.convert import order, run_conversion

    request = order(model, output, set_ or [], force, unsafe=unsafe)
    label = " ".join(f"{k}={v}" for k, v in request["knobs"].items())
    with err.status(f"converting {model} ({label})…"):
        record = run_conversion(request, backends=NAMES if check_backends else ())
    if record.get("user_error"):  # the file itself, not the conversion: one sentence and exit 2
        raise UserError(record["reason"])
    if as_json:
        print(json.dumps(record, indent=2))
    else:
        print_conversion(out, record)
    if record["status"] != Status.OK:
        if not as_json:
            err.print(f"{'Refused' if record['status'] == 'refused' else 'Failed'}: {record['reason']}",
                      highlight=False)
        raise typer.Exit(1)


def rewrite_brief(rewrite: JSONObject | None) -> str | None:
    """One line on what a trial's knobs rewrote in the model (`record["rewrite"]`), or None.

    >>> rewrite_brief({"changes": [{"layer": "c", "class": "Conv2D", "change": "..."}], "checks": [
    ...     {"what": "data_format=channels_first", "max_abs_diff": 3e-08, "tolerance": 1e-4}],
    ...     "params": {"before": 962, "after": 962}})
    'model rewritten: 1 change(s) in 1 layer(s), 962 parameters as before; data_format=channels_first checked (outputs within 3e-08, allowed 0.0001)'
    """
    if not rewrite or not rewrite.get("changes"):
        return None
    layers = len({c["layer"] for c in rewrite["changes"]})
    checks = "; ".join(f"{c['what']} checked (outputs within {c['max_abs_diff']:.2g}, allowed {c['tolerance']:.2g})"
                       for c in rewrite.get("checks") or [])
    return (f"model rewritten: {len(rewrite['changes'])} change(s) in {layers} layer(s), "
            f"{rewrite['params']['after']:,} parameters as before" + (f"; {checks}" if checks else ""))


def print_conversion(console: Console, record: JSONObject) -> None:
    """The changes table, the checks and the saved file; nothing but the header for a refusal."""
    knobs = " ".join(f"{k}={v}" for k, v in (record.get("knobs") or {}).items())
    console.print(f"{record['source']} → {record['output']} ({knobs})", highlight=False)
    if record["status"] != Status.OK:
        return
    changes = record.get("changes") or []
    if changes:
        table = Table(title=f"{len(changes)} change(s), layer by layer", title_justify="left")
        for column in ("layer", "class", "change"):
            table.add_column(column, overflow="fold")
        for change in changes:
            table.add_row(change["layer"], change["class"], change["change"])
        console.print(table)
    else:
        console.print("no layer needed a change: the model already has these settings", highlight=False)
    for check in record.get("checks") or []:
        console.print(f"checked {check['what']}: outputs differ by at most {check['max_abs_diff']:.2g} "
                      f"(allowed {check['tolerance']:.2g} in {check['compute_dtype']}, probe batch "
                      f"{'×'.join(str(d) for d in check['probe'])})", highlight=False)
    params = record.get("params") or {}
    where = record.get("environment") or {}
    onednn = f", oneDNN {'on' if where['onednn'] else 'off'}" if "onednn" in where else ""
    console.print(f"parameters {params.get('before', 0):,} → {params.get('after', 0):,}; output dtype "
                  f"{record.get('output_dtype')}; checked on {where.get('backend')}{onednn}", highlight=False)
    console.print(f"saved {record['output']}", highlight=False)
    for line in backend_lines(record.get("backends") or []):
        console.print(line, highlight=False)


def backend_lines(entries: list[JSONObject]) -> list[str]:
    r"""Which backends load the saved file and compute what the converting one does, and why others do not.

    >>> print(*backend_lines([{"backend": "tensorflow", "status": "ok", "converted": True},
    ...     {"backend": "jax", "status": "ok", "max_abs_diff": 2.4e-07, "tolerance": 1e-4},
    ...     {"backend": "torch", "status": "ok", "max_abs_diff": 1.8e-07, "tolerance": 1e-4}]), sep="\n")
    loads and computes the same on tensorflow (converted there), jax (outputs within 2.4e-07 of tensorflow's, allowed 0.0001) and torch (outputs within 1.8e-07 of tensorflow's, allowed 0.0001): the file is backend-neutral
    >>> print(*backend_lines([{"backend": "jax", "status": "ok", "converted": True},
    ...     {"backend": "tensorflow", "status": "failed", "reason": "it does not load: ValueError: x"},
    ...     {"backend": "torch", "status": "not installed", "reason": "pip install 'fitspeed[torch]'"}]), sep="\n")
    loads and computes the same on jax (converted there)
    NOT on tensorflow: it does not load: ValueError: x
    not checked on torch: pip install 'fitspeed[torch]'
    """
    if not entries:
        return []
    here = next((e["backend"] for e in entries if e.get("converted")), "")
    same = [f"{e['backend']} (converted there)" if e.get("converted") else
            f"{e['backend']} (outputs within {e['max_abs_diff']:.2g} of {here}'s, allowed {e['tolerance']:.2g})"
            for e in entries if e["status"] == Status.OK]
    lines = [f"loads and computes the same on {' and '.join([', '.join(same[:-1]), same[-1]] if len(same) > 1 else same)}"]
    lines += [f"{'not checked' if e['status'] == 'not installed' else 'NOT'} on {e['backend']}: {e['reason']}"
              for e in entries if e["status"] != Status.OK]
    if len(same) == len(entries) and len(entries) > 1:
        lines[0] += ": the file is backend-neutral"
    return lines
