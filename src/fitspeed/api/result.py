"""What `fitspeed.tune` returns: the verified answer, its tables, and the answer applied to a model in memory.

`TuneResult` wraps the study's `StudySummary`, the same one the CLI's
tables, best.json and the HTML report draw from (`fitspeed.search.summary`):

| member                 | what                                                            |
|------------------------|-----------------------------------------------------------------|
| `best`                 | the answer as a TrialConfig: the verified best, or the defaults when the verification did not claim |
| `verdict`              | the verification's sentence, its lower bound first              |
| `table()`              | the tables `fitspeed tune` prints, as text                      |
| `report(path)`         | the HTML report (`fitspeed report`), written into a folder      |
| `apply(model)`         | `model` rewritten and recompiled with the answer                |
| `fit_kwargs(**kwargs)` | your fit() arguments, with the batch size the speed was measured at |
| `dataset(x, y)`        | your arrays as the tf.data pipeline the trials built, the input knobs set |
| `save(path)`           | best.json, which `fitspeed run` reads; `fitspeed.load(path)` reads it back, and `fitspeed.load(study=...)` a stored study |

In a notebook, `_repr_html_` shows the verdict, the decisions and the
speed-up plot inline.
"""

from __future__ import annotations

import base64
import html
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from fitspeed.api.errors import said
from fitspeed.core.config import TrialConfig
from fitspeed.core.errors import UserError
from fitspeed.core.json_data import JSONObject
from fitspeed.core.study_summary import StudySummary, share_text


class TuneResult:
    """A tuning study's answer, from `fitspeed.tune` or `fitspeed.load`."""

    def __init__(self, summary: StudySummary | Mapping[str, Any], storage: str | None = None) -> None:
        """`summary`: the study's `StudySummary`, or its JSON form (best.json's, `show --json`'s)."""
        self.summary = summary if isinstance(summary, StudySummary) else StudySummary.from_dict(summary)
        self.storage = storage

    def __repr__(self) -> str:
        return f"TuneResult(study={self.study!r}, best={self.best.label()!r}, verdict={self.verdict!r})"

    @property
    def study(self) -> str:
        return self.summary.study

    @property
    def claimed(self) -> bool:
        """True when the verification confirmed the best as faster than the defaults."""
        return self.summary.best.claimed

    @property
    def best(self) -> TrialConfig:
        """The answer: the verified best configuration, or the baseline's when the verification did not claim."""
        return self.summary.answer

    @property
    def verdict(self) -> str:
        best = self.summary.best
        return best.verdict + (f" ({best.why})" if best.why else "")

    @property
    def shares(self) -> list[JSONObject]:
        """Each knob of the answer with its own share of the speed-up (`search.lean`)."""
        return list(self.summary.best.shares)

    @property
    def cost(self) -> JSONObject:
        """The tune's time and what the answer saves per run (`fitspeed.search.cost.saving`): `tune_s`,
        `saved_s` (`saved_low_s` at the interval's lower end), `run_s`, `runs_to_pay_back`, and its `line`."""
        return dict(self.summary.cost or {})

    def table(self, width: int = 100) -> str:
        """The tables `fitspeed tune` prints, as plain text `width` columns wide."""
        from fitspeed.console import tune_tables

        return tune_tables.tune_text(self.summary, width)

    def report(self, path: str | Path = "fitspeed-report") -> Path:
        """Write the HTML report into the folder `path`; the path of its index.html."""
        from fitspeed.report import html as report_html

        return report_html.write(self.summary, Path(path)).index

    def save(self, path: str | Path = "best.json") -> Path:
        """Write best.json (what `fitspeed run` reads); its path."""
        from fitspeed.core import best_json

        return best_json.write(path, self.summary)

    @said
    def apply(self, model: Any, seed: int = 0) -> Any:
        """`model` with the answer: rewritten for its model knobs and recompiled with its compile knobs.

        The returned model has `model`'s weights. Under a mixed precision
        answer its layers compute in that policy and the layers that make its
        outputs in float32; with data_format=channels_first its layers are
        rebuilt so (your data stays channels_last); it is compiled with your
        loss, optimizer and metrics, and the answer's steps_per_execution
        and jit_compile. `model` itself is left as it was. The answer's
        process-wide knobs (threads, oneDNN, determinism, backend) cannot
        change a model: `fitspeed.apply(result.best)` sets them, before keras
        is imported in a fresh session.
        """
        import keras

        from fitspeed.trial.apply import compile_kwargs
        from fitspeed.trial.transform import Refused
        from fitspeed.trial.transform.rewrite import rewrite

        if not isinstance(model, keras.Model):
            raise UserError(f"Expected a keras.Model to apply the answer to. Received: {type(model).__name__}.")
        if not model.compiled:
            raise UserError(f"Expected a compiled model: apply() recompiles it with your loss and optimizer. "
                            f"Received {model.name!r}, not compiled. Call model.compile(...) first.")
        config = self.best
        data_format = "channels_first" if config.data_format == "channels_first" else None
        precision = config.precision if config.precision != "float32" else None
        compiled = model.get_compile_config()
        try:
            done = rewrite(model, data_format=data_format, precision=precision, scope="all", seed=seed) \
                if data_format or precision else None
        except Refused as error:
            raise UserError(f"Could not apply {config.label()} to {model.name!r}: {error}.") from None
        if done is None:  # nothing to rebuild: a copy, so that `model` stays as it was
            new = keras.models.clone_model(model)
            new.set_weights(model.get_weights())
        else:
            new = done.model
        new.compile_from_config({**compiled, **compile_kwargs(config)})
        return new

    def fit_kwargs(self, **kwargs: Any) -> dict[str, Any]:
        """Your fit() keyword arguments, unchanged, with the batch size the speed was measured at where you gave none.

        Input knobs do not travel as fit() arguments: `dataset(x, y)` applies
        them to arrays, and best.json's snippet shows them for your own
        pipeline. No argument's meaning changes.
        """
        out = dict(kwargs)
        if "batch_size" not in out and not _is_dataset(out.get("x")):
            out["batch_size"] = self.best.batch_size
        return out

    def dataset(self, x: Any, y: Any, batch_size: int | None = None, shuffle: bool | str = True,
                sample_weight: Any = None) -> Any:
        """`x` and `y` as the tf.data pipeline Keras builds for fit(x, y, shuffle=...), with the answer's input knobs.

        The batches, their order and the weights are what fit(x, y,
        batch_size, shuffle, sample_weight) would give; only the pipeline's
        options (tf.data autotune) follow the answer, as in fitspeed's trials.
        """
        from fitspeed.trial.data.pipeline import keras_array_dataset

        return keras_array_dataset(x, y, batch_size or self.best.batch_size, bool(self.best.data_autotune),
                                   shuffle=shuffle, sample_weight=sample_weight)

    def _repr_html_(self) -> str:
        rows = "".join(
            "<tr>" + "".join(f"<td>{html.escape(str(cell))}</td>" for cell in (
                row["purpose"], row["change"], row["incumbent"], row["pairs"], row["interval"], row["verdict"]))
            + "</tr>" for row in self.summary.decisions)
        shares = ", ".join(share_text(s) for s in self.shares)
        plot = _waterfall_png(self.summary)
        return (
            f"<div class='fitspeed-result'><p><b>{html.escape(self.study)}</b>: "
            f"<b>{html.escape(self.verdict)}</b></p>"
            f"<p>answer: <code>{html.escape(self.best.label())}</code>"
            + (f"; each knob's share: {html.escape(shares)}" if shares else "") + "</p>"
            + ("<table><thead><tr><th>step</th><th>change</th><th>on top of</th><th>pairs</th><th>interval</th>"
               f"<th>verdict</th></tr></thead><tbody>{rows}</tbody></table>" if rows else "")
            + (f"<img alt='speed-up, knob by knob' src='data:image/png;base64,{plot}'/>" if plot else "")
            + "</div>")


