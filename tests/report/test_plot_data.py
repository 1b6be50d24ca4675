"""The report's data, not its pixels: each plot's series from a summary, and results files as studies."""

from __future__ import annotations

from typing import Any

import pytest

from fitspeed.core.config import TrialConfig
from fitspeed.core.record import Status, TrialSpec, new_record
from fitspeed.core.study_summary import StudySummary
from fitspeed.report import plot_data
from fitspeed.core.config import config_key
from fitspeed.search.summary import study_summary


def trial(config: TrialConfig, phase: str, speed: float | None = 100.0, status: Status = Status.OK,
          compile_s: float = 1.0, curve: list[float] | None = None) -> dict[str, Any]:
    metrics = None
    if status == Status.OK:
        metrics = {"samples_per_s": {"median": speed}, "compile_s": compile_s, "ms_per_step": 3.2,
                   "jit_compile_resolved": config.jit_compile is True, "loss_curve": curve or [2.0, 1.5]}
    record = new_record(TrialSpec(model="tiny", config=config), status, reason=None if status == Status.OK else "boom",
                          metrics=metrics)
    return {"number": 0, "phase": phase, "config": config.to_dict(), "record": record}


BASE = TrialConfig()
SPE = TrialConfig(steps_per_execution=16)
THREADS = TrialConfig(intra_op_threads=1)
BOTH = TrialConfig(steps_per_execution=16, intra_op_threads=1)
BF16 = TrialConfig(precision="mixed_bfloat16")
XLA_SPE = TrialConfig(steps_per_execution=16, jit_compile=True)


def study(verification: dict[str, Any] | None, *extra: dict[str, Any]) -> dict[str, Any]:
    return {
        "study": "s",
        "meta": {"model": "tiny", "data": None, "base": BASE.to_dict(), "min_gain": 0.05},
        "trials": [
            trial(BASE, "baseline", 100.0, curve=[2.3, 1.9, 1.4]),
            trial(SPE, "sweep", 150.0, compile_s=2.0),
            trial(THREADS, "sweep", 110.0),
            trial(BF16, "sweep", 120.0),
            trial(TrialConfig(batch_size=256), "batch_size", 400.0),
            trial(TrialConfig(batch_size=4096), "batch_size", None, status=Status.OOM),
            trial(XLA_SPE, "sample", 90.0, compile_s=5.0),
            *extra,
        ],
        "guards": {config_key(BF16): {"ok": False, "reason": "final loss 2.1 is 40% away",
                                      "baseline_curve": [2.3, 1.6], "curve": [2.3, 2.1]}},
        "verification": verification,
    }


VERIFIED = {"config": BOTH.to_dict(), "claimed": True, "verdict": "1.62× faster",
            "estimate": {"median": 1.62, "ci_low": 1.4, "ci_high": 1.8, "confidence": 0.95, "ratios": [1.6, 1.64]}}


def test_time_bars_baseline_first_then_fastest_with_percent_of_baseline_time() -> None:
    summary = study_summary(study(VERIFIED, trial(BOTH, "combine", 170.0)))
    bars = plot_data.time_bars(summary)
    assert bars[0]["label"] == "baseline: defaults" and bars[0]["baseline"] and bars[0]["percent"] == pytest.approx(100.0)
    assert bars[0]["seconds"] == pytest.approx(100.0)  # 10,000 samples at 100 samples/s
    assert [b["label"] for b in bars[1:3]] == ["batch_size=256", "steps_per_execution=16 intra_op_threads=1"]
    combined = bars[2]
    assert combined["best"] and combined["percent"] == pytest.approx(100 * 100 / 170)
    assert "batch_size=4096" not in {b["label"] for b in bars}  # out of memory: no time to draw


def test_waterfall_uses_measured_combinations_and_ends_at_the_verified_median() -> None:
    summary = study_summary(study(VERIFIED, trial(BOTH, "combine", 170.0)))
    steps = plot_data.waterfall(summary)
    assert [s["label"] for s in steps] == [
        "baseline", "+ steps_per_execution=16", "+ intra_op_threads=1", "best (verified)"]
    assert [round(s["ratio"], 3) for s in steps] == [1.0, 1.5, 1.7, 1.62]
    assert all(s["measured"] for s in steps)
    assert steps[-1]["ci"] == (1.4, 1.8)


def test_waterfall_estimates_an_unmeasured_combination_from_single_knobs() -> None:
    steps = plot_data.waterfall(study_summary(study(VERIFIED)))
    assert steps[2]["measured"] is False
    assert steps[2]["ratio"] == pytest.approx(1.5 * 1.1)


