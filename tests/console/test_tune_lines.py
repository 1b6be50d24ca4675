"""What `fitspeed tune` prints as trials finish, and which failure ends it: the baseline's on the user's input only."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from conftest import QUICK, fitspeed_in_process

from fitspeed.console.tune_lines import trial_line
from fitspeed.core.config import TrialConfig
from fitspeed.core.errors import UserError
from fitspeed.core.record import Status, TrialRecord, TrialSpec, new_record

BAD_DATA = "Expected `x` and `y` in 'd.npz' to have the same, non-zero length. Received: 3 and 2. Save matching arrays."


def record(config: TrialConfig, user_error: bool) -> TrialRecord:
    return new_record(TrialSpec(model="tiny", config=config), Status.FAILED, reason=BAD_DATA, user_error=user_error)


def test_the_baselines_failure_on_the_users_input_ends_the_command() -> None:
    with pytest.raises(UserError, match="non-zero length"):
        trial_line("baseline", record(TrialConfig(), user_error=True), TrialConfig())


def test_a_search_made_configuration_that_fails_on_the_users_input_is_a_failed_trial() -> None:
    # once, any such record ended `tune` (the tuner now refuses the combinations it knew of before they run)
    line = trial_line("sampler", record(TrialConfig(steps_per_execution=4), user_error=True), TrialConfig())
    assert line == "  sampler steps_per_execution=4: failed (" + BAD_DATA + ")"
    # a base set with --set is the baseline too
    base = TrialConfig(batch_size=64)
    with pytest.raises(UserError):
        trial_line("baseline", record(base, user_error=True), base)


def test_tune_on_data_the_model_cannot_take_stops_at_the_baseline_with_one_sentence(workdir: Path) -> None:
    np.savez(workdir / "d.npz", x=np.zeros((3, 16, 16, 3), "float32"), y=np.zeros(2, "int32"))
    result = fitspeed_in_process("tune", "tiny", "--data", "npz:d.npz", "--trials", "3", "--screen-only", *QUICK, cwd=workdir)
    assert result.returncode != 0 and "Traceback" not in result.stderr
    said = " ".join(result.stderr.split())
    assert "have the same, non-zero length" in said and "Received: 3 and 2" in said, said
    assert "sweep" not in said  # nothing ran after the baseline
