"""`fitspeed tune`: the search over knobs, and what it keeps.

`tuner` runs the search (baseline, sweep, combination, sampler,
verification) and announces typed `events`; `phase` names what each trial is
measured for and what each decision decides; `space` lists the knob values to
try; `guard` is the numerics guard; `studies` opens and reads Optuna studies;
`summary` turns a study into plain data (`fitspeed.core.best_json` writes it
into best.json); `scale` is `fitspeed scale`'s experiment over 1..N devices.

May import: `fitspeed.core`, `fitspeed.machine`, `fitspeed.measure` and
Optuna. Never a framework, rich or matplotlib.
"""
