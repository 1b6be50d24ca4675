"""The verification (`fitspeed.search.verification`): what it verifies, and what it leaves alone."""

from __future__ import annotations

import optuna
import pytest
from test_decisions import Fake, effects

from fitspeed.core.config import TrialConfig
from fitspeed.machine import environment
from fitspeed.search.tuner import Tuner, TuneSettings


@pytest.fixture(autouse=True)
def no_gpu(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(environment, "nvidia_gpus", lambda: ([], None))
    optuna.logging.set_verbosity(optuna.logging.ERROR)


def started(fake: Fake, knobs: tuple[str, ...]) -> Tuner:
    """A tuner of `tiny` on `fake` over `knobs`, its workers started (the test stops them)."""
    settings = TuneSettings(model="tiny", trials=30, storage=optuna.storages.InMemoryStorage(),  # type: ignore[arg-type]
                            steps=64, repeats=3, knobs=knobs)
    tuner = Tuner(settings, run=fake)
    tuner.workers.start("cpu", None)
    return tuner


def test_an_answer_the_lean_step_took_back_to_the_defaults_is_not_verified() -> None:
    # jit_compile became the incumbent, and the lean step took it out again: the answer is the defaults, and a
    # verification of the defaults against the defaults (an A/A test) claimed "faster" in 2 of 1,000 null studies
    fake = Fake(effects({("jit_compile", True): 1.0}))
    tuner = started(fake, ("jit_compile",))
    try:
        tuner.measure(tuner.base, "baseline")
        leaned = TrialConfig(jit_compile=True)
        assert tuner.ledger.chain_add(leaned, over=tuner.base)
        assert tuner.ledger.chain_add(tuner.base, over=leaned, again=True)
        verdict = tuner.finish()
    finally:
        tuner.workers.stop()
    assert verdict["claimed"] is False and verdict["verdict"] == "keep the defaults"
    assert verdict["why"] == "no change showed a share of its own when taken out of the answer"
    assert [d for d in tuner.decisions() if d.purpose == "verify"] == []
    assert len(fake.calls) == 1  # the baseline alone: no verification pairs


def test_the_newest_incumbent_is_verified_against_the_defaults() -> None:
    fake = Fake(effects({("jit_compile", True): 1.5}))
    tuner = started(fake, ("jit_compile",))
    try:
        tuner.measure(tuner.base, "baseline")
        assert tuner.ledger.chain_add(TrialConfig(jit_compile=True), over=tuner.base)
        verdict = tuner.finish()
    finally:
        tuner.workers.stop()
    assert verdict["claimed"] is True and TrialConfig.from_dict(verdict["config"]) == TrialConfig(jit_compile=True)


def test_a_claim_after_an_earlier_verification_of_the_study_says_it_comes_from_a_rerun() -> None:
    # a study run again (a larger --trials) whose answer changed is verified afresh: a 2.5% test of its own, so the
    # verdict says how many verifications came before it rather than passing as the study's first
    fake = Fake(effects({("jit_compile", True): 1.5, ("intra_op_threads", 1): 1.3}))
    tuner = started(fake, ("jit_compile", "intra_op_threads"))
    try:
        tuner.measure(tuner.base, "baseline")
        first = TrialConfig(jit_compile=True)
        assert tuner.ledger.chain_add(first, over=tuner.base)
        before = tuner.finish()
        assert before["claimed"] is True and "earlier_verifications" not in before
        assert "rerun" not in before["verdict"]
        assert tuner.ledger.chain_add(TrialConfig(jit_compile=True, intra_op_threads=1), over=first)
        after = tuner.finish()
    finally:
        tuner.workers.stop()
    assert after["claimed"] is True and after["earlier_verifications"] == 1
    assert "verified on a rerun of this study, after 1 earlier verification" in after["verdict"]
    assert after["estimate"]["verdict"] == after["verdict"]
