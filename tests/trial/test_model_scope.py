"""The model stage is one loop over the registry: `apply.model_scope` opens every knob's `Knob.build_scope`."""

from __future__ import annotations

import contextlib
import importlib.util
from collections.abc import Iterator
from typing import Any

import pytest
from conftest import json_line, missing, run_on_backend

from fitspeed.core.config import TrialConfig
from fitspeed.core.knobs import KNOBS, KNOBS_BY_NAME
from fitspeed.core.knobs.base import Knob
from fitspeed.trial.apply import model_scope


def test_remat_is_the_knob_with_a_scope_of_its_own_and_the_defaults_open_none() -> None:
    assert {knob.name for knob in KNOBS if type(knob).build_scope is not Knob.build_scope} == {"remat"}
    assert all(isinstance(knob.build_scope(knob.default), contextlib.nullcontext) for knob in KNOBS)


def test_every_knobs_scope_is_open_inside_and_closed_after(monkeypatch: pytest.MonkeyPatch) -> None:
    events: list[str] = []

    def scope(self: Knob, value: Any) -> contextlib.AbstractContextManager[None]:
        @contextlib.contextmanager
        def opened() -> Iterator[None]:
            events.append(f"open {self.name}={value}")
            yield
            events.append(f"close {self.name}")
        return opened()

    monkeypatch.setattr(type(KNOBS_BY_NAME["remat"]), "build_scope", scope)
    monkeypatch.setattr(type(KNOBS_BY_NAME["steps_per_execution"]), "build_scope", scope)
    with model_scope(TrialConfig(backend="jax", remat="full", steps_per_execution=4)):
        events.append("build")
    # the registry's order in, the reverse out
    assert events == ["open steps_per_execution=4", "open remat=full", "build", "close remat",
                      "close steps_per_execution"]


@pytest.mark.parametrize("backend", ["jax", "torch"])
def test_a_model_built_in_the_model_scope_has_its_layers_under_remat(backend: str) -> None:
    if importlib.util.find_spec(backend) is None:
        missing(f"{backend} is not installed (pip install 'fitspeed[{backend}]')")
    code = """
    import json
    import keras
    from fitspeed.core.config import TrialConfig
    from fitspeed.trial import remat
    from fitspeed.trial.apply import model_scope
    out = {}
    for mode in ("off", "full"):
        config = TrialConfig(backend=keras.backend.backend(), remat=mode)
        with model_scope(config):
            inputs = keras.Input((4,))
            model = keras.Model(inputs, keras.layers.Dense(2)(keras.layers.Dense(8)(inputs)))
        after = keras.layers.Dense(1)  # made after the scope closed: no mode
        out[mode] = {"modes": [getattr(layer._remat_mode, "mode", None) for layer in model.layers],
                     "after": getattr(after._remat_mode, "mode", None), "note": remat.check(model, config)}
    print(json.dumps(out))
    """
    out = json_line(run_on_backend(code, backend))
    assert out["off"] == {"modes": [None, None, None], "after": None, "note": None}
    assert out["full"]["modes"][1:] == ["full", "full"] and out["full"]["after"] is None
    assert out["full"]["note"].startswith("remat=full: 4 of 4 layers"), out
