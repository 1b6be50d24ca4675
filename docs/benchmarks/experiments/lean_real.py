"""The lean step's pass on real trials: `tiny` trained in child processes, with an answer handed to it.

    python docs/benchmarks/experiments/lean_real.py sqlite:////tmp/lean/study.db \
        steps_per_execution=64 intra_op_threads=1 inter_op_threads=1 data_autotune=False

A fresh study holds no decision, so every knob of the answer has no evidence of its own and the pass times them
all: it prints `tune`'s lines (the lean step's first line, each trial, each decision), then what it left, the
trial processes it ran, and what the one-at-a-time decider would have run for the same pairs (two trials a
pair). Run it again on the same storage and nothing is measured twice. What it printed on an AMD Zen 4 on
2026-11-29 is in docs/benchmarks/search_simulation.md (nineteenth round).
"""

from __future__ import annotations

import sys
import time

import optuna

from fitspeed.console.tune_lines import tune_events
from fitspeed.core.config import TrialConfig
from fitspeed.search.lean import Lean
from fitspeed.search.phase import Phase
from fitspeed.search.tuner import Tuner, TuneSettings


class Printed:
    """`tune`'s lines (`fitspeed.console.tune_lines.tune_events`) on standard output, without its bars."""

    def start(self, total: int | None, what: str) -> None:
        pass

    def describe(self, text: str) -> None:
        pass

    def line(self, text: str, advance: bool = False) -> None:
        print(text, flush=True)


def main() -> None:
    storage, answer = sys.argv[1], TrialConfig.from_assignments(sys.argv[2:])
    optuna.logging.set_verbosity(optuna.logging.ERROR)
    tuner = Tuner(TuneSettings(model="tiny", trials=40, storage=storage, study="lean-real"),
                  on_event=tune_events(Printed(), TrialConfig()))
    if not tuner.ledger.incumbents():
        tuner.ledger.chain_add(answer, over=tuner.base)
    start = time.time()
    leaned = Lean(tuner).run()
    trials = sum(t.user_attrs.get("phase") == Phase.LEAN for t in tuner.study.get_trials())
    pairs = sum(len(d.pairs) + len(d.lost_pairs) for d in tuner.ledger.decisions() if d.purpose == Phase.LEAN)
    print(f"left {leaned.label()} in {time.time() - start:.0f} s: {trials} trial processes for {pairs} pairs "
          f"(one at a time: {2 * pairs})")


if __name__ == "__main__":
    main()
