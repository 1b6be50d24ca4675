"""The seam through which tests reach into a trial: `TrialHooks`, chosen once where the child starts.

A trial child (`protocol.main`) asks `from_environment()` for its hooks and
passes them down; the measuring code calls only the three methods of
`TrialHooks`, never `fitspeed.trial.faults` itself. A user's trial gets
`NO_HOOKS`, whose methods do nothing. A test that sets `FITSPEED_TEST_FAULT`
or `FITSPEED_TEST_HOLD` in the trial's environment gets `TestFaults`, the one
place that calls `faults` (what each variable does is written there).

Where each hook is called in a built-in or builder trial:
- `loaded(data, seed)`: once, on the data as loaded, before the input knobs;
- `before_timing()`: once, before the warm-up of a timed trial (not a
  train-, predict-, input- or epochs-mode one);
- `compiled_for_training(model)`: once, in a train-mode trial (the numerics
  guard's), on the compiled model before it trains; it returns the notes for
  the record.

A training script's trial calls none: its data and model are the script's own.
"""

from __future__ import annotations

import os
from typing import Any, Protocol

from fitspeed.trial import faults


class TrialHooks(Protocol):
    """What a test may do inside a trial (see the module docstring for when each is called)."""

    def loaded(self, data: Any, seed: int) -> Any:
        """The data the trial goes on with, given the data as loaded."""
        ...

    def before_timing(self) -> None:
        """Called just before a timed trial's warm-up; it may hold the trial there."""
        ...

    def compiled_for_training(self, model: Any) -> list[str]:
        """Called on a train-mode trial's compiled model before it trains; notes for the record."""
        ...


class NoHooks:
    """A user's trial: every hook does nothing."""

    def loaded(self, data: Any, seed: int) -> Any:
        return data

    def before_timing(self) -> None:
        return None

    def compiled_for_training(self, model: Any) -> list[str]:
        return []


class TestFaults:
    """A test's trial: the faults and the hold that `FITSPEED_TEST_FAULT` and `FITSPEED_TEST_HOLD` name."""

    __test__ = False  # not a pytest class, whatever its name

    def loaded(self, data: Any, seed: int) -> Any:
        return faults.relabel(data, seed)  # the training labels permuted, for the guard to catch

    def before_timing(self) -> None:
        faults.hold()  # a worker test holds one timed trial open to kill its worker mid-trial

    def compiled_for_training(self, model: Any) -> list[str]:
        fault = faults.inject(model)  # a fault that breaks learning, for the guard to catch
        return [f"test fault injected ({faults.ENV}): {fault}"] if fault else []


NO_HOOKS = NoHooks()


def from_environment() -> TrialHooks:
    """The hooks this trial process runs with: `TestFaults` when a test set one of its variables, else `NO_HOOKS`."""
    if os.environ.get(faults.ENV) or os.environ.get(faults.HOLD_ENV):
        return TestFaults()
    return NO_HOOKS
