"""The study summary is plain data: outcomes and reasons from records and guards."""

from __future__ import annotations

import json

from fitspeed.core.config import TrialConfig
from fitspeed.core.record import Status, TrialSpec, new_record
from fitspeed.core.config import config_key
from fitspeed.search.summary import study_summary


def trial(config: TrialConfig, phase: str, status: Status = Status.OK, speed: float = 100.0, reason: str | None = None) -> dict:
    metrics = {"samples_per_s": {"median": speed}, "compile_s": 1.0} if status == Status.OK else None
    record = new_record(TrialSpec(model="tiny", config=config), status, reason=reason, metrics=metrics)
    return {"number": 0, "phase": phase, "config": config.to_dict(), "record": record}


def test_outcomes_effects_and_rejections() -> None:
    base = TrialConfig()
    spe = TrialConfig(steps_per_execution=16)
    bf16 = TrialConfig(precision="mixed_bfloat16")
    first = TrialConfig(data_format="channels_first")
    slow = TrialConfig(intra_op_threads=1)
    data = {
        "study": "s",
        "meta": {"model": "tiny", "data": None, "base": base.to_dict(), "min_gain": 0.05,
                 "skipped": {"precision": "no GPU"}},
        "trials": [
            trial(base, "baseline", speed=100.0),
            trial(spe, "sweep", speed=180.0),
            trial(bf16, "sweep", speed=150.0),
            trial(first, "sweep", status=Status.NAN, reason="the loss became nan at step 3 of epoch 0"),
            trial(slow, "sweep", speed=90.0),
            trial(base, "baseline", speed=110.0),  # the baseline again: its figure is the median, 105
            trial(spe, "verify", speed=200.0),  # a configuration's figure is the median of its trials
            trial(TrialConfig(batch_size=256), "batch_size", speed=900.0),
            trial(TrialConfig(batch_size=4096), "batch_size", status=Status.OOM, reason="over the limit"),
        ],
        "guards": {config_key(bf16): {"ok": False, "reason": "final loss 2.1 is 40% away"}},
        "verification": {"config": spe.to_dict(), "claimed": True, "verdict": "B is 1.70× faster (1.5–1.9)",
                         "estimate": {"median": 1.7, "ci_low": 1.5, "ci_high": 1.9, "confidence": 0.95,
                                      "ratios": [1.7, 1.6]}},
    }
    summary = study_summary(data)
    assert summary.baseline.samples_per_s == 105.0 and summary.baseline.trials == 2
    assert summary.best.label == "steps_per_execution=16" and summary.best.claimed
    assert summary.best.samples_per_s == 190.0 and summary.best.trials == 2
    assert summary.best.agreement is None  # 1.81x by the medians, 1.7x verified: they agree
    outcomes = {row["config"]: row["outcome"] for row in summary.trials}
    assert outcomes["steps_per_execution=16"] == "faster"
    assert outcomes["precision=mixed_bfloat16"] == "numerics changed: final loss 2.1 is 40% away"
    assert outcomes["data_format=channels_first"] == "numerics: the loss became nan at step 3 of epoch 0"
    assert outcomes["intra_op_threads=1"] == "slower (0.86×)"
    assert {r["config"] for r in summary.rejected} == {
        "precision=mixed_bfloat16", "data_format=channels_first", "intra_op_threads=1"}
    assert [r["config"] for r in summary.effects] == [
        "steps_per_execution=16", "precision=mixed_bfloat16", "data_format=channels_first", "intra_op_threads=1"]
    batch = summary.batch_sizes
    assert (batch["largest_fitting"], batch["first_oom"], batch["recommended_max"]) == (256, 4096, 224)
    assert summary.skipped == {"precision": "no GPU"}


