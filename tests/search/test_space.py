from __future__ import annotations

import pytest

from fitspeed.core.backends import NAMES, backend_of
from fitspeed.core.config import TrialConfig
from fitspeed.core.errors import KnobError
from fitspeed.core.input_kinds import INPUT_KNOBS
from fitspeed.core.knobs import KNOBS, Knob
from fitspeed.machine.environment import onednn_default, onednn_exported
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
    # measured, never skipped by a belief about the hardware: float16 too, on a CPU
    assert [d.values for d in dims["precision"]] == [("mixed_bfloat16", "mixed_float16")]
    assert dims["data_format"][0].values == ("channels_first",)
    assert dims["deterministic"][0].cost_only


def test_only_what_cannot_run_here_is_skipped_and_says_why() -> None:
    for backend in ("tensorflow", "jax", "torch"):
        for has_gpu in (False, True):
            dims = default_space("tiny", TrialConfig(backend=backend), has_gpu=has_gpu, cores=2)
            skipped = {d.knob: d.skipped for d in dims if d.skipped and d.knob not in INPUT_KNOBS and not d.on}
            # a knob that owns its dimension is skipped only where this backend cannot turn it, for its own reason
            refused = {knob.name: knob.refuses(backend) for knob in KNOBS if type(knob).offer is not Knob.offer}
            allowed = {"steps_per_execution", "onednn", "intra_op_threads", "inter_op_threads"}
            assert set(skipped) <= allowed | {name for name, why in refused.items() if why}, skipped
            assert all(skipped[name] == why for name, why in refused.items() if name in skipped), skipped
            assert all(reason for reason in skipped.values())
    torch = by_knob(default_space("tiny", TrialConfig(backend="torch"), has_gpu=False))
    assert torch["onednn"][0].skipped == "TF_ENABLE_ONEDNN_OPTS is read by TensorFlow alone"


def test_onednn_tries_first_what_differs_from_tensorflows_default_here() -> None:
    on = by_knob(default_space("tiny", TrialConfig(), has_gpu=False, onednn_on=True))
    off = by_knob(default_space("tiny", TrialConfig(), has_gpu=False, onednn_on=False))
    unknown = by_knob(default_space("tiny", TrialConfig(), has_gpu=False, onednn_on=None))
    assert on["onednn"][0].values == (False,)  # Intel with AMX or AVX512-VNNI: on by default, try off
    assert off["onednn"][0].values == (True,)  # an AVX2-only Zen 3: off by default, try on
    assert unknown["onednn"][0].values == (True, False)
    pinned = by_knob(default_space("tiny", TrialConfig(onednn=True), has_gpu=False, onednn_on=True))
    assert pinned["onednn"][0].values == (False,)
    detected = by_knob(default_space("tiny", TrialConfig(), has_gpu=False))
    expected = onednn_exported()
    expected = onednn_default() if expected is None else expected
    assert detected["onednn"][0].values == ((True, False) if expected is None else (not expected,))
    assert choices(default_space("tiny", TrialConfig(), has_gpu=False, onednn_on=False), TrialConfig())[
        "onednn"] == ("keep", True)


def test_an_exported_tf_enable_onednn_opts_is_what_the_baseline_runs_with(monkeypatch: pytest.MonkeyPatch) -> None:
    # The trials inherit the user's export: with oneDNN turned off there (as TensorFlow leaves it on an
    # AVX2-only Zen 3), the knob to try is on, as a change like any other, whatever this CPU's flags say.
    monkeypatch.setenv("TF_ENABLE_ONEDNN_OPTS", "0")
    off = by_knob(default_space("tiny", TrialConfig(), has_gpu=False))["onednn"][0]
    assert (off.values, off.alone) == ((True,), False)
    monkeypatch.setenv("TF_ENABLE_ONEDNN_OPTS", "TRUE")
    on = by_knob(default_space("tiny", TrialConfig(), has_gpu=False))["onednn"][0]
    assert (on.values, on.alone) == ((False,), True)
    monkeypatch.setenv("TF_ENABLE_ONEDNN_OPTS", "maybe")  # TensorFlow ignores it, and so the CPU's rule holds
    expected = onednn_default()
    assert by_knob(default_space("tiny", TrialConfig(), has_gpu=False))["onednn"][0].values == (
        (True, False) if expected is None else (not expected,))


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


@pytest.mark.parametrize("backend", NAMES)
def test_the_search_space_skips_with_the_same_reason_the_knob_refuses_with(backend: str) -> None:
    dims = [d for d in default_space("tiny", TrialConfig(backend=backend), has_gpu=False, cores=4, onednn_on=False)
            if not d.on]  # another backend's own knobs say that backend's reasons (test_each_backend_brings_...)
    for dim in dims:
        reason = backend_of(backend).cannot(dim.knob)
        if reason:
            assert dim.skipped == reason, dim
            assert not dim.searched
    skipped = {dim.knob for dim in dims if dim.skipped in backend_of(backend).cannot_turn.values()}
    assert skipped == set(backend_of(backend).cannot_turn) & {dim.knob for dim in dims}


# -- the backend as a knob --------------------------------------------------------------------------------------


