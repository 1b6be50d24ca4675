"""benchmarks/search_diagnosis.py: each miss put under its cause, on a known ground truth."""

from __future__ import annotations

from pathlib import Path
from types import ModuleType

import pytest
from conftest import load_script

from fitspeed.core.config import TrialConfig
from fitspeed.machine import environment
from fitspeed.search.decision import Decision

ROOT = Path(__file__).parents[2] / "benchmarks"


@pytest.fixture(scope="module")
def diagnosis() -> ModuleType:
    load_script(ROOT / "search_simulation.py")
    return load_script(ROOT / "search_diagnosis.py")


def test_each_miss_goes_under_the_first_cause_that_applies(diagnosis: ModuleType) -> None:
    # `interaction`: one inter-op thread helps only beside steps_per_execution=64; the best holds both
    sim = diagnosis.sim
    scenario = next(s for s in sim.SCENARIOS if s.name == "interaction")
    best = TrialConfig(steps_per_execution=64, inter_op_threads=1)
    spe = TrialConfig(steps_per_execution=64)
    # the decisions as the tuner hands them over (`Tuner.decisions`): typed, not the stored dicts
    lost = [Decision.from_dict({"id": "b1", "purpose": "bundle", "a": spe.to_dict(), "b": best.to_dict()})]
    assert diagnosis.cause(scenario, best, spe, spe, False, lost, []) == "no claim"
    assert diagnosis.cause(scenario, best, best, spe, True, [], []) == "lean"
    assert diagnosis.cause(scenario, best, spe, spe, True, lost, []) == "decided and lost"
    screened = [TrialConfig(inter_op_threads=1).to_dict()]
    assert diagnosis.cause(scenario, best, spe, spe, True, [], screened) == "never decided"
    assert diagnosis.cause(scenario, best, spe, spe, True, [], []) == "never measured"
    # a lean decision or the verification is no step of the search
    leaned = [Decision.from_dict({"id": "l1", "purpose": "lean", "a": spe.to_dict(), "b": best.to_dict()})]
    assert diagnosis.cause(scenario, best, spe, spe, True, leaned, []) == "never measured"


def test_one_world_end_to_end(diagnosis: ModuleType, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(environment, "nvidia_gpus", lambda: ([], None))
    out = diagnosis.diagnose(range(3_000_000, 3_000_001), trials=25, cv=0.10)
    row = out["rows"][0]
    assert out["worlds"] == 1 and row["seed"] == 3_000_000
    assert row["trials"]["every"] >= row["trials"]["search"] >= row["trials"]["budgeted"] > 0
    assert (row["cause"] is None) == (out["right"] == out["helps"])


def test_worlds_that_miss_for_every_kind_of_cause_run_through_cause(diagnosis: ModuleType,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    # at the report's budget, six development worlds: misses whose cause is found past "no claim" (the branches
    # that read the tuner's typed decisions and the measured configurations), so a script that rots there fails here
    monkeypatch.setattr(environment, "nvidia_gpus", lambda: ([], None))
    out = diagnosis.diagnose(range(3_000_000, 3_000_006), trials=40, cv=0.10)
    causes = [row["cause"] for row in out["rows"]]
    known = {None, "no claim", "lean", "decided and lost", "never decided", "never measured", "hurt or wrong value"}
    assert set(causes) <= known, causes
    assert set(causes) - {None, "no claim"}, causes
    assert sum(out["causes"].values()) == sum(c is not None for c in causes)
