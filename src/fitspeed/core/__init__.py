"""The vocabulary every other layer speaks: knobs, the frozen configuration, workloads, records.

What lives here: the error classes (`errors`), the backends and what each
cannot do (`backends`), the knob table and its parsers (`knobs`), `TrialConfig` (`config`), built-in workload names (`workloads`), the
data reference (`data_ref`), which input knobs apply to which kind of data
(`input_kinds`), the trial spec and record (`record`), best.json written and
read (`best_json`), and pure statistics
(`stats`).

May import: the standard library, numpy-free pure Python and scipy (lazily).
Never imports another fitspeed layer, a framework, rich or matplotlib.
"""