def _is_dataset(value: Any) -> bool:
    return (type(value).__module__ or "").startswith("tensorflow") and hasattr(value, "element_spec")


def _waterfall_png(summary: StudySummary) -> str | None:
    """The speed-up plot (the report's waterfall), as base64 PNG; None where there is nothing to draw."""
    from fitspeed.report import plot_data

    steps = plot_data.waterfall(summary)
    if len(steps) < 2:
        return None
    from fitspeed.report.plots import png_bytes, waterfall_figure  # no pyplot: the notebook's figures stay its own

    return base64.b64encode(png_bytes(waterfall_figure(steps), 80)).decode()


@said
def load(path: str | Path | None = "best.json", *, study: str | None = None,
         storage: str = "sqlite:///fitspeed.db") -> TuneResult:
    """The TuneResult in a best.json that `fitspeed tune` or `result.save` wrote; or, with `study`, a stored study's.

    `fitspeed.load(study="tiny-synthetic")` reads the study from `storage` as
    `fitspeed show` does, whether `fitspeed tune` or `fitspeed.tune` made it,
    finished or interrupted.
    """
    if study is not None:
        from fitspeed.report.html import load_summary

        return TuneResult(load_summary(None, study, storage), storage=storage)
    from fitspeed.core import best_json

    _, whole = best_json.read(path or "best.json")
    if whole is None:
        raise UserError(f"Expected a best.json written by `fitspeed tune` or result.save(). Received: {str(path)!r}, "
                        "a bare configuration. Pass it to fitspeed.apply() instead.")
    return TuneResult(StudySummary.from_dict(whole))  # best.json's own keys (schema, kind, knobs, ...) left out