def test_waterfall_is_empty_when_the_baseline_failed() -> None:
    data = study(None)
    data["trials"][0] = trial(BASE, "baseline", None, status=Status.CRASHED)
    summary = study_summary(data)
    assert plot_data.waterfall(summary) == []
    assert any("baseline has no successful measurement" in note for note in plot_data.notes(summary))
    assert any("No verified best yet" in note for note in plot_data.notes(summary))


def test_knob_panels_one_knob_at_a_time_with_baseline_and_failures() -> None:
    panels = plot_data.knob_panels(study_summary(study(VERIFIED, trial(BOTH, "combine", 170.0))))
    assert list(panels)[:2] == ["steps_per_execution", "batch_size"]
    assert [(p["value"], p["samples_per_s"], p["baseline"]) for p in panels["steps_per_execution"]] == [
        (1, 100.0, True), (16, 150.0, False)]
    sizes = panels["batch_size"]
    assert [p["value"] for p in sizes] == [32, 256, 4096]
    assert sizes[-1]["samples_per_s"] is None and sizes[-1]["status"] == "oom"
    assert "jit_compile" not in panels  # only ever measured together with steps_per_execution


def test_compile_points_only_vary_steps_per_execution_and_xla() -> None:
    points = plot_data.compile_points(study_summary(study(VERIFIED)))
    assert [(p["steps_per_execution"], p["jit_compile"], p["compile_s"]) for p in points] == [
        (1, False, 1.0), (16, False, 2.0), (16, True, 5.0)]
    assert [p["label"] for p in points] == ["jit_compile=auto (Keras chose no XLA here)"] * 2 + ["jit_compile=True"]


def test_loss_curves_from_the_guard_else_the_baseline() -> None:
    curves = plot_data.loss_curves(study_summary(study(VERIFIED)))
    assert curves["baseline"] == [2.3, 1.6]
    assert curves["checked"] == [{"label": "precision=mixed_bfloat16", "curve": [2.3, 2.1], "ok": False,
                                  "reason": "final loss 2.1 is 40% away"}]
    unchecked = study(VERIFIED)
    unchecked["guards"] = {}
    curves = plot_data.loss_curves(study_summary(unchecked))
    assert (curves["baseline"], curves["checked"]) == ([2.3, 1.9, 1.4], [])
    # issue 25, item 12: mixed precision was tried, only never checked: the title must not say it was not tried
    assert "precision=mixed_bfloat16" in curves["numeric_tried"]
    assert curves["title"] == "Baseline loss (no configuration that changes numerics reached the guard)"


def _record(config: TrialConfig, speed: float, model: str = "tiny", **extra: Any) -> dict[str, Any]:
    return new_record(TrialSpec(model=model, config=config), Status.OK,
                      metrics={"samples_per_s": {"median": speed}, "compile_s": 1.0}, **extra).to_dict()


def test_a_results_file_reads_as_a_study() -> None:
    b = TrialConfig(steps_per_execution=8)
    records = [
        _record(BASE, 50.0, model="mlp"),
        _record(BASE, 100.0, compare_id="c", arm="a"), _record(b, 200.0, compare_id="c", arm="b"),
        _record(BASE, 90.0, compare_id="c", arm="a"), _record(b, 210.0, compare_id="c", arm="b"),
        _record(BASE, 95.0, compare_id="c", arm="a"), _record(b, 150.0, compare_id="c", arm="b"),
        {"kind": "comparison", "model": "tiny", "data": None, "a": BASE.to_dict(), "b": b.to_dict(),
         "verdict": "B is 2.1× faster", "estimate": {"median": 2.1, "ci_low": 1.3, "ci_high": 2.9,
                                                     "confidence": 0.95, "ratios": [2.0, 2.3, 1.6]}},
    ]
    assert plot_data.workloads_in(records) == ["mlp · synthetic", "tiny · synthetic"]
    summary = study_summary(plot_data.from_results(records))
    assert summary.model == "tiny"
    assert summary.baseline.samples_per_s == 95.0  # the median of the three repeats
    assert [r["samples_per_s"] for r in summary.trials] == [95.0, 200.0]
    assert summary.best.label == "steps_per_execution=8" and summary.best.claimed
    assert [r["config"] for r in summary.effects] == ["steps_per_execution=8"]
    mlp = study_summary(plot_data.from_results(records, "mlp · synthetic"))
    assert mlp.baseline.samples_per_s == 50.0 and mlp.best.verdict == "not verified yet"
    with pytest.raises(ValueError, match="no records for workload"):
        plot_data.from_results(records, "cnn10 · synthetic")


