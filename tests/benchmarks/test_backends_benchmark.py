"""benchmarks/backends.py: its arms, and its guard verdict on fake guard runs (no trial runs here)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from conftest import load_script

from fitspeed.core.backends import backend_of
from fitspeed.core.record import Status, TrialRecord, new_record

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "backends.py"


def test_each_installed_backend_is_an_arm_alone_and_with_its_own_knobs() -> None:
    bench = load_script(SCRIPT)
    arms = bench.specs("tiny", 2)
    assert list(arms)[0] == "tensorflow"
    for backend in bench.backends():
        assert arms[backend].config.changed() == {"backend": backend}
        own = arms[f"{backend} + own knobs"].config
        assert own.backend == backend and set(own.changed()) - {"backend"}
        for knob in own.changed():  # only knobs the screen measures on top of that backend
            assert knob == "backend" or knob in backend_of(backend).own_knobs
    assert bench.specs("mnist_convnet.py", 2)["tensorflow"].script


def test_the_guard_verdict_follows_the_tuners_seed_rule(monkeypatch: pytest.MonkeyPatch) -> None:
    bench = load_script(SCRIPT)
    arms = bench.specs("tiny", 2)
    seen: list[tuple[str, int]] = []

    def fake(spec: Any) -> TrialRecord:
        seen.append((spec.config.backend, spec.seed))
        loss = {"tensorflow": 1.0, "jax": 0.9, "torch": 1.1}[spec.config.backend] + 0.01 * spec.seed
        return new_record(spec, Status.OK, metrics={"loss_curve": [2.0, loss], "val_loss": loss})

    monkeypatch.setattr(bench, "run_trial", fake)
    base = arms["tensorflow"]
    jax, torch = (replace(base, config=base.config.replace(backend=name)) for name in ("jax", "torch"))
    assert bench.guard_verdict(base, jax, {}, 10).startswith("passed: ")  # lower at every seed
    assert len(seen) == 10  # the first stage of 5 paired seeds: the gaps agree, so no more are needed
    seen.clear()
    verdict = bench.guard_verdict(base, torch, {}, 10)
    assert len(seen) == 10 and verdict.startswith("failed: ") and "over 5 paired seeds" in verdict
    assert bench.guard_verdict(base, torch, {}, 1).startswith("failed (on 1 seeds of the 5 the tuner's rule asks for)")
