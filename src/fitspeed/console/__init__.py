"""What the command line and the Python API share, below both: the values a person gives and what they are shown.

`workload` is the workload resolved, which makes a trial's `TrialSpec`;
`option_values` parses the sizes, durations and lists a person types;
`tune_lines` turns a tune's events into the lines it shows; `terminal`
holds the two consoles and the bar a tune draws on a terminal; `tables`
draws the terminal tables, and `tune_tables` a study's (`fitspeed tune`,
`fitspeed show`, `TuneResult.table`).

May import every layer below cli/ except trial/, and rich; cli/ and the
public API (`fitspeed.api`) import it, and it imports neither.
"""
