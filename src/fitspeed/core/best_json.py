"""`best.json`: the verified configuration and the code that applies it, written and read here only.

`write` writes it (`fitspeed tune`); `read` reads it back, for `fitspeed run`
and `fitspeed.apply(path)` alike, with one rule for what counts as a best.json.

The snippet uses Keras's own API, so it works in a plain Keras script with no
fitspeed installed, but for the model rewrite: data_format (and an output layer
that followed a mixed policy) is a rewrite of the built model,
`fitspeed.rewrite_model` (or `fitspeed convert` for a saved one). It gives the
environment variables to export before Python starts (`exports`, also in
best.json as `environment_variables`), the process-wide settings (before the
model is built), then the compile arguments, then the model rewrite.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from fitspeed.core.config import TrialConfig
from fitspeed.core.errors import UserError
from fitspeed.core.files import write_atomically
from fitspeed.core.json_data import JSONObject
from fitspeed.core.knobs import KNOBS, knob_environment
from fitspeed.core.knobs.base import SECTIONS, Recipe, Section
from fitspeed.core.record import SCHEMA_VERSION, to_json
from fitspeed.core.study_summary import StudySummary


def exports(config: TrialConfig) -> dict[str, str]:
    """Environment variables the configuration needs set before TensorFlow is imported.

    >>> exports(TrialConfig(onednn=True))
    {'TF_ENABLE_ONEDNN_OPTS': '1'}
    """
    # the knobs that are `exported`; KERAS_BACKEND and determinism's flags are set by their snippet lines instead
    return knob_environment(config, {}, exported=True)


def _at_start(config: TrialConfig) -> set[str]:
    """The exported variables a loader reads when the process starts (`Knob.at_start`): too late from Python."""
    return set(knob_environment(config, {}, at_start=True, exported=True))


def _output_fixes(rewrite: JSONObject | None) -> list[str]:
    """The output layers a trial's rewrite moved to float32 (`record["rewrite"]["changes"]`).

    >>> _output_fixes({"changes": [{"layer": "dense_1", "class": "Dense",
    ...                             "change": "dtype policy mixed_bfloat16 → float32"}]})
    ["'dense_1' (Dense)"]
    """
    return [f"{c['layer']!r} ({c['class']})" for c in (rewrite or {}).get("changes", [])
            if c["change"].startswith("dtype policy") and c["change"].endswith("→ float32")]


def _sections(config: TrialConfig, rewrite: JSONObject | None) -> dict[Section, list[str]]:
    """Every knob's snippet lines (`Knob.snippet`) gathered by section, each section's in the registry's order."""
    recipe = Recipe(config, tuple(_output_fixes(rewrite)))
    parts: dict[Section, list[str]] = {section: [] for section in SECTIONS}
    for knob in KNOBS:
        for section, lines in knob.snippet(getattr(config, knob.name), recipe).items():
            parts[section] += lines
    return parts


