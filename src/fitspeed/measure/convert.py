"""Run `fitspeed convert`'s child and bring back its record.

The parent never imports keras: it checks the paths and knobs, writes the order,
runs `python -P -m fitspeed.trial.convert ORDER.json` and decodes the record the
child prints after `record.MARKER`. A child that dies without one is a `failed`
record with its exit status and the tail of its stderr.

A `.keras` file is meant to load on any Keras backend. After a conversion, the
file is loaded on every other installed backend, each in its own child
(an order with `"check": "load"`), run on the same probe batch; the record's `backends`
says, for each of TensorFlow, JAX and PyTorch, whether it loaded there and
computed the converting backend's outputs, or why not (not installed, with the
extra that installs it).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from fitspeed.core.backends import NAMES, backend_of
from fitspeed.core.config import TrialConfig
from fitspeed.core.errors import UserError
from fitspeed.core.json_data import JSONObject
from fitspeed.core.knobs import check_backend_installed, parse_assignment
from fitspeed.core.record import Status
from fitspeed.core.record import SCHEMA_VERSION, decode

KNOBS = ("data_format", "precision")  # what a conversion rewrites
WHERE = ("backend", "onednn")  # where its check runs
STDERR_TAIL = 2000


def order(source: Path, output: Path, assignments: list[str], force: bool, seed: int = 0,
          unsafe: bool = False) -> JSONObject:
    """The child's order, checked: a UserError for a bad path or knob."""
    given: JSONObject = {}
    for text in assignments:
        name, value = parse_assignment(text)
        if name not in KNOBS + WHERE:
            raise UserError(f"Expected --set with {', '.join(KNOBS)} (or {', '.join(WHERE)}, where the check runs). "
                            f"Received: --set {text}, which a conversion does not rewrite. Drop it.")
        given[name] = value
    config = TrialConfig.from_dict(given)  # the backend's own refusals, as everywhere
    check_backend_installed(config.backend)
    if not given.keys() & set(KNOBS):
        raise UserError("Expected at least one of --set data_format=... or --set precision=... Received neither, "
                        "so there is nothing to convert. Add for example --set data_format=channels_first.")
    if source.suffix != ".keras" or not source.is_file():
        raise UserError(f"Expected MODEL to be a saved .keras file. Received: {str(source)!r}"
                        f"{'' if source.is_file() else ', which does not exist'}. Save one with model.save('model.keras').")
    if output.suffix != ".keras":
        raise UserError(f"Expected -o to end in .keras, the format Keras 3 saves. Received: {str(output)!r}. "
                        f"Use for example -o {output.with_suffix('.keras')}.")
    if output.resolve() == source.resolve():
        raise UserError(f"Expected -o to name another file than MODEL. Received: {str(output)!r} for both. "
                        "Write the converted model beside the original, such as -o fast.keras.")
    if output.exists() and not force:
        raise UserError(f"Expected -o to name a new file. Received: {str(output)!r}, which exists and would be "
                        "overwritten. Choose another path, or pass --force to overwrite it.")
    return {"source": str(source), "output": str(output), "knobs": given, "seed": seed, "unsafe": unsafe}


def run_conversion(request: JSONObject, *, python: str = sys.executable,
                   backends: tuple[str, ...] = NAMES) -> JSONObject:
    """Run the conversion child on `request` (from `order`) and return its record, whatever happened.

    A conversion that succeeds is then loaded on each of `backends` other than
    the converting one that is installed here (`check_backends`); with no
    `backends` (`--no-check-backends`) the record has no `backends` entry.
    """
    with tempfile.TemporaryDirectory(prefix="fitspeed-convert-") as tmp:
        probe = str(Path(tmp, "probe.npz"))
        record, code, stderr = _child({**request, "probe": probe}, python)
        if record is None:
            return {"schema": SCHEMA_VERSION, "kind": "conversion", "status": Status.FAILED, "source": request["source"],
                    "output": request["output"], "knobs": request["knobs"],
                    "reason": f"the conversion process exited with status {code} before it sent a record",
                    "stderr_tail": stderr[-STDERR_TAIL:]}
        if record.get("status") == Status.OK and backends:
            record["backends"] = check_backends(record, request, probe, python=python, backends=backends)
    return record


def check_backends(record: JSONObject, request: JSONObject, probe: str, *, python: str = sys.executable,
                   backends: tuple[str, ...] = NAMES) -> list[JSONObject]:
    """Whether the converted file loads and computes the same on each backend: one entry per backend.

    The converting backend's entry is its own reload check; another installed
    backend's is a `load check` child's record; a missing one says how to install it.
    """
    here = record["environment"]["backend"]
    saved: JSONObject = next((c for c in record.get("checks") or [] if c["what"] == "the saved file"), {})
    entries: list[JSONObject] = [{"backend": here, "status": Status.OK, "converted": True,
                                      "max_abs_diff": saved.get("max_abs_diff")}]
    for name in backends:
        if name == here:
            continue
        backend = backend_of(name)
        if not backend.is_installed():
            entries.append({"backend": name, "status": "not installed",
                            "reason": f"not installed here: pip install 'fitspeed[{backend.extra}]'"})
            continue
        checked, code, stderr = _child({"check": "load", "file": request["output"], "probe": probe, "backend": name,
                                        "seed": request.get("seed", 0), "unsafe": request.get("unsafe", False)},
                                       python)
        if checked is None:
            last = (stderr.strip().splitlines() or [""])[-1]
            checked = {"backend": name, "status": Status.FAILED,
                       "reason": f"its process exited with status {code} before it sent a record: {last}"}
        entries.append({k: v for k, v in checked.items() if k not in ("schema", "kind")})
    return entries


def _child(order: JSONObject, python: str) -> tuple[JSONObject | None, int, str]:
    """Run `python -P -m fitspeed.trial.convert` on `order`: its record (None if it sent none), status, stderr."""
    with tempfile.TemporaryDirectory(prefix="fitspeed-convert-order-") as tmp:
        path = Path(tmp, "order.json")
        path.write_text(json.dumps(order))
        env = dict(os.environ)
        env.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
        done = subprocess.run([python, "-P", "-m", "fitspeed.trial.convert", str(path)], capture_output=True,
                              text=True, env=env, stdin=subprocess.DEVNULL, check=False)
    return decode(done.stdout), done.returncode, done.stderr
