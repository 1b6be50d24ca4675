"""Tables render from typed records; read as text at 100 columns."""

from __future__ import annotations

import dataclasses
import io
from typing import Any

from rich.console import Console

from fitspeed.console import tables, tune_tables
from fitspeed.core.config import TrialConfig
from fitspeed.core.record import Status, TrialRecord, TrialSpec, new_record
from fitspeed.core.workloads import DATA, MODELS
from fitspeed.measure.comparison import Comparison
from fitspeed.search.decision import Decision


def render(draw) -> str:  # noqa: ANN001
    console = Console(file=io.StringIO(), width=100, color_system=None)
    draw(console)
    return console.file.getvalue()  # type: ignore[attr-defined]


def ok_record(spec: TrialSpec, speed: float, **fields: Any) -> TrialRecord:
    return new_record(spec, Status.OK, **fields, metrics={
        "samples_per_s": {"median": speed, "min": speed * 0.9, "max": speed * 1.1, "cv": 0.05, "n": 3},
        "ms_per_step": 1000 * 32 / speed, "batch_size": 32, "steps_per_repeat": 64, "window_s": [1, 1, 1],
        "compile_s": 1.25, "peak_host_mb": 700.0, "peak_device_mb": None, "final_loss": 0.123456,
    })


def test_measure_table_shows_every_figure() -> None:
    spec = TrialSpec(model="tiny", config=TrialConfig(steps_per_execution=32))
    text = render(lambda c: tables.print_trials(c, [ok_record(spec, 12345.0)]))
    for expected in ("tiny · synthetic", "steps_per_execution=32", "12,345 (11,110–13,580)", "5.0%",
                     "2.59", "64 × 3", "1.25", "700", "0.1235"):
        assert expected in text, expected


def test_measure_table_names_the_cpu_features_and_onednn() -> None:
    record = ok_record(TrialSpec(model="tiny"), 1000.0,
                       environment={"cpu_features": ["avx2", "avx512f", "amx_bf16"], "onednn": False})
    text = render(lambda c: tables.print_trials(c, [record]))
    assert "avx2 avx512f amx_bf16" in text and "oneDNN (TensorFlow)" in text and "off" in text


def test_failed_trial_shows_its_reason() -> None:
    record = new_record(TrialSpec(model="tiny"), Status.OOM, reason="the trial used 2000 MiB")
    text = render(lambda c: tables.print_trials(c, [record]))
    assert "oom: the trial used 2000 MiB" in text


def test_comparison_table_and_verdict() -> None:
    a, b = TrialSpec(model="tiny"), TrialSpec(model="tiny", config=TrialConfig(steps_per_execution=8))
    comparison = Comparison(a, b)
    for speed_a, speed_b in ((100.0, 150.0), (110.0, 160.0), (105.0, 158.0)):
        comparison.pairs.append((ok_record(a, speed_a, arm="a", pair=0), ok_record(b, speed_b, arm="b", pair=0)))
    text = render(lambda c: tables.print_comparison(c, comparison))
    assert "A: defaults   B: steps_per_execution=8" in text
    assert "1.500" in text and "B is at least 1.42× faster (1.42–1.56, median 1.50×)" in text  # the lower bound first
    assert comparison.record()["status"] == "ok"


def test_show_states_the_resolution_from_the_studys_intervals() -> None:
    from fitspeed.search.summary import study_summary

    base, best = TrialConfig(), TrialConfig(steps_per_execution=8)

    def row(config: TrialConfig, phase: str, speed: float) -> dict:
        return {"number": 0, "phase": phase, "config": config.to_dict(),
                "record": ok_record(TrialSpec(model="tiny", config=config), speed)}

    data = {"study": "s", "meta": {"model": "tiny", "data": None, "base": base.to_dict(), "min_gain": 0.05},
            "trials": [row(base, "baseline", 100.0), row(best, "sweep", 150.0)], "guards": {},
            "verification": {"config": best.to_dict(), "claimed": True, "verdict": "B is 1.50× faster",
                             "estimate": {"median": 1.5, "ci_low": 1.44, "ci_high": 1.56, "confidence": 0.95,
                                          "ratios": [1.5] * 6}}}
    text = " ".join(render(lambda c: tune_tables.print_tune(c, study_summary(data))).split())
    assert "resolution" in text and "0.120 wide (95%, 6 pairs)" in text and "±6%" in text
    # the verdict speaks of A and B (issue 61): the table says A is the defaults, B the answer
    assert "A: baseline │ defaults: 100 samples/s" in text
    assert "B: best │ steps_per_execution=8: 150 samples/s" in text
    data["verification"] = None
    assert "resolution" not in render(lambda c: tune_tables.print_tune(c, study_summary(data)))


