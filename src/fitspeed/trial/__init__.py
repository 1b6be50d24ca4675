"""The trial child: one configuration measured in a fresh process.

The parent reaches this layer only as `python -m fitspeed.trial SPEC.json`
(`fitspeed.measure.runner`); `fitspeed.apply` and `fitspeed.auto_steps` also
use it in the user's own process. `driver` is the one trial driver (a
subject, one function per mode, one mapping from a failure to its status),
`protocol` builds a built-in or builder trial's subject and runs it, `apply`
owns the process-wide and compile-time knobs, `models` builds the built-in
models, `timing` is the clock callback, `doctor` holds doctor's
measurements, `profiling` and `trace_ops` capture and read traces,
`script_hook` runs inside a user's training script (`import_watch` sees keras
arrive, `script_stop` says why a script ended before its timed fit()), and
`data/` loads data and applies the input knobs.

May import: `fitspeed.core`, `fitspeed.machine` and the frameworks (keras,
tensorflow, jax, torch). Never `measure`, `search`, `report` or `cli`.
Importing this package itself imports no framework.
"""
