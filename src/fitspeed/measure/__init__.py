"""The parent side of measuring: run trials and read their records.

`runner` starts one trial child and always returns a record; `comparison`
interleaves two configurations (A B A B …) and estimates B/A; `results` is
the append-only JSON-lines results file; `doctor` diagnoses input-bound
training from trials in doctor's modes; `convert` runs `fitspeed convert`'s
child.

May import: `fitspeed.core` and `fitspeed.machine`. Never a framework and
never `fitspeed.trial`: the child is reached only as a process.
"""
