"""The phase a trial is measured in, and the purpose of a paired decision: one enum for both.

A trial's user attr `phase` and a decision's `purpose` hold a `Phase`, and the
study stores it as its text (a `StrEnum` is a `str`), so a study written with
bare strings reads the same. A decision's id is hashed from its purpose's
text (`fitspeed.search.decider.decision_id`): the member and its text give
the same id.

>>> Phase.COMBINE == "combine" and f"{Phase.COMBINE}|" == "combine|"
True
>>> Phase("verify") is Phase.VERIFY
True
"""

from __future__ import annotations

from enum import StrEnum


class Phase(StrEnum):
    """What a trial was measured for, or what a paired decision decided."""

    BASELINE = "baseline"  # the defaults alone: the screen's reference and the study's first noise figures
    SWEEP = "sweep"  # one knob's value on top of the defaults, measured once in the screen (or for its cost)
    SCREEN = "screen"  # a decision from one sweep trial against the baseline's median: clearly slower, no pairs
    COMBINE = "combine"  # one change (or a bundle's survivors) decided on top of the incumbent in fresh pairs
    BUNDLE = "bundle"  # several screened changes decided together, as one step on top of the incumbent
    CHOOSE = "choose"  # two values of one knob compared head to head in a fixed number of pairs
    RACE = "race"  # one fresh pair on top of the incumbent that only orders the changes still waiting
    SAMPLER = "sampler"  # a configuration Optuna's sampler proposed, and its decision against the incumbent
    MODEL = "model"  # the configuration one fit over every timed trial predicts fastest, against the incumbent
    POLISH = "polish"  # a last change tried on top of the incumbent with what the budget leaves
    FACTORIAL = "factorial"  # one run of a joint estimate of a lost bundle's members (`search.factorial`)
    LEAN = "lean"  # one knob taken out of the final incumbent, before the verification (`search.lean`), outside the budget
    VERIFY = "verify"  # the verification: the answer against the defaults on fresh pairs, outside the budget
    BATCH_SIZE = "batch_size"  # the batch-size sweep: which sizes fit, outside the search's budget
    MEASURE = "measure"  # a `fitspeed measure` trial, when a report reads measurements as a study
    COMPARE = "compare"  # a `fitspeed compare` trial, likewise


# decisions that only choose: B is kept when its estimate leans its way over a fixed few pairs (a 2% interval),
# never a claim; shown as kept or not kept, with the estimate
CHOICES = (Phase.CHOOSE, Phase.POLISH, Phase.MODEL)
