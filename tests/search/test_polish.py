"""The polish's last step: a change the screen put under the bundle's floor."""

from __future__ import annotations

import optuna
import pytest
from test_decisions import effects, polished

from fitspeed.core.config import TrialConfig
from fitspeed.machine import environment
from fitspeed.search.tuner import Tuner


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
    steps = [(d["b_label"], d["verdict"]) for d in tuner.decisions() if d["purpose"] == "polish"]
    # the best-screened of them, and only that one
    assert steps == [("steps_per_execution=64 inter_op_threads=1", "faster")], steps
    assert tuner.ledger.incumbent() == incumbent.replace(inter_op_threads=1)


def test_the_polish_does_not_try_again_a_change_under_the_floor_that_a_phase_already_tried() -> None:
    truth = effects({("steps_per_execution", 64): 1.5, ("inter_op_threads", 1): 0.85})
    incumbent = TrialConfig(steps_per_execution=64)
    promising = [(TrialConfig(inter_op_threads=1), 0.85)]

    def raced(tuner: Tuner) -> None:
        tuner._challenge(tuner.base, TrialConfig(inter_op_threads=1), "combine")

    tuner = polished(truth, incumbent, promising, "steps_per_execution,inter_op_threads", before=raced)
    assert [d for d in tuner.decisions() if d["purpose"] == "polish"] == []