def test_the_baseline_bar_is_the_median_of_the_baseline_runs_every_ratio_uses() -> None:
    summary = study_summary(study(VERIFIED, trial(BASE, "baseline", 125.0), trial(BASE, "verify", 80.0)))
    bars = plot_data.time_bars(summary)
    assert sum(bar["baseline"] for bar in bars) == 1
    assert bars[0]["seconds"] == pytest.approx(100.0) and bars[0]["percent"] == pytest.approx(100.0)  # 100, 125, 80
    spe = next(bar for bar in bars if bar["label"] == "steps_per_execution=16")
    assert spe["percent"] == pytest.approx(100 * 100 / 150)


def test_resolution_is_read_from_the_studys_own_intervals() -> None:
    summary = study_summary(study(VERIFIED))
    assert plot_data.resolution(summary) == (
        "intervals here are 0.400 wide (95%, 2 pairs): differences under about ±20% are not told from noise")
    assert plot_data.resolution(study_summary(study(None))) is None  # nothing paired yet: no claim


def test_cpu_rows_name_the_features_and_onednn() -> None:
    env = {"cpu_features": ["avx2", "avx512_bf16", "amx_bf16"], "onednn": True}
    assert plot_data.cpu_rows(env) == [("CPU features", "avx2 avx512_bf16 amx_bf16"), ("oneDNN (TensorFlow)", "on")]
    assert plot_data.cpu_rows({"cpu_features": [], "onednn": None}) == [
        ("CPU features", "none of those fitspeed names")]
    assert ("CPU features", "avx2 avx512_bf16 amx_bf16") in plot_data.environment_rows(
        StudySummary.from_dict({"study": "s", "baseline": {}, "best": {}, "environment": env}))


def test_the_page_states_the_resolution() -> None:
    from fitspeed.report import html

    page = html.render(study_summary(study(VERIFIED)), {})
    assert '<p id="resolution"><strong>Resolution on this machine:</strong> intervals here are 0.400 wide' in page
    assert 'id="resolution"' not in html.render(study_summary(study(None)), {})


def test_a_screen_winner_kept_inside_a_guarded_bundle_says_so_and_is_not_listed_as_rejected() -> None:
    bundle = TrialConfig(steps_per_execution=16, precision="mixed_bfloat16")
    data = study({**VERIFIED, "config": bundle.to_dict()}, trial(bundle, "bundle", 190.0))
    data["guards"] = {config_key(bundle): {"ok": True, "reason": "within the band"}}
    summary = study_summary(data)
    bf16 = next(r for r in summary.effects if r["config"] == "precision=mixed_bfloat16")
    assert bf16["outcome"] == "faster; its numerics passed the guard inside " + bundle.label()
    assert "precision=mixed_bfloat16" not in [r["config"] for r in summary.rejected]
    data = study(VERIFIED, trial(bundle, "bundle", 190.0))  # the answer is another: the bundle passed, then lost
    data["guards"] = {config_key(bundle): {"ok": True, "reason": "within the band"}}
    summary = study_summary(data)
    bf16 = next(r for r in summary.effects if r["config"] == "precision=mixed_bfloat16")
    assert bf16["outcome"] == ("screened faster (1.20×) but not in the answer; its numerics passed the guard inside "
                               + bundle.label())
    assert "precision=mixed_bfloat16" in [r["config"] for r in summary.rejected]
    data["guards"] = {}  # no guard anywhere: the screen winner's numerics were not checked, and it was not kept
    summary = study_summary(data)
    bf16 = next(r for r in summary.effects if r["config"] == "precision=mixed_bfloat16")
    assert bf16["outcome"].startswith("screened faster (") and bf16["outcome"].endswith(
        "×) but never kept, so its numerics were not checked")
    assert "precision=mixed_bfloat16" in [r["config"] for r in summary.rejected]


def test_the_waterfall_labels_clear_their_error_bars() -> None:
    # issue 25, item 12: the verified bar's label sat on its error bar's cap
    import matplotlib.pyplot as plt

    from fitspeed.report.plots import waterfall_figure

    steps = [{"label": "baseline", "ratio": 1.0, "kind": "start", "measured": True},
             {"label": "+ precision=mixed_bfloat16", "ratio": 2.1, "kind": "step", "measured": True},
             {"label": "best (verified)", "ratio": 2.09, "kind": "end", "measured": True, "ci": (1.43, 3.05)}]
    fig = waterfall_figure(steps)
    try:
        fig.canvas.draw()
        ax = fig.axes[0]
        renderer = fig.canvas.get_renderer()
        cap_top = max(ax.transData.transform((0, y))[1] for line in ax.lines for y in line.get_ydata()
                      if line.get_marker() not in (None, "None", ""))
        label = next(t for t in ax.texts if t.get_text() == "2.09×")
        assert label.get_window_extent(renderer).y0 > cap_top  # above the cap, in pixels
        assert label.get_window_extent(renderer).y1 < ax.get_window_extent(renderer).y1  # inside the axes
    finally:
        plt.close(fig)