def test_tune_tables_at_80_columns_keep_every_knob_whole() -> None:
    # issue 25, item 11: `jit_compil e=True` at 80 columns
    from fitspeed.search.summary import study_summary

    base = TrialConfig()
    configs = [TrialConfig(jit_compile=True), TrialConfig(data_format="channels_first"),
               TrialConfig(steps_per_execution=64, precision="mixed_bfloat16"),
               TrialConfig(steps_per_execution=64, precision="mixed_bfloat16", jit_compile=True,
                           intra_op_threads=1, data_autotune=False)]

    def row(config: TrialConfig, phase: str, speed: float) -> dict:
        return {"number": 0, "phase": phase, "config": config.to_dict(),
                "record": ok_record(TrialSpec(model="tiny", config=config), speed)}

    data = {"study": "s", "meta": {"model": "tiny", "data": None, "base": base.to_dict(), "min_gain": 0.05},
            "trials": [row(base, "baseline", 100.0), *(row(c, "sweep", 90.0 + 30 * i) for i, c in enumerate(configs))],
            "guards": {}, "verification": None,
            "decisions": [{"purpose": "combine", "a_label": configs[2].label(), "b_label": configs[3].label(),
                           "a": configs[2].to_dict(), "b": configs[3].to_dict(),
                           "pairs": [[100.0, 150.0], [110.0, 160.0]], "ratio": 1.47, "low": 1.2, "high": 1.8,
                           "confidence": 0.7, "verdict": "faster", "why": None}]}
    data["decisions"].append({"purpose": "screen", "a_label": "defaults", "b_label": configs[1].label(),
                              "a": base.to_dict(), "b": configs[1].to_dict(), "pairs": [[100.0, 30.0]],
                              "ratio": 0.3, "low": None, "high": None, "verdict": "slower", "why": None})
    data["decisions"].append({"purpose": "sampler", "a_label": configs[2].label(), "b_label": configs[3].label(),
                              "a": configs[2].to_dict(), "b": configs[3].to_dict(), "pairs": [], "ratio": None,
                              "low": None, "high": None, "verdict": "not confirmed", "why": "the budget ran out"})
    data["decisions"] = [Decision.from_dict({"id": f"d{i}", **d}) for i, d in enumerate(data["decisions"])]
    summary = study_summary(data)
    summary = dataclasses.replace(summary, skipped_groups=((("workers", "use_multiprocessing", "max_queue_size"),
                                                              "applies to a keras.utils.PyDataset; the data here is numpy arrays"),))
    console = Console(file=io.StringIO(), width=80, color_system=None)
    tune_tables.print_tune(console, summary)
    tables.print_trials(console, [r["record"] for r in data["trials"]])
    text = console.file.getvalue()  # type: ignore[attr-defined]
    import re

    # a knob=value cut by the table's wrap leaves a piece with an underscore and no '=', or one starting with '='
    from fitspeed.core.knobs import KNOBS_BY_NAME

    broken = [w for w in re.split(r"[\s│┃|]+", text)
              if ("_" in w and "=" not in w and w.rstrip(",") not in KNOBS_BY_NAME) or w.startswith("=")]
    assert not broken, text
    # nothing cropped: every line fits, and every table row ends in its border
    lines = text.splitlines()
    assert all(len(line) <= 80 for line in lines), text
    assert all(line.rstrip()[-1] in "│┃┓┩┐┘┛┤╇╉╋┫" for line in lines if line.startswith(("│", "┃", "┏", "┡", "└"))), text
    assert "steps_per_execution=64" in text.split() and "data_autotune=False" in text.split()
    # the knob table names the median it divides by (the screen's line used the screen's baselines)
    assert "against the median of all the baseline's" in " ".join(text.split())


