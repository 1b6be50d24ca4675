"""best.json's snippet is composed from the knobs' own lines (`Knob.snippet`), section by section."""

from __future__ import annotations

from typing import Any

import pytest

from fitspeed.core import best_json
from fitspeed.core.config import TrialConfig
from fitspeed.core.knobs import KNOBS, KNOBS_BY_NAME
from fitspeed.core.knobs.base import SECTIONS, Knob, Lines, Recipe

# a value other than the default for every knob that writes snippet lines
OTHER = {"backend": "jax", "batch_size": 64, "devices": 2, "steps_per_execution": 8, "jit_compile": True,
         "precision": "mixed_bfloat16", "auto_scale_loss": False, "data_format": "channels_first", "remat": "full",
         "deterministic": True, "intra_op_threads": 2, "inter_op_threads": 1, "prefetch": 2, "map_parallelism": 4,
         "cache": "file", "vectorize": True, "shuffle_buffer": 100, "interleave": 4, "data_deterministic": False,
         "data_autotune": False, "workers": 4, "use_multiprocessing": True, "max_queue_size": 32}


@pytest.mark.parametrize("name", list(OTHER))
def test_a_knob_set_writes_its_own_lines_into_the_snippet(name: str) -> None:
    backend = "jax" if name in ("remat", "backend") else "tensorflow"
    config = TrialConfig(**{"backend": backend, name: OTHER[name]})
    knob = KNOBS_BY_NAME[name]
    own = knob.snippet(OTHER[name], Recipe(config))
    assert own and set(own) <= set(SECTIONS), own
    text = best_json.snippet(config)
    for section, lines in own.items():
        for line in lines:
            if section == "rewritten":
                assert f'"{line}": ' in text
            elif section == "loader":
                assert line in text
            else:
                assert line in text.splitlines(), (section, line)


def test_the_snippet_reads_every_knob_hook(monkeypatch: pytest.MonkeyPatch) -> None:
    """A knob's hook changed is the snippet changed: nothing in best_json writes a knob's lines by hand."""
    seen: list[str] = []

    def marked(self: Knob, value: Any, recipe: Recipe) -> Lines:
        seen.append(self.name)
        return {"build": [f"# {self.name} was here"]}

    for knob in {type(knob) for knob in KNOBS}:
        monkeypatch.setattr(knob, "snippet", marked)
    text = best_json.snippet(TrialConfig())
    assert seen == [knob.name for knob in KNOBS]
    assert [line for line in text.splitlines() if line.endswith(" was here")] == [
        f"# {knob.name} was here" for knob in KNOBS]


def test_the_pipeline_lines_come_in_the_pipelines_order_not_the_registrys() -> None:
    config = TrialConfig(prefetch=2, map_parallelism=4, cache="memory", vectorize=True, shuffle_buffer=10,
                         interleave=2, data_deterministic=False)
    calls = [line.split("(")[0] for line in best_json.input_lines(config) if line.startswith("ds = ")]
    assert calls == ["ds = files.interleave", "ds = ds.map", "ds = ds.cache", "ds = ds.shuffle", "ds = ds.batch",
                     "ds = ds.prefetch", "ds = ds.with_options"]