def test_the_other_installed_backends_are_alternatives_and_a_missing_one_names_its_extra() -> None:
    from fitspeed.search.space import backend_dimension, skipped

    jax_only = backend_dimension(TrialConfig(), "tiny", installed=lambda name: name in ("tensorflow", "jax"))
    assert (jax_only.values, jax_only.each, jax_only.skipped) == (("jax",), True, None)
    assert skipped([jax_only]) == {"backend=torch": "PyTorch is not installed: pip install 'fitspeed[torch]'"}
    from_jax = backend_dimension(TrialConfig(backend="jax"), "model.keras", installed=lambda name: True)
    assert from_jax.values == ("tensorflow", "torch")  # a .keras file runs anywhere
    none = backend_dimension(TrialConfig(), "tiny", installed=lambda name: name == "tensorflow")
    assert none.values == () and "pip install 'fitspeed[jax]' for JAX, 'fitspeed[torch]' for PyTorch" in str(none.skipped)
    # what this machine has: the space offers exactly the installed ones
    import importlib.util

    here = tuple(name for name in ("jax", "torch") if importlib.util.find_spec(name) is not None)
    dims = by_knob(default_space("tiny", TrialConfig(), has_gpu=False, cores=2))
    assert dims["backend"][0].values == here


def test_a_script_or_builder_tied_to_one_framework_is_offered_no_other_backend(tmp_path, monkeypatch) -> None:  # noqa: ANN001
    from fitspeed.search.space import backend_dimension

    every = lambda name: True  # noqa: E731
    script = tmp_path / "train.py"
    script.write_text("import keras\nimport tensorflow as tf\nds = tf.data.Dataset.range(4)\n")
    dim = backend_dimension(TrialConfig(), "script:train.py", script=str(script), installed=every)
    assert dim.values == () and dim.skipped == "train.py:2 imports tensorflow, so the script runs on the tensorflow backend only"
    (tmp_path / "mymodels.py").write_text("import keras\nfrom keras import ops\n\n\ndef build():\n    import torch\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    builder = backend_dimension(TrialConfig(), "mymodels:build", installed=every)
    assert builder.values == ("torch",)  # its torch calls run on the torch backend
    (tmp_path / "plain.py").write_text("import keras\n\n\ndef build():\n    return keras.Sequential()\n")
    assert backend_dimension(TrialConfig(), "plain:build", installed=every).values == ("jax", "torch")


# -- each backend's own knobs, measured on top of it ----------------------------------------------------------------


def test_each_backend_brings_its_own_knobs_measured_on_top_of_it_or_skipped_with_why() -> None:
    from fitspeed.search.space import Dimension, own_knobs, skipped

    dims = own_knobs(Dimension("backend", ("jax", "torch")), TrialConfig(), has_gpu=False, cores=2)
    searched = {d.name: d.values for d in dims if d.searched}
    assert searched == {"steps_per_execution@jax": (64, 16, 4), "jit_compile@torch": (True,),
                        "intra_op_threads@torch": (1,), "inter_op_threads@torch": (1,)}
    why = skipped(dims)
    assert why["steps_per_execution@torch"] == "the PyTorch backend of Keras runs one step per execution only"
    assert "XLA already on JAX" in why["jit_compile@jax"]  # JAX's default: never measured as a no-op
    assert "--xla_cpu_multi_thread_eigen=false" in why["intra_op_threads@jax"]
    # the screen's trial sets the backend with the knob
    jit = next(d for d in dims if d.name == "jit_compile@torch")
    assert TrialConfig().replace(**jit.change(True)).changed() == {"backend": "torch", "jit_compile": True}
    # a backend the search does not try brings none, and says why
    left = own_knobs(Dimension("backend", ("jax",), left_out=(("torch", "PyTorch is not installed"),)),
                     TrialConfig(), has_gpu=False, cores=2)
    assert skipped(left)["jit_compile@torch"].endswith("which this search does not try: PyTorch is not installed")
    # from a JAX baseline, TensorFlow's own knobs are tried on top of TensorFlow
    from_jax = own_knobs(Dimension("backend", ("tensorflow",)), TrialConfig(backend="jax"), has_gpu=False, cores=2)
    assert {d.name for d in from_jax if d.searched} == {"steps_per_execution@tensorflow", "jit_compile@tensorflow",
                                                        "intra_op_threads@tensorflow", "inter_op_threads@tensorflow"}


def test_the_default_space_holds_the_other_backends_own_knobs_and_space_or_knobs_narrow_them() -> None:
    base = TrialConfig()
    dims = default_space("tiny", base, has_gpu=False, cores=2)
    offered = next(d for d in dims if d.knob == "backend").values
    on = {d.name for d in dims if d.backend and d.searched}
    assert {name.split("@")[1] for name in on} == set(offered)
    if "torch" in offered:
        narrowed = override(dims, ["backend=jax"], base)
        assert "jit_compile@torch" not in {d.name for d in narrowed if d.searched}
        assert {d.name for d in only(dims, ["backend", "jit_compile@torch"])} == {"backend", "jit_compile@torch"}
        assert "jit_compile@torch" not in {d.name for d in only(dims, ["jit_compile"])}  # with the backend only
    with pytest.raises(KnobError, match="one of tensorflow, jax, torch"):
        only(dims, ["jit_compile@mxnet"])


def test_auto_scale_loss_is_measured_only_under_mixed_float16() -> None:
    dims = default_space("tiny", TrialConfig(), has_gpu=False, cores=2)
    scaling = next(d for d in dims if d.knob == "auto_scale_loss")
    # on float32 Keras scales nothing: turning it off there would be a no-op, so it is measured on mixed_float16
    assert scaling.name == "auto_scale_loss@mixed_float16"
    assert scaling.change(False) == {"precision": "mixed_float16", "auto_scale_loss": False}
    on_fp16 = next(d for d in default_space("tiny", TrialConfig(precision="mixed_float16"), has_gpu=False)
                   if d.knob == "auto_scale_loss")
    assert (on_fp16.on, on_fp16.values) == (None, (False,))
    assert [d.name for d in only(dims, ["auto_scale_loss"])] == []  # without precision, nothing to put it on
    assert [d.name for d in only(dims, ["precision", "auto_scale_loss"])] == ["precision",
                                                                              "auto_scale_loss@mixed_float16"]