def snippet(config: TrialConfig, rewrite: JSONObject | None = None) -> str:
    """Python that applies `config` in a user's own Keras code: the knobs' own lines (`Knob.snippet`), section by
    section (`fitspeed.core.knobs.base.SECTIONS`), each under its heading.

    `rewrite` is the best trial's record of what it changed in the model
    (`fitspeed.trial.transform`): an output layer it moved to float32 is named.

    >>> print(snippet(TrialConfig(steps_per_execution=32)))
    import keras
    <BLANKLINE>
    # Build and compile your model as before, adding these arguments:
    model.compile(
        optimizer=optimizer,  # your own
        loss=loss,  # your own
        steps_per_execution=32,
    )
    """
    parts = _sections(config, rewrite)
    lines: list[str] = []
    env = list(parts["before_import"])
    exported = exports(config)
    at_start = _at_start(config)
    if exported:
        lines += ["# Export before starting Python (TensorFlow reads it once, at import"
                  + ("; the loader reads " + ", ".join(sorted(at_start)) + " when Python starts" if at_start else "")
                  + "):", *(f"#   export {name}={value}" for name, value in exported.items()), ""]
        env += [f'os.environ["{name}"] = "{value}"  # or here, before importing keras or tensorflow'
                for name, value in exported.items() if name not in at_start]
    if env:
        lines += ["import os", "", "# Before importing keras:", *env, ""]
    lines.append("import keras")
    process = parts["process"] + parts["devices"] + parts["threads"]
    if process:
        lines += ["", "# Process-wide, before building the model:", *process]
    lines += parts["strategy"] + parts["build"]
    if parts["compile"]:
        lines += ["", "# Build and compile your model as before, adding these arguments:",
                  "model.compile(", "    optimizer=optimizer,  # your own", "    loss=loss,  # your own",
                  *parts["compile"], ")"]
    lines += _input_lines(parts)
    if parts["rewritten"]:
        rewritten = {name: getattr(config, name) for name in parts["rewritten"]}
        lines += ["", "# Rewrite the built model as fitspeed's trials did (same weights, outputs checked equal):",
                  *parts["rewrite"], "import fitspeed", "", f"model = fitspeed.rewrite_model(model, {json.dumps(rewritten)})"]
    lines += parts["fit"]
    if lines == ["import keras"]:
        lines += ["", "# Keep Keras's defaults: nothing measured beat them."]
    return "\n".join(_each_import_once(lines))


def _each_import_once(lines: list[str]) -> list[str]:
    """`lines` without an import that an earlier line already made (the threads, the devices and the input pipeline
    each need tensorflow, and import it where they begin).

    >>> _each_import_once(["import keras", "import tensorflow as tf", "x = 1", "", "import tensorflow as tf", "y = 2"])
    ['import keras', 'import tensorflow as tf', 'x = 1', '', 'y = 2']
    """
    seen: set[str] = set()
    kept = []
    for line in lines:
        if line.startswith(("import ", "from ")):
            if line in seen:
                continue
            seen.add(line)
        kept.append(line)
    return kept


def input_lines(config: TrialConfig) -> list[str]:
    """The input knobs as the lines a user adds to their own input pipeline (`trial/data/pipeline.py` applies them).

    >>> print("\\n".join(input_lines(TrialConfig(prefetch="autotune", map_parallelism="autotune", cache="memory"))))
    <BLANKLINE>
    # Your tf.data input pipeline, as fitspeed's trials built it:
    import tensorflow as tf
    ds = ds.map(decode_and_augment, num_parallel_calls=tf.data.AUTOTUNE)  # your own map
    ds = ds.cache()  # after decoding, before random augmentation
    ds = ds.prefetch(tf.data.AUTOTUNE)  # last
    >>> print("\\n".join(input_lines(TrialConfig(workers=4, use_multiprocessing=True))))
    <BLANKLINE>
    # Your keras.utils.PyDataset, as fitspeed's trials set it:
    class MyDataset(keras.utils.PyDataset):  # your own
        def __init__(self, **kwargs):
            super().__init__(workers=4, use_multiprocessing=True, **kwargs)
    """
    return _input_lines(_sections(config, None))


def _input_lines(parts: dict[Section, list[str]]) -> list[str]:
    """The tf.data pipeline's sections in its order, then its options; the PyDataset's arguments in one call."""
    data = [line for section in SECTIONS[SECTIONS.index("interleave"):SECTIONS.index("options")]
            for line in parts[section]]
    if parts["options"]:
        data += ["options = tf.data.Options()", *parts["options"], "ds = ds.with_options(options)",
                 *parts["options_note"]]
    lines = []
    if data:
        lines += ["", "# Your tf.data input pipeline, as fitspeed's trials built it:", "import tensorflow as tf", *data]
    if parts["loader"]:
        lines += ["", "# Your keras.utils.PyDataset, as fitspeed's trials set it:",
                  "class MyDataset(keras.utils.PyDataset):  # your own", "    def __init__(self, **kwargs):",
                  f"        super().__init__({', '.join(parts['loader'])}, **kwargs)"]
    return lines


