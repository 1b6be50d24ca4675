"""fitspeed.cli.workload: the workload options resolve once to a tagged `Workload`, and a trial is made from it."""

from __future__ import annotations

from pathlib import Path

import pytest

from fitspeed.cli.workload import WorkloadOptions
from fitspeed.console.workload import WorkloadKind
from fitspeed.core.config import TrialConfig
from fitspeed.core.errors import UserError
from fitspeed.measure import training_command


def test_a_model_reference_resolves_to_its_kind(tmp_path: Path) -> None:
    saved = tmp_path / "model.keras"
    saved.write_bytes(b"")
    kinds = {ref: WorkloadOptions(workload=ref).resolve().kind for ref in ("tiny", "userwork:small_model", str(saved))}
    assert kinds == {"tiny": WorkloadKind.BUILT_IN, "userwork:small_model": WorkloadKind.BUILDER,
                     str(saved): WorkloadKind.SAVED_MODEL}


def test_a_training_command_resolves_to_a_script_that_loads_its_own_data(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "train.py").write_text("print('trains')\n")
    workload = WorkloadOptions(workload="python", command=["train.py"]).resolve()
    assert workload.kind == WorkloadKind.SCRIPT and workload.is_script
    assert (workload.model, workload.data) == ("script:train.py", training_command.DATA)
    assert workload.script is not None and workload.spec().script == workload.script


def test_a_trial_puts_its_knobs_on_the_base_configuration() -> None:
    workload = WorkloadOptions(workload="tiny", data="synthetic", set_=["steps_per_execution=4"], steps=8, repeats=2,
                               seed=3, timeout=60.0, memory_limit="1GiB").resolve()
    assert workload.base == TrialConfig(steps_per_execution=4)
    spec = workload.spec(["jit_compile=True"])
    assert spec.config == TrialConfig(steps_per_execution=4, jit_compile=True)
    assert (spec.model, spec.data, spec.steps, spec.repeats, spec.seed, spec.timeout_s, spec.memory_limit_mb) == \
        ("tiny", "synthetic", 8, 2, 3, 60.0, 1024)


def test_the_first_wrong_option_is_the_one_reported() -> None:
    # the workload or command, --data, --set, the model: in that order, whichever command runs it
    with pytest.raises(UserError, match="Unknown data"):
        WorkloadOptions(workload="no-such-model", data="no_such_source", set_=["no_such_knob=1"]).resolve()
    with pytest.raises(UserError, match="Unknown knob"):
        WorkloadOptions(workload="no-such-model", set_=["no_such_knob=1"]).resolve()
    with pytest.raises(UserError, match="Unknown workload"):
        WorkloadOptions(workload="no-such-model").resolve()
