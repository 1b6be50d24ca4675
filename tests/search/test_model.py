"""The model phase: one fit over every timed trial of the study, and its argmax challenged in fresh pairs."""

from __future__ import annotations

import math
import random
from collections.abc import Callable

import optuna
import pytest
from test_decisions import Fake, effects, tune

from fitspeed.core.config import TrialConfig
from fitspeed.machine import environment
from fitspeed.search.model import MIN_PREDICTED, Model, fit, ranked
from fitspeed.search.phase import Phase
from fitspeed.search.tuner import Tuner, TuneSettings

SPE, INTER, JIT = ("steps_per_execution", 64), ("inter_op_threads", 1), ("jit_compile", True)


@pytest.fixture(autouse=True)
def no_gpu(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(environment, "nvidia_gpus", lambda: ([], None))
    optuna.logging.set_verbosity(optuna.logging.ERROR)


def test_the_fit_recovers_main_effects_and_an_interaction_and_a_load_burst_barely_moves_it() -> None:
    # log speed: spe 1.5x, jit 0.9x alone, 1.3x more beside spe; every configuration of the three measured 4 times
    rng = random.Random(7)
    truth = {SPE: math.log(1.5), INTER: math.log(1.05), JIT: math.log(0.9)}
    seen = []
    for on in range(8):
        changes = frozenset(item for bit, item in enumerate((SPE, INTER, JIT)) if on >> bit & 1)
        log = sum(truth[i] for i in changes) + (math.log(1.3) if {SPE, JIT} <= changes else 0.0)
        seen += [(changes, log + rng.gauss(0, 0.03)) for _ in range(4)]
    model = fit(seen, 0.03)
    assert model.effect(SPE) == pytest.approx(1.5, rel=0.03)
    assert model.effect(INTER) == pytest.approx(1.05, rel=0.03)
    assert model.effect(JIT) == pytest.approx(0.9, rel=0.03)
    best, predicted = ranked(model)[0]
    assert best == {SPE, INTER, JIT} and math.exp(predicted - model.intercept) == pytest.approx(1.5 * 1.05 * 0.9 * 1.3,
                                                                                                rel=0.05)
    # one trial of the best at 0.4x (a load burst): Huber's weights keep the fit where it was
    burst = fit(seen + [(frozenset({SPE, INTER, JIT}), float(predicted) + math.log(0.4))], 0.03)
    assert burst.effect(SPE) == pytest.approx(model.effect(SPE), rel=0.03)
    assert ranked(burst)[0][0] == best


def test_an_interaction_no_trial_shows_stays_near_none_and_a_space_too_large_is_not_enumerated() -> None:
    seen = [(frozenset(), 0.0), (frozenset({SPE}), math.log(1.5)), (frozenset({JIT}), math.log(1.2)),
            (frozenset(), 0.0), (frozenset({SPE}), math.log(1.5)), (frozenset({JIT}), math.log(1.2))]
    model = fit(seen, 0.05)
    both = float(model.predict([{SPE, JIT}])[0] - model.intercept)
    assert both == pytest.approx(math.log(1.5 * 1.2), abs=0.03)  # additive where nothing says otherwise
    assert ranked(model, limit=3) == []  # 4 configurations


def modelled(truth: Callable[[TrialConfig, int], float], incumbent: TrialConfig, measured: list[TrialConfig], knobs: str) -> Tuner:
    """A tuner whose search measured `measured` (each twice) and left `incumbent`; then the model phase."""
    settings = TuneSettings(model="tiny", trials=40, storage=optuna.storages.InMemoryStorage(),  # type: ignore[arg-type]
                            steps=64, repeats=3, knobs=tuple(knobs.split(",")))
    tuner = Tuner(settings, run=Fake(truth))
    tuner.workers.start("cpu", None)
    try:
        for config in [tuner.base, *measured]:
            for again in ("", "#again"):
                tuner.measure(config, Phase.SWEEP if config != tuner.base else Phase.BASELINE, again)
        tuner.ledger.chain_add(incumbent, over=tuner.base)
        Model(tuner).run()
    finally:
        tuner.workers.stop()
    return tuner


def test_the_model_challenges_the_fits_argmax_that_a_bundle_lost_and_keeps_it_on_fresh_pairs() -> None:
    # the search ended on spe=64; inter_op_threads=1 (1.2x) was lost in a bundle beside jit_compile (0.7x): the
    # fit over every trial puts spe=64 inter_op_threads=1 ahead and fresh pairs keep it; jit stays out
    truth = effects({SPE: 1.8, INTER: 1.2, JIT: 0.7})
    incumbent = TrialConfig(steps_per_execution=64)
    measured = [TrialConfig(steps_per_execution=64), TrialConfig(inter_op_threads=1), TrialConfig(jit_compile=True),
                TrialConfig(steps_per_execution=64, inter_op_threads=1, jit_compile=True)]
    tuner = modelled(truth, incumbent, measured, "steps_per_execution,jit_compile,inter_op_threads")
    steps = [d for d in tuner.decisions() if d.purpose == Phase.MODEL]
    assert [(d.b_label, d.a_label) for d in steps] == [("steps_per_execution=64 inter_op_threads=1",
                                                        "steps_per_execution=64")]
    assert steps[0].verdict.is_faster() and len(steps[0].pairs) == 3
    assert tuner.ledger.incumbent() == incumbent.replace(inter_op_threads=1)
    # its pairs are trials of their own, of the model phase
    own = [t for t in tuner.study.get_trials() if f"#{steps[0].id}:" in t.user_attrs.get("config_key", "")]
    assert len(own) == 6 and {t.user_attrs["phase"] for t in own} == {Phase.MODEL}


def test_the_model_proposes_nothing_that_holds_changes_that_failed_together() -> None:
    # inter_op_threads=1 is 1.2x alone, but its trials beside spe=64 failed: the fit's best is that pair, and
    # the pair beside jit_compile next; neither is proposed, but spe=64 jit_compile=True, which holds no failed pair
    def truth(config: TrialConfig, call: int) -> float:
        if config.inter_op_threads == 1 and config.steps_per_execution == 64:
            return 0.0
        return effects({SPE: 1.8, INTER: 1.2, JIT: 1.15})(config, call)

    incumbent = TrialConfig(steps_per_execution=64)
    measured = [TrialConfig(steps_per_execution=64), TrialConfig(inter_op_threads=1), TrialConfig(jit_compile=True),
                TrialConfig(steps_per_execution=64, inter_op_threads=1)]
    tuner = modelled(truth, incumbent, measured, "steps_per_execution,jit_compile,inter_op_threads")
    steps = [(d.b_label, d.verdict) for d in tuner.decisions() if d.purpose == Phase.MODEL]
    assert steps == [("steps_per_execution=64 jit_compile=True", "faster")], steps
    assert tuner.ledger.incumbent() == incumbent.replace(jit_compile=True)


def test_the_model_challenges_nothing_where_the_incumbent_is_the_fits_argmax() -> None:
    truth = effects({SPE: 1.8, INTER: 1.2, JIT: 0.8})
    incumbent = TrialConfig(steps_per_execution=64, inter_op_threads=1)
    measured = [TrialConfig(steps_per_execution=64), TrialConfig(inter_op_threads=1), TrialConfig(jit_compile=True),
                incumbent]
    tuner = modelled(truth, incumbent, measured, "steps_per_execution,jit_compile,inter_op_threads")
    assert [d for d in tuner.decisions() if d.purpose == Phase.MODEL] == []
    assert tuner.ledger.incumbent() == incumbent


def test_a_fit_that_puts_its_argmax_less_than_the_threshold_ahead_proposes_nothing() -> None:
    gain = math.sqrt(MIN_PREDICTED)  # half the threshold, on the log scale
    truth = effects({SPE: 1.8, INTER: gain})
    incumbent = TrialConfig(steps_per_execution=64)
    measured = [TrialConfig(steps_per_execution=64), TrialConfig(inter_op_threads=1)]
    tuner = modelled(truth, incumbent, measured, "steps_per_execution,inter_op_threads")
    assert Model(tuner).proposal() is None
    assert [d for d in tuner.decisions() if d.purpose == Phase.MODEL] == []


def test_a_whole_tune_runs_the_model_phase_within_its_budget_and_keeps_what_the_fit_found() -> None:
    # jit_compile is 1.06x alone but 0.95x beside spe=64, so its screen (at or above BUNDLE_FLOOR) puts it in the
    # bundle: the steps before the model phase end on spe=64 with jit_compile and intra_op_threads=1 (neutral) beside
    # inter_op_threads=1 (1.12x) and data_autotune=False (1.06x); the fit over every trial puts the two wins on top
    # of spe=64 without the other two, and fresh pairs keep that
    truth = effects({SPE: 1.8, INTER: 1.12, JIT: 1.06, ("data_autotune", False): 1.06},
                    clash=(SPE, JIT), clash_factor=0.9)
    tuner, verdict = tune(Fake(truth), "steps_per_execution,jit_compile,inter_op_threads,data_autotune,intra_op_threads",
                          trials=40)
    steps = [d for d in tuner.decisions() if d.purpose == Phase.MODEL]
    assert [(d.b_label, d.verdict) for d in steps] == [
        ("steps_per_execution=64 inter_op_threads=1 data_autotune=False", "faster")]
    assert verdict["claimed"] and TrialConfig.from_dict(verdict["config"]).inter_op_threads == 1
    assert tuner.ledger.claimed() <= tuner.ledger.search_budget()