def write(path: str | Path, summary: StudySummary | Mapping[str, Any]) -> Path:
    """Write best.json atomically; its knobs and snippet follow the verdict.

    A best configuration that verification did not confirm is shown in the
    summary, but best.json then recommends the baseline: "keep the defaults"
    never comes with a snippet that changes anything. `summary` is the study's,
    or its JSON form (a hand-made one is written as it is).
    """
    target = Path(path)
    typed = summary if isinstance(summary, StudySummary) else StudySummary.from_dict(summary)
    config = typed.answer
    rewrite = typed.best.rewrite if typed.best.claimed else None
    payload = {
        "schema": SCHEMA_VERSION,
        "kind": "best",
        **(summary.to_dict() if isinstance(summary, StudySummary) else summary),
        "knobs": config.changed(),
        "environment_variables": exports(config),
        "snippet": snippet(config, rewrite),
    }
    try:
        write_atomically(target, json.dumps(json.loads(to_json(payload)), indent=2) + "\n")
    except OSError as error:
        raise UserError(
            f"Could not write {str(target)!r}: {error.strerror}. Pass --best with a writable path; "
            "the study itself is saved."
        ) from None
    return target


def read(path: str | Path) -> tuple[TrialConfig, JSONObject | None]:
    """The configuration in a best.json, and the whole file when `fitspeed tune` wrote it.

    A best.json's configuration is `best.config` (the knobs its snippet
    applies are those of the verdict, `knobs`); a hand-written JSON object of
    knob values, or one holding them under "config", is read as a bare
    configuration, and then the second value is None (no provenance to check).

    >>> import tempfile
    >>> folder = Path(tempfile.mkdtemp())
    >>> _ = (folder / "knobs.json").write_text('{"steps_per_execution": 8}')
    >>> config, whole = read(folder / "knobs.json")
    >>> config.steps_per_execution, whole
    (8, None)
    """
    try:
        data = json.loads(Path(path).read_text())
        if data.get("kind") == "best":
            values = data["knobs"] if "knobs" in data else data["best"]["config"]
        else:
            values = data["best"]["config"] if "best" in data else data.get("config", data)
        config = TrialConfig.from_dict(dict(values))
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as error:
        raise UserError(
            f"Expected a best.json written by `fitspeed tune`, or a JSON object of knob values. "
            f"Received: {str(path)!r} ({error}). Run `fitspeed tune` first, or give the path of its best.json."
        ) from None
    return config, data if data.get("kind") == "best" else None


def set_aside(path: str | Path, study: str) -> Path | None:
    """Move a best.json that another study wrote out of the way; where it went, or None.

    Re-running the same study updates its own best.json; a different study's
    answer is kept beside it, named after that study, never overwritten:

    >>> import tempfile
    >>> folder = Path(tempfile.mkdtemp())
    >>> _ = (folder / "best.json").write_text('{"kind": "best", "study": "tiny-synthetic"}')
    >>> set_aside(folder / "best.json", "tiny-synthetic") is None
    True
    >>> set_aside(folder / "best.json", "script:train.py-script").name
    'best.tiny-synthetic.json'
    """
    target = Path(path)
    try:
        old = json.loads(target.read_text())
    except (OSError, ValueError):
        return None  # nothing there, or not a best.json this module wrote: write_atomically replaces it as before
    previous = old.get("study") if isinstance(old, dict) and old.get("kind") == "best" else None
    if not previous or previous == study:
        return None
    stem = f"{target.stem}.{re.sub(r'[^A-Za-z0-9_.-]+', '_', str(previous))}"
    kept = target.with_name(f"{stem}{target.suffix}")
    number = 1
    while kept.exists():
        number += 1
        kept = target.with_name(f"{stem}.{number}{target.suffix}")
    os.replace(target, kept)
    return kept