# -- readable anywhere: at 80 columns every value is whole -----------------------------------

def at_80(draw) -> str:  # noqa: ANN001
    console = Console(file=io.StringIO(), width=80, color_system=None)
    draw(console)
    return console.file.getvalue()  # type: ignore[attr-defined]


def assert_whole(text: str, values: list[Any]) -> None:
    """Every word of every value is a word of the text: none cut ('tensorf…') or split across lines."""
    import re

    words = set(re.split(r"[\s│┃]+", text))
    cut = sorted({word for value in values for word in str(value).split() if word not in words})
    assert not cut, text
    assert all(len(line) <= 80 for line in text.splitlines()), text


def test_knobs_at_80_columns_show_every_value_and_backend_whole() -> None:
    """`fitspeed knobs | cat`: 'tensorf…', 'float3…' and descriptions cut at a dozen characters (issue 36)."""
    from fitspeed.core.backends import BACKENDS
    from fitspeed.core.keras_options import NOT_KNOBS
    from fitspeed.core.knobs import KNOBS

    short = at_80(tables.print_knobs)  # one screen: a line a knob (a long list of values wraps)
    assert "…" not in short and len(short.splitlines()) <= 40, short
    assert_whole(short, [value for knob in KNOBS for value in (knob.name, knob.values, knob.default)])
    text = at_80(lambda console: tables.print_knobs(console, full=True))
    assert "…" not in text
    assert_whole(text, [value for knob in KNOBS for value in (knob.name, knob.values, knob.default, knob.scope,
                                                              ", ".join(knob.backends()), knob.description)])
    assert_whole(text, [why for backend in BACKENDS.values() for name in backend.own_knobs
                        if (why := backend.why_not_on_top(name))])
    assert_whole(text, [*NOT_KNOBS, *NOT_KNOBS.values()])
    # one knob per block where the table cannot fit: its name, then each field on a line of its own
    lines = text.splitlines()
    at = lines.index("knob: precision")
    assert lines[at + 1].split() == ["values", "float32,", "mixed_float16,", "mixed_bfloat16"]
    assert lines[at + 2].split() == ["default", "float32"]
    wide = Console(file=io.StringIO(), width=250, color_system=None)
    tables.print_knobs(wide, full=True)
    assert "┃ knob " in wide.file.getvalue()  # a terminal wide enough still gets the table  # type: ignore[attr-defined]


def test_trial_tables_at_80_columns_keep_every_value_whole() -> None:
    monitor = {"cpu_percent_mean": 183.0, "cpu_percent_peak": 199.0, "threads_peak": 37, "device_util_mean": 80.0,
               "device_util_peak": 99.0, "device_memory_peak_mb": 12000.0, "power_mean_w": 250.0, "samples": 30,
               "host_cpu_percent_mean": 90.0}
    config = TrialConfig(steps_per_execution=64, precision="mixed_bfloat16", data_format="channels_first")
    records = [ok_record(TrialSpec(model="tiny", config=config), 123456.0, monitor=monitor),
               ok_record(TrialSpec(model="tiny"), 1234.0, monitor=monitor)]
    for shown in (records, records[:1], [dataclasses.replace(r, monitor=None) for r in records]):
        text = at_80(lambda c, shown=shown: tables.print_trials(c, shown))
        assert_whole(text, [config.label(), "123,456", "(111,110–135,802)", "0.1235"]
                     + (["(1,111–1,357)"] if len(shown) > 1 else []))
    text = at_80(lambda c: tables.print_trials(c, records))
    assert_whole(text, ["GPU % (peak)", "80 (99)", "12,000"])  # the monitor's columns: one trial per block
    assert_whole(at_80(tables.print_workloads), [d.description for d in DATA.values()]
                 + [m.description for m in MODELS.values()])
