from __future__ import annotations

import pytest

from fitspeed.core.config import TrialConfig
from fitspeed.core.errors import KnobError
from fitspeed.search.space import choices, default_space, only, override


def by_knob(dims):  # noqa: ANN001, ANN201
    out = {}
    for dim in dims:
        out.setdefault(dim.knob, []).append(dim)
    return out


def test_cpu_tensorflow_space() -> None:
    dims = by_knob(default_space("tiny", TrialConfig(), has_gpu=False, cores=2))
    assert dims["steps_per_execution"][0].values == (64, 16, 4)
    assert dims["jit_compile"][0].values == (True,)  # auto is off on a CPU
    assert dims["precision"][0].values == ("mixed_bfloat16",)
    assert "no fast float16" in dims["precision"][1].skipped
    assert dims["data_format"][0].values == ("channels_first",)
    assert dims["deterministic"][0].cost_only


def test_gpu_and_other_backends() -> None:
    gpu = by_knob(default_space("cnn-low", TrialConfig(), has_gpu=True, cores=16))
    assert gpu["precision"][0].values == ("mixed_float16", "mixed_bfloat16")
    assert gpu["jit_compile"][0].values == (False,)  # auto means XLA on a GPU
    torch = by_knob(default_space("tiny", TrialConfig(backend="torch"), has_gpu=False))
    assert "one step per execution" in torch["steps_per_execution"][0].skipped
    jax = by_knob(default_space("tiny", TrialConfig(backend="jax"), has_gpu=False))
    assert jax["intra_op_threads"][0].skipped
    mlp = by_knob(default_space("mlp", TrialConfig(), has_gpu=False))
    assert mlp["data_format"][0].skipped == "the model has no image layers"


def test_baseline_values_are_not_tried_again() -> None:
    dims = by_knob(default_space("tiny", TrialConfig(steps_per_execution=16), has_gpu=False))
    assert dims["steps_per_execution"][0].values == (64, 4)


def test_overrides_and_only() -> None:
    base = TrialConfig()
    dims = override(default_space("tiny", base, has_gpu=False), ["precision=mixed_float16,float32"], base)
    assert [d.values for d in dims if d.knob == "precision"] == [("mixed_float16",)]
    narrowed = only(dims, ["precision"])
    assert {d.knob for d in narrowed} == {"precision"}
    assert choices(narrowed, base) == {"precision": ("float32", "mixed_float16")}
    with pytest.raises(KnobError, match="knob=value1,value2"):
        override(dims, ["precision"], base)
    with pytest.raises(KnobError, match="torch backend cannot do steps_per_execution=4"):
        override(dims, ["steps_per_execution=4"], TrialConfig(backend="torch"))


def test_cost_only_knobs_are_not_sampled() -> None:
    base = TrialConfig()
    assert "deterministic" not in choices(default_space("tiny", base, has_gpu=False), base)
