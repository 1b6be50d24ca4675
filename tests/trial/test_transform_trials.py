"""The model rewrite inside real trials: user builders, saved .keras files and training scripts.

A trial with data_format=channels_first trains the user's own model rewritten, with
the same parameter count (not the 4,806-for-682 model that a global image format
built from a builder that fixes its own layout), or fails with one clean sentence
where the backend cannot run channels_first here (oneDNN off).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from conftest import FIXTURES, QUICK, child_env, fitspeed, json_out

from fitspeed.core.config import TrialConfig
from fitspeed.core.record import Status, TrialRecord, TrialSpec
from fitspeed.measure.runner import run_trial

CANNOT_RUN = "data_format=channels_first cannot run on this machine's backend"


def trial(model: str, cwd: Path, **knobs: Any) -> TrialRecord:
    spec = TrialSpec(model=model, steps=4, repeats=2, config=TrialConfig(batch_size=16, **knobs))
    return run_trial(spec, env=child_env(), cwd=cwd)


def ran_or_cannot(record: TrialRecord) -> bool:
    """True for an ok trial; False for the clean failure of a backend that runs no channels_first here."""
    if record.status == Status.OK:
        return True
    assert record.status == Status.FAILED and not record.user_error, (record.reason, record.stderr_tail)
    assert record.reason.startswith(CANNOT_RUN) and "NHWC" in record.reason, record.reason
    return False


def test_channels_first_on_a_user_builder_reports_the_same_parameters(tmp_path: Path) -> None:
    baseline = trial("imagework:resnet_block", tmp_path)
    assert baseline.status == Status.OK, baseline.reason
    assert "rewrite" not in baseline.extra  # the default knobs leave the model alone
    record = trial("imagework:resnet_block", tmp_path, data_format="channels_first", onednn=True)
    assert ran_or_cannot(record)  # oneDNN on: TensorFlow runs channels_first convolutions on any CPU
    assert record.metrics.other["params"] == baseline.metrics.other["params"] == 962
    assert record.extra["rewrite"]["params"] == {"before": 962, "after": 962}
    assert record.extra["rewrite"]["checks"][0]["max_abs_diff"] <= 1e-4


def test_channels_first_without_onednn_trains_or_fails_with_one_sentence(tmp_path: Path) -> None:
    """oneDNN off is an AVX2-only Zen 3's default: TensorFlow's CPU convolutions then take NHWC only."""
    record = trial("imagework:convnet", tmp_path, data_format="channels_first", onednn=False)
    if ran_or_cannot(record):  # a backend or machine that can: the rewrite was checked
        assert record.extra["rewrite"]["checks"][0]["max_abs_diff"] <= 1e-4


def test_a_mixed_policy_trial_keeps_the_output_float32(tmp_path: Path) -> None:
    """The guard's train-mode run records the output dtype; a policy-following softmax is rewritten to float32."""
    spec = TrialSpec(model="imagework:follows_policy", steps=4, repeats=1, mode="train",
                     config=TrialConfig(precision="mixed_bfloat16", batch_size=16))
    record = run_trial(spec, env=child_env(), cwd=tmp_path)
    assert record.status == Status.OK, record.reason
    assert record.metrics.other["output_dtype"] == "float32"
    assert [c["change"] for c in record.extra["rewrite"]["changes"] if c["class"] == "Dense"] == [
        "dtype policy mixed_bfloat16 → float32"]


def save(builder: str, path: Path) -> None:
    code = f"import imagework; imagework.{builder}().save({str(path)!r})"
    result = subprocess.run([sys.executable, "-c", code], env=child_env(), capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]


def test_a_saved_keras_file_is_a_model_rebuilt_fresh_for_each_trial(workdir: Path) -> None:
    save("flatten_dense", workdir / "model.keras")
    record = TrialRecord.from_dict(json_out(fitspeed("measure", "model.keras", *QUICK, "--set",
                                                     "data_format=channels_first", "--set", "onednn=true", "--json",
                                                     cwd=workdir)))
    assert ran_or_cannot(record)
    assert record.spec.model == "model.keras" and record.metrics.other["params"] == 2_754
    assert any("kernel rows permuted" in c["change"] for c in record.extra["rewrite"]["changes"])
    missing = fitspeed("measure", "nothere.keras", cwd=workdir)
    assert missing.returncode == 2 and "does not exist" in " ".join(missing.stderr.split())


@pytest.mark.slow
def test_a_training_script_gets_the_same_rewrite(workdir: Path) -> None:
    script = str(FIXTURES / "scripts" / "conv_train.py")
    record = TrialRecord.from_dict(json_out(fitspeed("measure", *QUICK, "--set", "data_format=channels_first",
                                                     "--set", "onednn=true", "--json", "--", sys.executable, script,
                                                     cwd=workdir)))
    assert ran_or_cannot(record)
    assert record.metrics.other["params"] == record.extra["rewrite"]["params"]["before"]
    assert {c["class"] for c in record.extra["rewrite"]["changes"]} >= {"Permute", "Conv2D", "BatchNormalization", "Dense"}
    assert not (workdir / "conv_train.keras").exists()  # the trial ends at the timed fit()