def test_a_knob_screened_faster_is_faster_only_where_the_answer_holds_it() -> None:
    # a study that kept the defaults, and one whose answer left out a knob that screened faster: the table must
    # not call that knob "faster" beside a verdict that does not hold it (a BN CNN's tune on a loaded machine)
    base, spe, threads = TrialConfig(), TrialConfig(steps_per_execution=64), TrialConfig(inter_op_threads=1)
    trials = [trial(base, "baseline", speed=100.0), trial(spe, "sweep", speed=167.0),
              trial(threads, "sweep", speed=157.0)]
    meta = {"model": "tiny", "base": base.to_dict(), "min_gain": 0.05}

    def outcomes(verification: dict | None) -> tuple[dict[str, str], set[str]]:
        summary = study_summary({"study": "s", "meta": meta, "trials": trials, "guards": {},
                                 "verification": verification})
        return {r["config"]: r["outcome"] for r in summary.trials}, {r["config"] for r in summary.rejected}

    kept_defaults = {"config": base.to_dict(), "claimed": False, "verdict": "keep the defaults"}
    rows, rejected = outcomes(kept_defaults)
    assert rows["steps_per_execution=64"] == "screened faster (1.67×) but not in the answer"
    assert rows["inter_op_threads=1"] == "screened faster (1.57×) but not in the answer"
    assert rejected == {"steps_per_execution=64", "inter_op_threads=1"}
    # an incumbent that was verified and not confirmed is no answer either
    rows, _ = outcomes({"config": spe.to_dict(), "claimed": False, "verdict": "keep the defaults"})
    assert rows["steps_per_execution=64"] == "screened faster (1.67×) but not in the answer"
    rows, rejected = outcomes({"config": spe.to_dict(), "claimed": True, "verdict": "B is at least 1.5× faster"})
    assert rows["steps_per_execution=64"] == "faster"
    assert rows["inter_op_threads=1"] == "screened faster (1.57×) but not in the answer"
    assert rejected == {"inter_op_threads=1"}
    # the other way round: a knob of the answer whose one screen trial read alone showed no gain (a BN CNN's
    # steps_per_execution=64 at 1.04x, its lean share +10%) says it is in the answer, with its share
    quiet = [trial(base, "baseline", speed=100.0), trial(spe, "sweep", speed=104.0), trial(threads, "sweep", speed=97.0)]
    summary = study_summary({"study": "s", "meta": meta, "trials": quiet, "guards": {}, "verification": {
        "config": spe.to_dict(), "claimed": True, "verdict": "B is at least 1.02× faster",
        "shares": [{"knob": "steps_per_execution", "value": 64, "ratio": 1.104, "decision": "d", "how": "taken out"}]}})
    rows = {r["config"]: r["outcome"] for r in summary.trials}
    assert rows["steps_per_execution=64"] == "in the answer, its share +10% in pairs; screened alone at 1.04×"
    assert rows["inter_op_threads=1"] == "slower (0.97×)"
    assert {r["config"] for r in summary.rejected} == {"inter_op_threads=1"}
    rows, rejected = outcomes(None)  # a study still running has no answer to hold it against
    assert rows["steps_per_execution=64"] == rows["inter_op_threads=1"] == "faster" and not rejected


def test_partial_study_without_verification() -> None:
    base = TrialConfig()
    data = {"study": "s", "meta": {"model": "tiny", "base": base.to_dict()},
            "trials": [trial(base, "baseline")], "guards": {}, "verification": None}
    summary = study_summary(data)
    assert summary.best.verdict == "not verified yet"
    assert summary.best.config == base


def test_determinism_is_a_cost_never_a_rejected_speed_candidate() -> None:
    base = TrialConfig()
    det = TrialConfig(deterministic=True)
    data = {"study": "s", "meta": {"model": "tiny", "base": base.to_dict(), "min_gain": 0.05,
                                   "skipped": {"cache": "cache applies to images", "vectorize": "vectorize applies to images"}},
            "trials": [trial(base, "baseline", speed=100.0), trial(det, "sweep", speed=108.0)],
            "guards": {}, "verification": None}
    summary = study_summary(data)
    outcomes = {row["config"]: row["outcome"] for row in summary.trials}
    assert outcomes["deterministic=True"] == "cost only (1.08×)"
    assert summary.rejected == ()
    assert summary.skipped_groups == ((("cache", "vectorize"), "applies to images"),)


def test_figures_that_disagree_with_the_verdict_say_why() -> None:
    # run.sh once printed baseline 7,266, best 6,164 beside "4.74x faster": a starved pair
    base, best = TrialConfig(), TrialConfig(steps_per_execution=64)
    data = {"study": "s", "meta": {"model": "tiny", "base": base.to_dict()},
            "trials": [trial(base, "baseline", speed=7266.0), trial(best, "sweep", speed=6164.0)],
            "guards": {},
            "verification": {"config": best.to_dict(), "claimed": True, "verdict": "B is 1.59× faster (1.21–2.08)",
                             "estimate": {"median": 1.59, "ci_low": 1.21, "ci_high": 2.08, "confidence": 0.95,
                                          "ratios": [1.5, 1.6, 1.7], "pairs": 3}}}
    line = study_summary(data).best.agreement
    assert line.startswith("the medians above put the best at 0.85× the baseline, the verdict at 1.59×")
    assert "3 pairs measured back to back, in a random order" in line


