"""doctor's top fix is confirmed in interleaved pairs before it is called a gain (a fake runner)."""

from __future__ import annotations

from typing import Any

from fitspeed.core.config import TrialConfig
from fitspeed.core.record import TrialSpec, new_record
from fitspeed.measure.doctor import diagnose

EPOCHS = {"boundary_s": [0.0], "end_s": 0.0, "lost_s": 0.0, "fit_s": 1.0, "lost_share": 0.0, "step_s": 0.01,
          "steps_per_repeat": 10}


class Fake:
    """An input-bound PyDataset workload: `speed(config, nth time trial)` samples/s."""

    def __init__(self, speed: Any) -> None:
        self.speed = speed
        self.timed = 0

    def __call__(self, spec: TrialSpec) -> dict[str, Any]:
        metrics: dict[str, Any] = {"data_kind": "pydataset"}
        if spec.mode == "input":
            metrics["ms_per_batch"] = 20.0
        elif spec.mode == "compute":
            metrics["ms_per_step"] = 10.0
        elif spec.mode == "epochs":
            metrics.update(EPOCHS)
        else:
            self.timed += 1
            value = self.speed(spec.config, self.timed)
            metrics.update(samples_per_s={"median": value}, ms_per_step=32_000 / value)
        return new_record(spec, "ok", metrics=metrics)


def run(fake: Fake) -> dict[str, Any]:
    return diagnose("tiny", "pyloader", TrialConfig(), steps=8, repeats=1, pairs=5, run=fake).summary()


def test_a_real_gain_is_confirmed_in_pairs() -> None:
    jitter = (1.0, 1.02, 0.99, 1.01)
    fake = Fake(lambda config, n: (2000.0 if config.use_multiprocessing is True else 1000.0) * jitter[n % 4])
    summary = run(fake)
    top = summary["recommendations"][0]
    assert top["change"] == {"workers": 2, "use_multiprocessing": True}
    assert top["confirmed"]["verdict"] == "faster" and top["confirmed"]["low"] > 1.5
    assert 2 <= top["confirmed"]["pairs"] <= 5 and len(top["confirmed"]["figures"]) == top["confirmed"]["pairs"]


def test_a_fix_that_won_one_trial_by_luck_is_not_recommended() -> None:
    # worker threads came in at 1.4x in their one trial; in pairs they are no faster
    def speed(config: TrialConfig, n: int) -> float:
        if config.workers and config.use_multiprocessing is False and n == 2:
            return 1400.0
        return 1000.0 * (1.0, 1.03, 0.98, 1.01, 0.97)[n % 5]

    summary = run(Fake(speed))
    assert summary["recommendations"] == []
    lucky = next(f for f in summary["no_gain"] if f["change"].get("use_multiprocessing") is False)
    assert lucky["gain"] > 1.3 and lucky["confirmed"]["verdict"] != "faster"
