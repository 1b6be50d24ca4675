"""The `steps_per_execution`, `jit_compile` knobs."""

from __future__ import annotations

from fitspeed.core.backends import backend_of
from fitspeed.core.errors import KnobError
from fitspeed.core.knobs.base import Knob, Offer, Where, as_bool, as_int


def _steps_per_execution(raw: object) -> int:
    if str(raw).strip().lower() == "auto":
        raise KnobError(
            "Expected `steps_per_execution` to be an integer >= 1. Received: 'auto', "
            "which Keras 3 does not accept (tf-keras did). Use an integer such as "
            "--set steps_per_execution=32."
        )
    return as_int("steps_per_execution", raw, 1)


def _jit_compile(raw: object) -> bool | str:
    if str(raw).strip().lower() == "auto":
        return "auto"
    try:
        return as_bool("jit_compile", raw)
    except KnobError:
        raise KnobError(
            f"Expected `jit_compile` to be auto, true or false. Received: {raw!r}. "
            "Use for example --set jit_compile=true."
        ) from None


class StepsPerExecution(Knob):
    """Searched as a ladder, the likeliest winner first; not where the backend runs one step per execution.
    Over several processes too: each process's steps between its host's calls are what the run is sized by."""

    across_processes = True

    def offer(self, where: Where) -> Offer:
        """
        >>> from fitspeed.core.config import TrialConfig
        >>> STEPS_PER_EXECUTION.offer(Where(TrialConfig(), False, 2, None, "tiny", None)).values
        (64, 16, 4)
        """
        why = self.refuses(where.backend)
        return Offer(skipped=why) if why else Offer(values=(64, 16, 4))


class JitCompile(Knob):
    """The value that differs from what Keras's auto picks on the backend (`Backend.auto_jit_compile`)."""

    def offer(self, where: Where) -> Offer:
        """
        >>> from fitspeed.core.config import TrialConfig
        >>> JIT_COMPILE.offer(Where(TrialConfig(), False, 2, None, "tiny", None, on="torch")).values
        (True,)
        """
        return Offer(values=(not backend_of(where.backend).auto_jit_compile(where.has_gpu),))


STEPS_PER_EXECUTION = StepsPerExecution(
    name="steps_per_execution",
    description="Batches run per compiled call: compile(steps_per_execution=N).",
    values="integer >= 1",
    default=1,
    scope="model",
    stage="compile",
    parse=_steps_per_execution,
)

JIT_COMPILE = JitCompile(
    name="jit_compile",
    description="XLA compilation of the train step: compile(jit_compile=...).",
    values="auto, true, false",
    default="auto",
    scope="model",
    stage="compile",
    parse=_jit_compile,
    changes_numerics=True,
)