def test_a_study_whose_defaults_slowed_says_the_load_changed_and_a_steady_one_says_nothing(tmp_path) -> None:
    # a BN CNN tune on 2 cores: the defaults ran at about 1,750 samples/s, then a second job came and they ran
    # at about 780 by the verification. The summary's tables, best.json and the page say so; a steady study has
    # no such line, and a trial out of order by number is read in the order the study ran it
    from fitspeed.console.tune_tables import tune_text
    from fitspeed.core import best_json
    from fitspeed.report import html

    base, spe = TrialConfig(), TrialConfig(steps_per_execution=64)

    def study(speeds: list[float]) -> dict:
        trials = [{**trial(base, "baseline" if i < 3 else "verify", speed=s), "number": i}
                  for i, s in enumerate(speeds)]
        trials.insert(0, {**trial(spe, "screen", speed=1900.0), "number": 3})
        return {"study": "s", "meta": {"model": "tiny", "base": base.to_dict()}, "trials": trials[::-1],
                "guards": {}, "verification": {"config": base.to_dict(), "claimed": False,
                                               "verdict": "keep the defaults"}}

    loaded = study_summary(study([1745.0, 1690.0, 1802.0, 1500.0, 800.0, 778.0, 760.0]))
    assert loaded.baseline.load is not None
    assert loaded.baseline.load.startswith("the defaults ran at 1,745 samples/s in their first 3 trials and at 778 "
                                           "in their last 3 (0.45×): the machine's load changed during the study")
    assert "load" in tune_text(loaded, width=200) and "(0.45×): the machine's load changed" in tune_text(loaded, 200)
    written = json.loads(best_json.write(tmp_path / "best.json", loaded).read_text())
    assert written["baseline"]["load"] == loaded.baseline.load
    assert '<p id="load"><strong>Load:</strong> the defaults ran at 1,745' in html.render(loaded, {})
    faster = study_summary(study([800.0, 790.0, 820.0, 1200.0, 1700.0, 1750.0, 1690.0]))  # a job went away
    assert faster.baseline.load is not None and "at 1,700 in their last 3 (2.12×)" in faster.baseline.load

    steady = study_summary(study([1745.0, 1690.0, 1802.0, 1500.0, 1650.0, 1600.0, 1580.0]))
    assert steady.baseline.load is None and "load" not in steady.to_dict()["baseline"]
    assert "machine's load" not in tune_text(steady, width=200)
    assert 'id="load"' not in html.render(steady, {})
    assert study_summary(study([1745.0, 700.0])).baseline.load is None  # one trial a side: no median to compare


def test_a_configuration_the_lean_step_built_says_which_knob_it_left_out_and_what_that_knob_showed() -> None:
    # the real tuner on a drawn development world whose lean step keeps knobs (one to three, by the pairs' order
    # coins and the lean step's level): the configurations without one of those were measured only there, and
    # are neither screened nor the answer (they read "screened faster (1.25×) but not in the answer")
    import random
    from pathlib import Path

    import optuna
    from conftest import load_script

    from fitspeed.search.lean import changed_knobs
    from fitspeed.search.phase import Phase
    from fitspeed.search.summary import study_data
    from fitspeed.search.tuner import Tuner, TuneSettings

    world = 3_011_601
    sim = load_script(Path(__file__).parents[2] / "benchmarks" / "search_simulation.py")
    sim.pretend_cpu_host()
    scenario = sim.draw_world(world).scenario
    settings = TuneSettings(trials=40, storage=optuna.storages.InMemoryStorage(), seed=world, steps=64,  # type: ignore[arg-type]
                            repeats=3, **scenario.settings("tiny"))
    tuner = Tuner(settings, run=sim.FakeMachine(scenario, 0.10, random.Random(world), False, 0.0, 1.0))
    tuner.run()
    summary = study_summary(study_data(tuner.study))
    kept = [d for d in tuner.decisions() if d.purpose == Phase.LEAN and d.verdict.is_faster()]
    rows = {row["config"]: row for row in summary.trials}
    assert kept
    for decision in kept:
        row = rows[decision.a.label()]  # the incumbent without one knob
        (knob, value), = changed_knobs(decision.b, decision.a).items()
        assert decision.a != summary.answer and row["phase"] == Phase.LEAN
        assert row["outcome"] == (f"the lean step without {knob}={value}, which stays: its share "
                                  f"{decision.ratio:.2f}× in {len(decision.pairs)} pair(s)"), row["outcome"]
