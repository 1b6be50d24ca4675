"""A tune's progress bars: the search's counts against --trials, the lean step and the verification get their own.

The lean step's trials are outside --trials and, in the simulator, about as
many as the search's: a bar with --trials as its total once showed 125/40 in
a notebook. These run the real `Tuner` on the simulator's machine (a drawn
development world whose answer has knobs for the lean step to take out)
through `tune_events` into each real kind of progress.
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import optuna
import pytest
from conftest import load_script

from fitspeed.api.progress import Lines, NotebookBar
from fitspeed.console.terminal import TerminalProgress
from fitspeed.console.tune_lines import AFTER_SEARCH, tune_events
from fitspeed.core.config import TrialConfig
from fitspeed.search.lean import changed_knobs
from fitspeed.search.phase import Phase
from fitspeed.search.tuner import Tuner, TuneSettings

TRIALS = 40
WORLD = 3_011_640  # a development world: 6 lean and 6 verification trials after 33 of the search's


def _tune(shown: Any, out: dict[str, Any] | None = None) -> dict[str, int]:
    """Tune the world with `shown` started as `fitspeed tune` starts it; the study's trials by stage (the tuner
    and the machine in `out`)."""
    sim = load_script(Path(__file__).parents[2] / "benchmarks" / "search_simulation.py")
    sim.pretend_cpu_host()
    scenario = sim.draw_world(WORLD).scenario
    machine = sim.FakeMachine(scenario, 0.10, random.Random(WORLD), False, 0.0, 1.0)
    settings = TuneSettings(trials=TRIALS, storage=optuna.storages.InMemoryStorage(), seed=WORLD, steps=64,  # type: ignore[arg-type]
                            repeats=3, **scenario.settings("tiny"))
    tuner = Tuner(settings, run=machine, on_event=tune_events(shown, TrialConfig()))
    shown.start(tuner.ledger.trials, "tuning")
    tuner.run()
    if out is not None:
        out.update(tuner=tuner, machine=machine)
    phases = [t.user_attrs["phase"] for t in tuner.study.get_trials(deepcopy=False) if "record" in t.user_attrs]
    after = sum(p in (Phase.LEAN, Phase.VERIFY) for p in phases)
    return {"search": len(phases) - after - phases.count(Phase.BATCH_SIZE), "after": after,
            "lean": phases.count(Phase.LEAN)}


def test_plain_lines_say_what_the_search_took_of_trials_and_when_the_lean_step_begins(
        capsys: pytest.CaptureFixture[str]) -> None:
    ran: dict[str, Any] = {}
    trials = _tune(Lines(), ran)
    assert trials["lean"] > 0 and trials["search"] <= TRIALS
    out = capsys.readouterr().out.splitlines()
    assert out[0] == f"tuning: up to {TRIALS} trial processes"
    at = out.index(AFTER_SEARCH)
    assert out[at - 1] == f"{trials['search']} of {TRIALS} trial processes"
    assert sum(line.lstrip().startswith("lean") for line in out[:at]) == 0  # no lean trial before the stage's line
    # the stage's first line names the knobs the lean step then took out and timed, each in its own decisions
    taken_out = {f"{knob}={value}" for d in ran["tuner"].decisions() if d.purpose == Phase.LEAN
                 for knob, value in changed_knobs(d.b, d.a).items()}
    named = out[at + 1].removeprefix("lean step: ").split(" ha")[0].split(", ")
    assert out[at + 1].startswith("lean step: ") and taken_out and set(named) == taken_out


def test_the_notebook_bar_never_runs_past_its_total_and_the_search_bar_ends_done() -> None:
    pytest.importorskip("ipywidgets")

    class Kept(NotebookBar):
        def __init__(self) -> None:
            super().__init__()
            self.bars: list[tuple[str, Any]] = []

        def start(self, total: int | None, what: str) -> None:
            super().start(total, what)
            self.bars.append((what, self.bar))

    shown = Kept()
    trials = _tune(shown)
    shown.close()
    (_, search), (stage, after) = shown.bars
    assert (search.n, search.total) == (trials["search"], trials["search"])  # done, not red short of --trials
    assert search.n <= TRIALS and search.desc == f"tuning: {trials['search']} trial processes"
    assert stage == AFTER_SEARCH and after.total is None and after.n == trials["after"] > 0
    assert after.desc.startswith("verify: ")  # each trial says what it measures: the last, the verification's


def test_the_terminal_bar_counts_the_search_against_trials_and_the_rest_without_a_total() -> None:
    shown = TerminalProgress()
    try:
        trials = _tune(shown)
        search, after = shown.progress.tasks
    finally:
        shown.close()
    assert search.completed == search.total == trials["search"] <= TRIALS
    assert search.description == f"tuning: {trials['search']} trial processes"
    assert after.total is None and after.completed == trials["after"] > 0
    assert after.description.startswith("verify: ")


def test_the_tables_say_where_the_trial_processes_went() -> None:
    from fitspeed.console.tune_tables import tune_text
    from fitspeed.search.summary import study_data, study_summary

    out: dict[str, Any] = {}
    trials = _tune(Lines(), out)
    summary = study_summary(study_data(out["tuner"].study))
    processes = summary.processes
    timed = trials["search"] + trials["after"]
    assert processes["search"] == trials["search"] and processes["lean"] == trials["lean"] > 0
    assert processes["verification"] == trials["after"] - trials["lean"] > 0 and processes["trials"] == TRIALS
    guard_runs = out["machine"].calls - timed  # every process the machine ran that is no study trial
    assert processes["guarded"] > 0 and processes["guard runs"] == guard_runs > processes["guarded"]
    text = " ".join(tune_text(summary, width=200).split())
    assert f"{timed} trial processes: {trials['search']} for the search (of --trials {TRIALS}), " \
           f"{trials['lean']} for the lean step, {processes['verification']} for the verification; " \
           f"besides, the numerics guard checked {processes['guarded']} configuration" in text
    assert f" in {guard_runs} training runs" in text
    assert type(summary).from_dict(summary.to_dict()).processes == processes  # report.json keeps it
