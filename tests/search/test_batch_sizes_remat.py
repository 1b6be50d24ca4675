"""The batch-size sweep tries remat on a size that ran out of memory, and goes on with it where it fit."""

from __future__ import annotations

import dataclasses
import io
import re
from pathlib import Path
from typing import Any

from rich.console import Console

from fitspeed.core.config import TrialConfig
from fitspeed.core.errors import KnobError
from fitspeed.core.record import Status, TrialRecord, TrialSpec, new_record
from fitspeed.report.batch_sweep import sentence
from fitspeed.search.batch_figures import figures as sweep
from fitspeed.search.batch_sizes import BatchSizes
from fitspeed.search.settings import TuneSettings


class MemoryCapped:
    """A tuner whose trials run out of memory past a cap on activations: batch × per-sample MiB, less with remat.

    Its trials are the sweep's only view of memory, as real ones are: a record's status.
    """

    def __init__(self, sizes: tuple[int, ...], cap_mb: float, per_sample_mb: float, remat_share: float,
                 base: TrialConfig | None = None) -> None:
        self.base = base or TrialConfig()
        self.settings = TuneSettings(model="mlp", base=self.base, batch_sizes=sizes)
        self.cap_mb, self.per_sample_mb, self.remat_share = cap_mb, per_sample_mb, remat_share
        self.measured: list[tuple[int, str]] = []
        self.refused: list[str] = []

    def config_of(self, knob_values: dict[str, Any]) -> TrialConfig | None:
        try:
            return self.base.replace(**knob_values)
        except KnobError as error:
            self.refused.append(str(error))
            return None

    def measure(self, config: TrialConfig, phase: str, budgeted: bool = True) -> TrialRecord:
        assert phase == "batch_size" and not budgeted
        self.measured.append((config.batch_size, config.remat))
        return new_record(TrialSpec(model="mlp", config=config), self.status(config.batch_size, config.remat))

    def status(self, size: int, remat: str) -> Status:
        share = self.remat_share if remat == "full" else 1.0
        return Status.OK if size * self.per_sample_mb * share <= self.cap_mb else Status.OOM

    def rows(self) -> list[dict[str, Any]]:
        """The study summary's batch_sizes rows for what was measured."""
        return [{"changes": {"batch_size": size} | ({"remat": remat} if remat != "off" else {}),
                 "status": self.status(size, remat), "samples_per_s": None, "ratio": None}
                for size, remat in self.measured]


def test_a_size_out_of_memory_is_measured_again_with_remat_and_the_sweep_goes_on_with_it() -> None:
    # 1 MiB a sample, half of it with remat, a cap of 300 MiB: 256 fits, 512 fits with remat only, 1024 never
    tuner = MemoryCapped((128, 256, 512, 1024), cap_mb=300, per_sample_mb=1.0, remat_share=0.5,
                         base=TrialConfig(backend="jax"))
    BatchSizes(tuner).run()  # type: ignore[arg-type]
    measured = tuner.measured
    assert measured[:5] == [(128, "off"), (256, "off"), (512, "off"), (512, "full"), (1024, "full")]
    assert (1024, "off") not in measured  # a size after one that needed remat starts with it
    assert all(remat == "full" for size, remat in measured if size > 512)  # the bisection too
    figures = sweep(tuner.rows(), tuner.base.to_dict())
    assert figures["needed_remat"] == [512] + [s for s in figures["needed_remat"] if s > 512]
    assert figures["largest_without_remat"] == 256
    assert 512 <= figures["largest_fitting"] <= 600 < figures["first_oom"] <= 1024
    text = sentence(figures)
    assert text and "with remat" in text and "256 without" in text and "even with it" in text


def test_a_backend_that_cannot_do_remat_is_noted_once_and_the_sweep_bisects_as_before() -> None:
    tuner = MemoryCapped((256, 1024), cap_mb=300, per_sample_mb=1.0, remat_share=0.5)  # TensorFlow
    BatchSizes(tuner).run()  # type: ignore[arg-type]
    assert all(remat == "off" for _, remat in tuner.measured)
    assert len(tuner.refused) == 1 and "remat='full'" in tuner.refused[0] and "tf.recompute_grad" in tuner.refused[0]
    figures = sweep(tuner.rows(), tuner.base.to_dict())
    assert figures["needed_remat"] == [] and 256 <= figures["largest_fitting"] < figures["first_oom"] <= 1024
    assert "remat" not in (sentence(figures) or "remat")


def test_remat_that_saves_too_little_stops_the_sweep_at_the_first_out_of_memory() -> None:
    tuner = MemoryCapped((256, 512), cap_mb=300, per_sample_mb=1.0, remat_share=0.9, base=TrialConfig(backend="jax"))
    BatchSizes(tuner).run()  # type: ignore[arg-type]
    assert tuner.measured[:3] == [(256, "off"), (512, "off"), (512, "full")]
    figures = sweep(tuner.rows(), tuner.base.to_dict())
    assert figures["first_oom"] and figures["largest_fitting"] < figures["first_oom"]


def test_the_summary_the_tables_and_the_page_show_which_sizes_needed_remat(tmp_path: Path) -> None:
    from test_summary import trial

    from fitspeed.console.tune_tables import print_tune
    from fitspeed.report.html import write
    from fitspeed.search.summary import study_summary

    base = TrialConfig(backend="jax")
    data = {
        "study": "s", "meta": {"model": "mlp", "base": base.to_dict(), "min_gain": 0.05},
        "trials": [trial(base, "baseline", speed=100.0),
                   trial(base.replace(batch_size=256), "batch_size", speed=700.0),
                   trial(base.replace(batch_size=512), "batch_size", status=Status.OOM, reason="over the limit"),
                   trial(base.replace(batch_size=512, remat="full"), "batch_size", speed=600.0),
                   trial(base.replace(batch_size=1024, remat="full"), "batch_size", status=Status.OOM, reason="over")],
        "guards": {}, "verification": None,
    }
    summary = study_summary(data)
    # `show --json` is the summary: its figures count remat too (512 ran out of memory without it, and fit with it)
    batch = summary.batch_sizes
    assert (batch["largest_fitting"], batch["first_oom"], batch["recommended_max"]) == (512, 1024, 456)
    assert batch["needed_remat"] == [512] and batch["largest_without_remat"] == 256
    console = Console(file=io.StringIO(), width=120, color_system=None)
    print_tune(console, summary)
    text = console.file.getvalue()  # type: ignore[attr-defined]
    assert re.search(r"512 +│ +off +│ +oom", text) and re.search(r"512 +│ +full +│ +ok +│ +600", text), text
    assert re.search(r"256 +│ +off +│ +ok", text), text
    assert ("largest batch that fit: 512, with remat (keras.RematScope mode full: 256 without); out of memory at "
            "1024 even with it. With a margin, use at most 456.") in " ".join(text.split())
    page = write(dataclasses.replace(summary, read_notes=()), tmp_path).index.read_text()
    assert "<th>remat</th>" in page and '<td class="num">512</td><td>full</td><td>ok</td>' in page
    assert "Largest batch that fit: 512, with remat" in page
