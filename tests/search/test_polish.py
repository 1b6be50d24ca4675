"""The polish's last step (a change the screen put under the bundle's floor) and changes that failed the guard."""

from __future__ import annotations


import optuna
import pytest
from test_decisions import HeldOut, effects, polished

from fitspeed.core.config import TrialConfig
from fitspeed.core.record import Status, TrialRecord, TrialSpec, new_record
from fitspeed.core.sequential import step
from fitspeed.machine import environment
from fitspeed.search.combination import Combination
from fitspeed.search.decider import combine_design
from fitspeed.search.polish import Polish
from fitspeed.search.sampler import Sampler
from fitspeed.search.tuner import Tuner, TuneSettings


@pytest.fixture(autouse=True)
def no_gpu(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(environment, "nvidia_gpus", lambda: ([], None))
    optuna.logging.set_verbosity(optuna.logging.ERROR)


def test_the_polish_tries_a_change_that_screened_under_the_floor_and_was_never_tried() -> None:
    # inter_op_threads=1 helps (1.25x) only beside steps_per_execution=64 and screened 0.85x alone: no phase
    # tried it, so the polish puts it on top of the final incumbent, alone, and keeps it
    def truth(config: TrialConfig, call: int) -> float:
        base = effects({("steps_per_execution", 64): 1.5, ("intra_op_threads", 1): 0.8})(config, call)
        return base * (1.25 if config.inter_op_threads == 1 and config.steps_per_execution == 64 else 1.0)

    incumbent = TrialConfig(steps_per_execution=64)
    promising = [(TrialConfig(inter_op_threads=1), 0.85), (TrialConfig(intra_op_threads=1), 0.8)]  # best first
    tuner = polished(truth, incumbent, promising, "steps_per_execution,intra_op_threads,inter_op_threads")
    steps = [(d.b_label, d.verdict) for d in tuner.decisions() if d.purpose == "polish"]
    # the best-screened of them, and only that one
    assert steps == [("steps_per_execution=64 inter_op_threads=1", "faster")], steps
    assert tuner.ledger.incumbent() == incumbent.replace(inter_op_threads=1)


def test_the_polish_does_not_try_again_a_change_under_the_floor_that_a_phase_already_tried() -> None:
    truth = effects({("steps_per_execution", 64): 1.5, ("inter_op_threads", 1): 0.85})
    incumbent = TrialConfig(steps_per_execution=64)
    promising = [(TrialConfig(inter_op_threads=1), 0.85)]

    def raced(tuner: Tuner) -> None:
        tuner.challenge(tuner.base, TrialConfig(inter_op_threads=1), "combine")

    tuner = polished(truth, incumbent, promising, "steps_per_execution,inter_op_threads", before=raced)
    assert [d for d in tuner.decisions() if d.purpose == "polish"] == []


class Diverging(HeldOut):
    """mixed_float16's loss is not finite in the guard's runs; every other configuration learns as the baseline."""

    def __call__(self, spec: TrialSpec) -> TrialRecord:
        if spec.mode == "train" and spec.config.precision == "mixed_float16":
            self.calls.append(spec)
            return new_record(spec, Status.OK, metrics={"loss_curve": [2.0, float("nan")]})
        return super().__call__(spec)


def test_a_bundle_that_fails_the_guard_is_decided_again_without_its_numerics_change() -> None:
    # mixed_float16 (1.5x) diverges; channels_first (1.1x, a numerics change too) and inter_op_threads=1
    # (1.1x) are fine: the bundle with all three is faster but fails the guard, so the next step leaves out
    # mixed_float16 (never the smallest), and the polish does not put it back
    truth = effects({("steps_per_execution", 64): 1.5, ("precision", "mixed_float16"): 1.5,
                     ("data_format", "channels_first"): 1.1, ("inter_op_threads", 1): 1.1})
    fake = Diverging(truth, lambda config, seed: 0.5)
    settings = TuneSettings(model="tiny", trials=60, storage=optuna.storages.InMemoryStorage(),  # type: ignore[arg-type]
                            steps=64, repeats=3, knobs=("precision", "data_format", "inter_op_threads"))
    tuner = Tuner(settings, run=fake)
    tuner.workers.start("cpu", None)
    try:
        tuner.measure(tuner.base, "baseline")
        waiting = [TrialConfig(precision="mixed_float16"), TrialConfig(data_format="channels_first"),
                   TrialConfig(inter_op_threads=1)]
        screened = {waiting[0]: 1.5, waiting[1]: 1.1, waiting[2]: 1.1}
        combination = Combination(tuner)
        # the joint estimate ranks mixed_float16 first: its bundle fails the guard
        combination._factorial = lambda incumbent, members: [0.4, 0.1, 0.05]  # type: ignore[method-assign]
        # the first bundle holds the three: mixed_float16 fails the guard in it and in the joint step after it
        incumbent, _ = combination._joint(tuner.base, waiting, screened)
        assert tuner.ledger.rejected() == {("precision", "mixed_float16")}
        # nor does the polish put it back on top of the incumbent
        assert Polish(tuner).members(incumbent, [(waiting[0], 1.5), (TrialConfig(jit_compile=True), 1.0)]) \
            == [TrialConfig(jit_compile=True)]
        # nor does the sampler measure a configuration that holds it
        Sampler(tuner).run()
        sampled = [t.user_attrs["config"] for t in tuner.study.get_trials() if t.user_attrs.get("phase") == "sampler"]
        assert sampled and all(c["precision"] != "mixed_float16" for c in sampled)
    finally:
        tuner.workers.stop()
    bundles = [d.b_label for d in tuner.decisions() if d.purpose in ("bundle", "combine")]
    assert bundles == ["precision=mixed_float16 data_format=channels_first inter_op_threads=1",
                       "data_format=channels_first inter_op_threads=1"], bundles
    assert incumbent == TrialConfig(data_format="channels_first", inter_op_threads=1)


def test_a_challenger_the_budget_cut_short_while_it_led_is_decided_first_by_the_polish() -> None:
    # the sampler found steps_per_execution=64 with inter_op_threads=1 (1.25x on top of the incumbent) and its
    # challenge ran out of budget after one pair at 1.10x; the polish decides it first, on fresh pairs, and keeps it
    def truth(config: TrialConfig, call: int) -> float:
        base = effects({("steps_per_execution", 64): 1.5})(config, call)
        return base * (1.25 if config.inter_op_threads == 1 and config.steps_per_execution == 64 else 1.0)

    incumbent = TrialConfig(steps_per_execution=64)
    challenger = incumbent.replace(inter_op_threads=1)

    def cut_short(tuner: Tuner) -> None:
        design = combine_design(5, 0.05)
        tuner.decider.store("sampler", incumbent, challenger, [(1500.0, 1650.0)], step([1.1], design, None),
                            design, why="the budget ran out")

    tuner = polished(truth, incumbent, [], "steps_per_execution,inter_op_threads", before=cut_short)
    steps = [(d.b_label, d.verdict, len(d.pairs)) for d in tuner.decisions() if d.purpose == "polish"]
    assert steps and steps[0][:2] == (challenger.label(), "faster") and steps[0][2] >= 2, steps
    assert tuner.ledger.incumbent() == challenger
