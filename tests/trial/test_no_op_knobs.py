"""A knob that would change nothing in the model is skipped with its reason, never timed as a change."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from conftest import FIXTURES, QUICK, fitspeed


def test_channels_first_on_a_dense_only_script_is_refused_with_its_reason(tmp_path: Path) -> None:
    # issue 25, item 9: it was measured at 1.37x, "numerics not checked", on a model with no layer to rewrite
    result = fitspeed("measure", *QUICK, "--set", "data_format=channels_first", "--json", "--",
                      sys.executable, str(FIXTURES / "scripts" / "long_train.py"), "--epochs", "2",
                      "--out", str(tmp_path / "m.keras"), cwd=tmp_path)
    record = json.loads(result.stdout[result.stdout.index("{"):])
    assert record["status"] == "failed", record.get("reason")
    assert "data_format=channels_first changes nothing in this model: none of its layers takes a data_format" \
        in record["reason"]
    assert not (record.get("metrics") or {}).get("samples_per_s")


def test_channels_first_on_a_builders_dense_model_is_refused_too(tmp_path: Path) -> None:
    from fitspeed.core.config import TrialConfig
    from fitspeed.trial.transform import Refused
    from fitspeed.trial.transform.rewrite import for_trial

    import keras
    import pytest

    model = keras.Sequential([keras.Input((8,)), keras.layers.Dense(4), keras.layers.Dense(2)])
    with pytest.raises(Refused, match="none of its layers takes a data_format"):
        for_trial(model, TrialConfig(data_format="channels_first"))
    conv = keras.Sequential([keras.Input((8, 8, 3)), keras.layers.Conv2D(4, 3, data_format="channels_first")])
    with pytest.raises(Refused, match="are channels_first already"):
        for_trial(conv, TrialConfig(data_format="channels_first"))
