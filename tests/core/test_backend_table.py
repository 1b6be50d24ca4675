"""The backend classes: one home for what each backend cannot do, and the one dispatcher."""

from __future__ import annotations

import pytest

from fitspeed.core.backends import BACKENDS, NAMES, Backend, backend_of
from fitspeed.core.config import TrialConfig
from fitspeed.core.errors import KnobError
from fitspeed.core.knobs import KNOBS, KNOBS_BY_NAME


def test_every_name_has_one_backend_named_for_it() -> None:
    assert tuple(BACKENDS) == NAMES
    assert KNOBS_BY_NAME["backend"].values == ", ".join(NAMES)
    for name in NAMES:
        backend = backend_of(name)
        assert isinstance(backend, Backend)
        assert backend.name == name
        assert backend_of(name) is backend


def test_an_unknown_name_is_refused_with_the_known_ones() -> None:
    with pytest.raises(KnobError, match="Expected `backend` to be one of tensorflow, jax, torch. Received: 'mxnet'"):
        backend_of("mxnet")


def test_every_reason_names_a_knob() -> None:
    for name in NAMES:
        for knob, reason in backend_of(name).cannot_turn.items():
            assert knob in KNOBS_BY_NAME, (name, knob)
            assert reason and not reason.endswith("."), (name, knob)


@pytest.mark.parametrize(("backend", "knob", "value"), [
    ("torch", "steps_per_execution", 8), ("torch", "devices", 2), ("torch", "onednn", True),
    ("jax", "onednn", False), ("jax", "intra_op_threads", 2), ("jax", "inter_op_threads", 1),
    ("tensorflow", "remat", "full"),
])
def test_a_knob_a_backend_cannot_turn_is_refused_with_its_reason(backend: str, knob: str, value: object) -> None:
    reason = backend_of(backend).cannot(knob)
    assert reason
    with pytest.raises(KnobError) as caught:
        TrialConfig(backend=backend, **{knob: value})  # type: ignore[arg-type]
    assert f"The {backend} backend cannot do {knob}={value!r}: {reason}." in str(caught.value)
    assert backend not in KNOBS_BY_NAME[knob].backends()
    TrialConfig(backend=backend, **{knob: KNOBS_BY_NAME[knob].default})  # the default always runs


def test_tensorflow_turns_every_knob_but_remat() -> None:
    # Keras 3.15's RematScope fails in TensorFlow's compiled train step (tests/trial/test_remat.py checks it still does)
    assert [knob.name for knob in KNOBS if backend_of("tensorflow").cannot(knob.name)] == ["remat"]
    # processes: TensorFlow's multi-process route fails in Keras 3's fit(), said by the knob itself (tests/measure/
    # test_processes.py checks it still does)
    assert [knob.name for knob in KNOBS if "tensorflow" not in knob.backends()] == ["processes", "remat"]
    assert KNOBS_BY_NAME["remat"].backends() == ("jax", "torch")


@pytest.mark.parametrize(("backend", "gpu", "cpu"), [("tensorflow", True, False), ("jax", True, True),
                                                     ("torch", False, False)])
def test_jit_compile_auto_resolves_as_keras_does(backend: str, gpu: bool, cpu: bool) -> None:
    assert backend_of(backend).auto_jit_compile(has_gpu=True) is gpu
    assert backend_of(backend).auto_jit_compile(has_gpu=False) is cpu
