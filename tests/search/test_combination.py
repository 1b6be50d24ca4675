"""Which changes the combination phase decides (`fitspeed.search.combination`)."""

from __future__ import annotations

import optuna
import pytest
from test_decisions import Fake, effects

from fitspeed.core.config import TrialConfig
from fitspeed.machine import environment
from fitspeed.search.combination import MAX_ALONE, Combination
from fitspeed.search.tuner import Tuner, TuneSettings


@pytest.fixture(autouse=True)
def no_gpu(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(environment, "nvidia_gpus", lambda: ([], None))
    optuna.logging.set_verbosity(optuna.logging.ERROR)


def test_a_change_judged_alone_that_screened_a_gain_joins_the_bundle_when_two_bigger_ones_come_first(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # oneDNN on by TensorFlow's rule here: turning it off is judged by its screen trial alone. It screened at
    # 1.15x, a gain, but two changes screened bigger and took the MAX_ALONE places: it goes into the bundle
    # (it was left out of every step, and a 1.2x it is worth was never in the answer)
    monkeypatch.setenv("TF_ENABLE_ONEDNN_OPTS", "1")
    truth = effects({("steps_per_execution", 64): 1.6, ("jit_compile", True): 1.3, ("onednn", False): 1.2,
                     ("inter_op_threads", 1): 1.0})
    settings = TuneSettings(model="tiny", trials=40, storage=optuna.storages.InMemoryStorage(),  # type: ignore[arg-type]
                            steps=64, repeats=3, knobs=("steps_per_execution", "jit_compile", "onednn",
                                                        "inter_op_threads"))
    tuner = Tuner(settings, run=Fake(truth))
    assert next(d for d in tuner.dims if d.knob == "onednn").alone
    promising = [(TrialConfig(steps_per_execution=64), 1.6), (TrialConfig(jit_compile=True), 1.3),
                 (TrialConfig(onednn=False), 1.15), (TrialConfig(inter_op_threads=1), 1.02)]
    assert MAX_ALONE == 2
    tuner.workers.start("cpu", None)
    try:
        tuner.measure(tuner.base, "baseline")
        Combination(tuner).combine(promising)
    finally:
        tuner.workers.stop()
    tried = [d.b for d in tuner.decisions() if d.purpose in ("bundle", "combine")
             and d.a.onednn is not False]
    assert any(c.onednn is False for c in tried), [(d.purpose, d.b_label) for d in tuner.decisions()]
    assert tuner.ledger.incumbent().onednn is False


def test_a_change_judged_alone_that_screened_no_gain_stays_out_of_the_bundle(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TF_ENABLE_ONEDNN_OPTS", "1")
    truth = effects({("steps_per_execution", 64): 1.6, ("inter_op_threads", 1): 1.1, ("data_autotune", False): 1.1})
    settings = TuneSettings(model="tiny", trials=40, storage=optuna.storages.InMemoryStorage(),  # type: ignore[arg-type]
                            steps=64, repeats=3, knobs=("steps_per_execution", "onednn", "inter_op_threads",
                                                        "data_autotune"))
    tuner = Tuner(settings, run=Fake(truth))
    promising = [(TrialConfig(steps_per_execution=64), 1.6), (TrialConfig(inter_op_threads=1), 1.1),
                 (TrialConfig(data_autotune=False), 1.08), (TrialConfig(onednn=False), 1.02)]
    tuner.workers.start("cpu", None)
    try:
        tuner.measure(tuner.base, "baseline")
        Combination(tuner).combine(promising)
    finally:
        tuner.workers.stop()
    assert not any(d.b.onednn is False for d in tuner.decisions())
