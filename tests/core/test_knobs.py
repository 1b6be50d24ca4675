from __future__ import annotations

import dataclasses

import pytest

from fitspeed.core.config import TrialConfig
from fitspeed.core.errors import KnobError
from fitspeed.core.knobs import KNOBS, KNOBS_BY_NAME, KnobValues, parse_assignment


def test_every_config_field_is_a_knob_and_every_knob_a_field() -> None:
    """TrialConfig adds no field to the knob table, and KNOBS is the table, in its order."""
    fields = {f.name: f.default for f in dataclasses.fields(TrialConfig)}
    assert list(fields) == [knob.name for knob in KNOBS] == [f.name for f in dataclasses.fields(KnobValues)]
    for name, default in fields.items():
        assert KNOBS_BY_NAME[name].default == default, name
    assert TrialConfig().to_dict() == dataclasses.asdict(KnobValues())


def test_every_knob_has_a_description_and_a_stage() -> None:
    for knob in KNOBS:
        assert knob.description and knob.values
        assert knob.stage in {"environment", "process", "model", "compile", "data"}
        assert knob.scope in {"process", "model", "data"}


def test_assignments_parse_to_typed_values() -> None:
    config = TrialConfig.from_assignments(
        ["steps_per_execution=32", "jit_compile=true", "deterministic=yes", "precision=mixed_bfloat16"]
    )
    assert config.steps_per_execution == 32
    assert config.jit_compile is True
    assert config.deterministic is True
    assert config.precision == "mixed_bfloat16"
    assert config.changed() == {
        "steps_per_execution": 32,
        "jit_compile": True,
        "precision": "mixed_bfloat16",
        "deterministic": True,
    }
    assert TrialConfig().label() == "defaults"


def test_config_is_frozen() -> None:
    config = TrialConfig()
    with pytest.raises(dataclasses.FrozenInstanceError):
        config.batch_size = 64  # type: ignore[misc]


@pytest.mark.parametrize(
    ("assignment", "fragment"),
    [
        ("steps_per_execution=auto", "Keras 3 does not accept"),
        ("steps_per_execution=0", "integer >= 1"),
        ("batch_size=lots", "integer >= 1"),
        ("jit_compile=maybe", "auto, true or false"),
        ("precision=float16", "float32, mixed_float16, mixed_bfloat16"),
        ("data_format=NCHW", "channels_last, channels_first"),
        ("deterministic=perhaps", "true or false"),
        ("backend=mxnet", "tensorflow, jax, torch"),
        ("no_such_knob=1", "Unknown knob 'no_such_knob'"),
        ("steps_per_execution", "name=value"),
    ],
)
def test_bad_values_say_what_was_expected_and_received(assignment: str, fragment: str) -> None:
    with pytest.raises(KnobError) as caught:
        TrialConfig.from_assignments([assignment])
    assert fragment in str(caught.value)
    assert "Received" in str(caught.value) or "Unknown" in str(caught.value)


def test_torch_refuses_more_than_one_step_per_execution() -> None:
    with pytest.raises(KnobError, match="torch backend cannot do steps_per_execution=8"):
        TrialConfig(backend="torch", steps_per_execution=8)
    assert TrialConfig(backend="torch").steps_per_execution == 1
    assert "torch" not in KNOBS_BY_NAME["steps_per_execution"].backends()


def test_jax_refuses_thread_knobs() -> None:
    with pytest.raises(KnobError, match="jax backend cannot do intra_op_threads=2"):
        TrialConfig(backend="jax", intra_op_threads=2)


def test_from_dict_rejects_unknown_keys() -> None:
    with pytest.raises(KnobError, match="Unknown knob 'batchsize'"):
        TrialConfig.from_dict({"batchsize": 64})


def test_parse_assignment_round_trip() -> None:
    assert parse_assignment("intra_op_threads=2") == ("intra_op_threads", 2)
