"""What a tune costs and what its answer saves, in the user's own terms (pure functions).

Before the search (`estimate`): the budget in trial processes and an estimate
of the wall time, from the baseline trial's own time. After it (`saving`): the
time the study took, and what the verified answer saves per run of the
user's training: the script's own fit(), its epochs of steps at its batch,
timed at the defaults' steady-state speed and at the answer's (the
verification's estimate, and its interval's lower end), plus the change in
compile time the trials measured. A built-in or builder model has no run of
its own: its saving is per 1,000 training steps.

Where the answer cannot pay back the tune within PAYS_WITHIN runs, the line
says so plainly.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from fitspeed.core.json_data import JSONObject
from fitspeed.search.lean import LEAN_MAX_PAIRS

PAYS_WITHIN = 10  # an answer that needs more runs of the script than this to pay back the tune "does not pay back soon"
STEPS_UNIT = 1000  # a model with no run of its own: the saving per this many training steps


def duration(seconds: float) -> str:
    """A wall time as a person says it.

    >>> duration(0.42), duration(42.4), duration(734.9), duration(4 * 3600 + 60)
    ('0.4 s', '42 s', '12 min 15 s', '4 h 1 min')
    """
    seconds = max(0.0, seconds)
    if seconds < 9.95:
        return f"{seconds:.1f} s"
    if seconds < 60:
        return f"{seconds:.0f} s"
    minutes, secs = divmod(round(seconds), 60)
    if minutes < 60:
        return f"{minutes} min {secs} s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes} min"


def estimate(trials: int, trial_s: float | None, guard_run_s: float | None) -> str:
    """The line said before the search: its budget in trial processes and what they should take.

    `trial_s` is the baseline trial's own wall time; `guard_run_s` a guard
    training run's, estimated from the baseline's speed (None: nothing to
    train). The search's trials are an upper end (a lockstep round's trials
    start and build side by side); the lean step, the verification's further
    pairs and the guard come on top.

    The lean step's share is said per knob: an answer that carries a knob
    with no evidence of its own times it against the answer in up to
    LEAN_MAX_PAIRS pairs, two trials a pair (`fitspeed.search.lean`).

    >>> print(estimate(43, 11.2, 31.0))  # doctest: +NORMALIZE_WHITESPACE
    budget: 43 trial processes for the search and the verification's first look, at about 11 s each (the
    baseline's): 8 min 2 s or less (the trials of a round start side by side); the lean step comes on top, up
    to 24 pairs (about 8 min 58 s) for each knob an answer carries without evidence of its own, and where the
    numerics guard checks a change of precision, 10 or more training runs of about 31 s (5 min 10 s or more)
    >>> print(estimate(43, None, None))
    budget: 43 trial processes for the search and the verification's first look; the lean step comes on top
    """
    head = f"budget: {trials} trial processes for the search and the verification's first look"
    if trial_s is None or trial_s <= 0:
        return head + "; the lean step comes on top"
    line = f"{head}, at about {trial_s:.0f} s each (the baseline's): {duration(trials * trial_s)} or less " \
           f"(the trials of a round start side by side); the lean step comes on top, up to {LEAN_MAX_PAIRS} pairs " \
           f"(about {duration(2 * LEAN_MAX_PAIRS * trial_s)}) for each knob an answer carries without evidence of " \
           "its own"
    if guard_run_s:
        line += (f", and where the numerics guard checks a change of precision, 10 or more training runs of about "
                 f"{guard_run_s:.0f} s ({duration(10 * guard_run_s)} or more)")
    return line


def guard_run_s(trial_s: float | None, timed_s: float | None, steps_per_s: float | None, steps: int) -> float | None:
    """A guard training run's wall time: the baseline trial's time less its timed windows, plus `steps` steps.

    >>> guard_run_s(12.0, 3.0, 20.0, 256)
    21.8
    >>> guard_run_s(None, 3.0, 20.0, 256) is None
    True
    """
    if not trial_s or not steps_per_s or steps_per_s <= 0:
        return None
    return round(max(0.0, trial_s - (timed_s or 0.0)) + steps / steps_per_s, 1)


def saving(baseline: Mapping[str, Any], answer: Mapping[str, Any] | None, tune_s: float | None) -> JSONObject:
    """What the answer saves per run, and after how many runs the tune has paid for itself.

    `baseline`: the defaults' `samples_per_s`, `batch_size`, `compile_s`
    and, for a script, `epochs` and `epoch_steps`. `answer`: the verified
    `ratio` (the estimate), `low` (its interval's lower end) and
    `compile_s`; None where nothing was claimed.

    >>> out = saving({"samples_per_s": 1000.0, "batch_size": 100, "compile_s": 2.0, "epochs": 5,
    ...               "epoch_steps": 200}, {"ratio": 1.25, "low": 1.1, "compile_s": 3.0}, 735.0)
    >>> out["run_s"], out["saved_s"], out["saved_low_s"], out["runs_to_pay_back"]
    (102.0, 19.0, 8.1, 39)
    >>> print(saving({"samples_per_s": 1000.0, "batch_size": 100, "compile_s": 2.0},
    ...              {"ratio": 1.25, "low": 1.1, "compile_s": 3.0}, 735.0)["line"])  # doctest: +NORMALIZE_WHITESPACE
    the tune took 12 min 15 s. The answer saves about 20 s per 1,000 training steps (at least 9.1 s at the
    interval's lower end): 1,000 steps at batch 100 take 1 min 40 s at the defaults' speed and 1 min 20 s with
    the answer. It pays back the tune after about 37,000 training steps
    >>> print(out["line"])  # doctest: +NORMALIZE_WHITESPACE
    the tune took 12 min 15 s. The answer saves about 19 s per run of the script (at least 8.1 s at the
    interval's lower end): its fit() of 5 epochs × 200 steps takes 1 min 42 s at the defaults' speed, compile
    included, and 1 min 23 s with the answer. It pays back the tune after about 39 runs: not within the next
    10, so tune again only where the script will run often
    """
    out: JSONObject = {"tune_s": tune_s}
    speed, batch = baseline.get("samples_per_s"), baseline.get("batch_size")
    took = f"the tune took {duration(tune_s)}." if tune_s is not None else "the tune's time was not recorded."
    if answer is None or not answer.get("ratio") or not speed or not batch:
        out["line"] = f"{took} Its answer is the defaults: it saves nothing per run."
        return out
    epochs, epoch_steps = baseline.get("epochs"), baseline.get("epoch_steps")
    script = bool(epochs and epoch_steps)
    steps = int(epochs) * int(epoch_steps) if epochs and epoch_steps else STEPS_UNIT  # mypy narrows here, not on `script`
    train_s = steps * batch / speed
    # compile is paid once a run: counted for a script's run, not per 1,000 steps of a model with no run of its own
    compile_change = (answer.get("compile_s") or 0.0) - (baseline.get("compile_s") or 0.0) \
        if script and answer.get("compile_s") is not None and baseline.get("compile_s") is not None else 0.0
    before = train_s + ((baseline.get("compile_s") or 0.0) if script else 0.0)
    saved = train_s * (1 - 1 / float(answer["ratio"])) - compile_change
    saved_low = train_s * (1 - 1 / float(answer.get("low") or answer["ratio"])) - compile_change
    out.update(run_s=round(before, 1), saved_s=round(saved, 1), saved_low_s=round(saved_low, 1), steps=steps,
               per="run of the script" if script else f"{STEPS_UNIT:,} training steps")
    what = (f"its fit() of {epochs} epochs × {epoch_steps} steps takes {duration(before)} at the defaults' "
            f"speed, compile included, and {duration(before - saved)} with the answer" if script else
            f"{STEPS_UNIT:,} steps at batch {batch} take {duration(before)} at the defaults' speed and "
            f"{duration(before - saved)} with the answer")
    if saved <= 0:
        out["runs_to_pay_back"] = None
        out["line"] = (f"{took} The answer saves nothing per {out['per']} once compile is counted ({what}): "
                       "it does not pay back the tune")
        return out
    runs = math.ceil(tune_s / saved) if tune_s is not None else None
    out["runs_to_pay_back"] = runs
    line = (f"{took} The answer saves about {duration(saved)} per {out['per']} (at least "
            f"{duration(max(saved_low, 0))} at the interval's lower end): {what}.")
    if runs is None:
        out["line"] = line
    elif not script:
        out["line"] = f"{line} It pays back the tune after about {runs * STEPS_UNIT:,} training steps"
    elif runs <= PAYS_WITHIN:
        out["line"] = f"{line} It pays back the tune after about {runs} run{'s' if runs > 1 else ''} of the script"
    else:
        out["line"] = (f"{line} It pays back the tune after about {runs} runs: not within the next {PAYS_WITHIN}, "
                       "so tune again only where the script will run often")
    return out
