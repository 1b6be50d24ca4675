"""How far a script lets steps_per_execution go, learned from its baseline trial.

A user's script fixes two things the search must not run past:

| what the baseline trial saw            | cap on steps_per_execution | why                                         |
|----------------------------------------|----------------------------|---------------------------------------------|
| an epoch of N steps (`epoch_steps`)    | N                          | the real run never reaches an execution     |
|                                        |                            | longer than its epoch (Keras shows 64/43)   |
| callbacks that act per batch           | 1, unless the user passes  | Keras calls batch hooks once per execution: |
| (`batch_callbacks`,                    | `--allow-batch-callbacks`  | a per-batch schedule, logger or checkpoint  |
| `fitspeed.trial.batch_callbacks`)      |                            | would run N times less often                |

`cap` applies one of them to the search's dimensions and says what it left
out; the tuner refuses any configuration above the cap (`Tuner.config_of`).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from fitspeed.search.space import Dimension


@dataclass(frozen=True)
class Cap:
    """The most steps_per_execution a script allows, and the sentence that says why."""

    most: int
    why: str


def from_baseline(epoch: Any, callbacks: Any, allowed: bool) -> list[Cap]:
    """The caps the baseline's record implies.

    >>> [c.most for c in from_baseline(43, ["Counter (on_train_batch_end)"], allowed=False)]
    [43, 1]
    >>> from_baseline(None, ["Counter (on_train_batch_end)"], allowed=True)
    []
    """
    caps = []
    if epoch:
        caps.append(Cap(int(epoch), f"the script's epoch has {int(epoch)} steps"))
    if callbacks and not allowed:
        caps.append(Cap(1, f"the script's {', '.join(callbacks)} act per batch, and Keras calls batch hooks once "
                           "per execution (--allow-batch-callbacks lifts this)"))
    return caps


def cap(dims: list[Dimension], limit: Cap) -> tuple[list[Dimension], str | None]:
    """`dims` with no steps_per_execution above `limit.most`, and a note of what was left out (None: nothing).

    >>> dims, note = cap([Dimension("steps_per_execution", (64, 16, 4))], Cap(43, "the script's epoch has 43 steps"))
    >>> dims[0].values, note
    ((16, 4), "the script's epoch has 43 steps: steps_per_execution=64 would run past it, so only 4 and 16 are tried")
    """
    out, notes = [], []
    for dim in dims:
        over = [v for v in dim.values if dim.knob == "steps_per_execution" and isinstance(v, int) and v > limit.most]
        if over:
            kept = tuple(v for v in dim.values if v not in over)
            why = f"{limit.why}: steps_per_execution={', '.join(map(str, over))} would run past it" \
                if limit.most > 1 else f"{limit.why}: steps_per_execution={', '.join(map(str, over))} is not tried"
            dim = replace(dim, values=kept, skipped=None if kept else why)
            tried = " and ".join(map(str, sorted(kept)))
            notes.append(f"{why}, so only {tried} {'is' if len(kept) == 1 else 'are'} tried" if kept
                         else why if limit.most <= 1 else f"{why}, so none is tried")
        out.append(dim)
    return out, "; ".join(notes) or None
