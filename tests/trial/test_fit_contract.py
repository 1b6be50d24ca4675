"""`fitspeed run` keeps every fit() argument's meaning (issue 36, item 1): the argument matrix.

One script (`fixtures/scripts/fit_contract.py`) makes a dozen fit() calls over
every data kind (arrays, a dict of arrays, a shuffled and an ordered
tf.data.Dataset, a PyDataset, a generator) and every fit() argument, and
writes down what each call did: the sample ids the loss saw in order, with
their weights; the epochs run; the batch hooks' calls; the history's keys.
It runs once without fitspeed and once under `fitspeed run` for each input
knob, and the two records must match call for call.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from conftest import built_once, fitspeed

SCRIPT = Path(__file__).parent.parent / "fixtures" / "scripts" / "fit_contract.py"
KINDS = "arrays,dict,dataset,ordered_dataset,pydataset,generator"
ARGUMENTS = {"x", "y", "batch_size", "epochs", "verbose", "callbacks", "validation_split", "validation_data",
             "shuffle", "class_weight", "sample_weight", "initial_epoch", "steps_per_epoch", "validation_steps",
             "validation_batch_size", "validation_freq"}
# each input knob on the data it applies to, and beside the kinds it does not
KNOBS = {
    "data_autotune": {"data_autotune": False},
    "dataset_knobs": {"prefetch": 2, "data_deterministic": False, "data_autotune": False},
    "pydataset_knobs": {"workers": 2, "max_queue_size": 4},
}


def _record(folder: Path, name: str, knobs: dict[str, Any] | None) -> tuple[dict[str, Any], str]:
    out = folder / f"{name}.json"
    command = ["--", sys.executable, str(SCRIPT), str(out), KINDS]
    if knobs is None:
        done = subprocess.run(command[1:], cwd=folder, capture_output=True, text=True, timeout=600)
    else:
        (folder / f"{name}-best.json").write_text(json.dumps(knobs))
        done = fitspeed("run", f"{name}-best.json", *command, cwd=folder)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(out.read_text()), done.stderr


@pytest.fixture(scope="module")
def plain(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The script's record without fitspeed, made once for the run (both workers read it)."""
    def build(folder: Path) -> None:
        _record(folder, "plain", None)

    return json.loads((built_once(tmp_path_factory, "fit-contract-plain", build) / "plain.json").read_text())


def test_the_matrix_covers_every_fit_argument_and_data_kind(plain: dict[str, Any]) -> None:
    given = {argument for calls in plain.values() for call in calls for argument in call["call"]}
    given |= {"x", "y", "batch_size", "callbacks"}  # every call passes these (the generator's y is in x)
    assert given == ARGUMENTS
    assert set(plain) == set(KINDS.split(","))
    # the record can tell calls apart: shuffled and ordered epochs differ, weights show, epochs count
    arrays = plain["arrays"]
    assert arrays[0]["seen"][0][0][:4] == [0.0, 1.0, 2.0, 3.0] and arrays[1]["seen"][0][0] != arrays[0]["seen"][0][0]
    assert arrays[0]["seen"][0][1][1] == pytest.approx(1.01) and arrays[3]["seen"][0][1][:2] == [1.0, 3.0]
    assert arrays[6]["epochs"] == [1, 2] and arrays[4]["history"] == ["loss", "val_loss"]


@pytest.mark.parametrize("knobs", list(KNOBS))
def test_run_keeps_every_argument_on_every_kind_of_data(knobs: str, plain: dict[str, Any],
                                                        tmp_path: Path) -> None:
    ran, stderr = _record(tmp_path, knobs, KNOBS[knobs])
    for kind, calls in plain.items():
        for before, after in zip(calls, ran[kind], strict=True):
            assert after == before, (kind, before["call"])
    # a knob that does not apply to what fit() was given is said, once, in one line
    notes = [line for line in stderr.splitlines() if line.startswith("fitspeed:") and "not applied" in line]
    if knobs == "data_autotune":
        assert any("data_autotune=False is not applied" in line and "fit() was given generator" in line
                   for line in notes), stderr
    if knobs == "dataset_knobs":
        assert any("data_deterministic=false is not applied" in line and "in order" in line for line in notes)
    assert len(notes) == len(set(notes))


def test_run_warns_when_steps_per_execution_changes_a_batch_callbacks_rhythm(plain: dict[str, Any],
                                                                            tmp_path: Path) -> None:
    ran, stderr = _record(tmp_path, "spe", {"steps_per_execution": 4})
    warned = [line for line in stderr.splitlines() if "calls batch hooks once every 4 batches" in line]
    assert warned == ["fitspeed: steps_per_execution=4 calls batch hooks once every 4 batches: Hooks "
                      "(on_train_batch_end) will run 4x less often. Tune with the script as it is (fitspeed caps "
                      "steps_per_execution for batch callbacks), or drop steps_per_execution from best.json."]
    before, after = plain["arrays"][0], ran["arrays"][0]
    assert after["seen"] == before["seen"] and after["epochs"] == before["epochs"]
    assert (before["batch_calls"], after["batch_calls"]) == (24, 6)


def test_array_autotune_sets_the_option_on_the_pipeline_keras_builds() -> None:
    import numpy as np
    from keras.src.trainers.data_adapters.array_data_adapter import ArrayDataAdapter

    from fitspeed.trial.data import pipeline

    def built() -> bool | None:  # None: the option is unset, and tf.data autotunes
        adapter = ArrayDataAdapter(np.ones((8, 2)), np.ones((8, 1)), sample_weight=np.ones(8), batch_size=4)
        return adapter.get_tf_dataset().options().autotune.enabled  # type: ignore[no-any-return]

    with pipeline.array_autotune(False):
        assert built() is False
    assert built() is None  # put back after the fit
    with pipeline.array_autotune(True):
        assert built() is None


@pytest.mark.parametrize("kind", ["dict", "arrays"])
def test_a_trial_times_the_scripts_fit_with_its_weights_and_a_dict_of_arrays(kind: str, tmp_path: Path) -> None:
    # the trial that measured data_autotune=false must feed what `run` feeds: the sample weights and the
    # shuffle the script gave, and a dict of arrays as Keras takes it
    done = fitspeed("measure", "--set", "data_autotune=false", "--steps", "4", "--repeats", "2", "--json",
                    "--results", str(tmp_path / "r.jsonl"), "--", sys.executable, str(SCRIPT),
                    str(tmp_path / "out.json"), kind, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    record = json.loads(done.stdout[done.stdout.index("{"):])
    assert record["status"] == "ok", record.get("reason")
    assert record["metrics"]["data_kind"] == "arrays"
    assert record["metrics"]["batch_callbacks"] == ["Hooks (on_train_batch_end)"]
