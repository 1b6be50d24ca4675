"""Run `fitspeed convert`'s child and bring back its record.

The parent never imports keras: it checks the paths and knobs, writes the order,
runs `python -P -m fitspeed.trial.convert ORDER.json` and decodes the record the
child prints after `record.MARKER`. A child that dies without one is a `failed`
record with its exit status and the tail of its stderr.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from fitspeed.core.config import TrialConfig
from fitspeed.core.errors import UserError
from fitspeed.core.knobs import check_backend_installed, parse_assignment
from fitspeed.core.record import SCHEMA_VERSION, decode

KNOBS = ("data_format", "precision")  # what a conversion rewrites
WHERE = ("backend", "onednn")  # where its check runs
STDERR_TAIL = 2000


def order(source: Path, output: Path, assignments: list[str], force: bool, seed: int = 0,
          unsafe: bool = False) -> dict[str, Any]:
    """The child's order, checked: a UserError for a bad path or knob."""
    given: dict[str, Any] = {}
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


def run_conversion(request: dict[str, Any], *, python: str = sys.executable) -> dict[str, Any]:
    """Run the conversion child on `request` (from `order`) and return its record, whatever happened."""
    with tempfile.TemporaryDirectory(prefix="fitspeed-convert-") as tmp:
        path = Path(tmp, "order.json")
        path.write_text(json.dumps(request))
        env = dict(os.environ)
        env.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
        done = subprocess.run([python, "-P", "-m", "fitspeed.trial.convert", str(path)], capture_output=True,
                              text=True, env=env, stdin=subprocess.DEVNULL, check=False)
    record = decode(done.stdout)
    if record is None:
        record = {"schema": SCHEMA_VERSION, "kind": "conversion", "status": "failed", "source": request["source"],
                  "output": request["output"], "knobs": request["knobs"],
                  "reason": f"the conversion process exited with status {done.returncode} before it sent a record",
                  "stderr_tail": done.stderr[-STDERR_TAIL:]}
    return record
