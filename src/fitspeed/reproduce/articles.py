"""The five articles' experiments as plans, at three sizes, with each article's own figures.

| name                        | article | what it runs                                                          |
|-----------------------------|---------|-----------------------------------------------------------------------|
| steps-per-execution         | 000     | two CNNs x two batch sizes x steps_per_execution; a discarded epoch, then the time for a fixed number of steps |
| input-pipeline              | 001     | the tf.data ladder on an images: folder; samples/s and input-bound %  |
| batch-and-workers           | 002     | batch size (throughput, accuracy after fixed epochs); PyDataset workers; predict(1 sample) |
| precision-and-determinism   | 003     | float32, mixed_bfloat16, mixed_float16 x op determinism, two runs each |
| channels-first              | 004     | channels_last/first x 1/2 devices on cnn10 and a WRN; time, accuracy, monitor |

Sizes: "full" is the article's (meant for a GPU), "quick" cuts models (the
`-s` quarter-width models on 16x16 inputs), steps and epochs to run in
minutes on a 2-core CPU, "tiny" runs in seconds for the tests. Every plan's
`sizes` says what it ran.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable
from typing import Any

from fitspeed.core.config import TrialConfig
from fitspeed.core.json_data import JSONObject
from fitspeed.core.record import Mode, Status, TrialRecord, TrialSpec
from fitspeed.measure.doctor import verdict, wait_share
from fitspeed.reproduce.experiment import Plan, Row, speed_of

SIZES = ("tiny", "quick", "full")
SHAPES = {"tiny": (16, 16, 3), "quick": (16, 16, 3), "full": (32, 32, 3)}
SAMPLES = {"tiny": (512, 128), "quick": (2048, 512), "full": (50_000, 10_000)}  # train, test caps
TIMEOUT_S = {"tiny": 300.0, "quick": 300.0, "full": 3600.0}


def _spec(size: str, model: str, data: str | None, mode: Mode, steps: int | None, repeats: int,
          timeout_s: float | None = None, **knobs: Any) -> TrialSpec:
    return TrialSpec(model=model, data=data, config=TrialConfig(**knobs), steps=steps, repeats=repeats,
                     mode=mode, validate=mode in (Mode.TIME, Mode.TRAIN), timeout_s=timeout_s or TIMEOUT_S[size],
                     target_seconds=0.6)


# -- 000 -----------------------------------------------------------------------------------------

ARTICLE_000: tuple[dict[str, Any], ...] = ({"batch_size": 32, "parameters": "2M", "duration_s": 13.5, "percent": 91.2},
               {"batch_size": 32, "parameters": "10M", "duration_s": 17.7, "percent": 84.2},
               {"batch_size": 256, "parameters": "2M", "duration_s": 18.0, "percent": 83.7},
               {"batch_size": 256, "parameters": "10M", "duration_s": 33.9, "percent": 94.1})


def steps_per_execution(size: str, data: str) -> Plan:
    models = {"full": (("cnn-low", "2M"), ("cnn-high", "10M")),
              "quick": (("cnn-low-s", "2M"), ("cnn-high-s", "10M")), "tiny": (("tiny", "2M"),)}[size]
    batches = {"full": (32, 256), "quick": (32, 128), "tiny": (32,)}[size]
    values = {"full": (0, 1, 20, 100, 500), "quick": (0, 20), "tiny": (0, 4)}[size]
    steps = {"full": 1000, "quick": 20, "tiny": 8}[size]
    epochs = {"full": 2, "quick": 4, "tiny": 2}[size]
    article: dict[tuple[Any, Any], float] = {(row["batch_size"], row["parameters"]): float(row["percent"])
                                             for row in ARTICLE_000}
    rows = []
    for model, params in models:
        for batch in batches:
            group = f"{model} · batch {batch}"
            for n in values:
                rows.append(Row(
                    label=f"{group} · {'unset' if n == 0 else n}",
                    cells={"model": model, "article_model": params, "batch_size": batch,
                           "steps_per_execution": "unset" if n == 0 else n},
                    spec=_spec(size, model, data, Mode.TRAIN, steps, epochs, batch_size=batch,
                               steps_per_execution=max(n, 1)),
                    group=group, baseline=n == 0,
                    article=article.get((batch if size == "full" else {32: 32, 128: 256}.get(batch, batch), params))
                    if n == values[-1] else None,
                ))
    return Plan(
        name="steps-per-execution", article="000",
        title="steps_per_execution: N batches per compiled call",
        claim="On a Colab TPU, steps_per_execution=500 was the fastest in every case, at 84–94% of the unset "
              "time; 20 was slower than unset.",
        article_setup="a Google Colab TPU (TensorFlow 2.3, tf.keras 2.4.3)",
        columns=(("model", "model"), ("article_model", "article's"), ("batch_size", "batch"),
                 ("steps_per_execution", "steps_per_execution")),
        rows=tuple(rows), seeds=(0,),
        sizes=(f"{', '.join(m for m, _ in models)}; batch {', '.join(map(str, batches))}; {epochs} epochs of "
               f"{steps} steps from one seed, the first discarded (it holds compilation), the time is the median "
               f"of the later epochs; steps_per_execution unset (Keras 3: 1), "
               f"{', '.join(str(v) for v in values[1:])}"
               + ("" if size == "full" else " (cut down from the article's CNNs, 1000 steps, batch 32/256 and "
                  "N up to 500, to fit a CPU; the article's % at 500 stands beside our largest N, and its "
                  "batch 256 beside our largest batch)")),
        article_unit="% of the unset time (N=500)",
        article_table=ARTICLE_000,
        notes=(("Keras 3 has no 'unset' distinct from 1: compile(steps_per_execution=1) is its default. "
                "steps_per_execution changes when callbacks run, not the arithmetic: from one seed every "
                "N should end with the same weights and accuracy."),),
    )


# -- 001 -----------------------------------------------------------------------------------------

LADDER: tuple[tuple[str, dict[str, Any]], ...] = (
    ("naive: sequential map, no prefetch", {}),
    ("+ parallel map (num_parallel_calls=AUTOTUNE)", {"map_parallelism": "autotune"}),
    ("+ prefetch(AUTOTUNE)", {"prefetch": "autotune"}),
    ("+ cache() after decoding", {"cache": "memory"}),
    ("+ vectorized map (batch, then scale)", {"vectorize": True}),
    ("+ interleave from files", {"interleave": 2}),
)


def _ms_per_step(record: TrialRecord) -> float | None:
    return record.metrics.ms_per_step if record.metrics is not None else None


def _input_bound(row: Row, records: list[TrialRecord], every: dict[str, list[TrialRecord]]) -> JSONObject:
    compute = [ms for r in every.get(COMPUTE_ROW, []) if r.status == Status.OK and (ms := _ms_per_step(r)) is not None]
    mine = [ms for r in records if r.status == Status.OK and (ms := _ms_per_step(r)) is not None]
    if not compute or not mine or row.label == COMPUTE_ROW:
        return {"ms_per_step": mine[0] if mine else None}
    share = wait_share(compute[0], mine[0])
    return {"ms_per_step": mine[0], "input_bound_percent": 100 * share,
            "verdict": verdict(share)}


COMPUTE_ROW = "training alone (batches in memory)"
SHUFFLE_BUFFER = 4096  # at least the folder's files: a full shuffle, so no batch holds one class only


def input_pipeline(size: str, images: str) -> Plan:
    model = {"full": "cnn-low", "quick": "cnn-low-s", "tiny": "tiny"}[size]
    steps, repeats = {"full": (200, 3), "quick": (60, 2), "tiny": (6, 1)}[size]
    batch = 64 if size != "tiny" else 16
    ladder = LADDER if size != "tiny" else LADDER[:1]
    rows = [Row(COMPUTE_ROW, {"pipeline": COMPUTE_ROW}, _spec(size, model, images, Mode.COMPUTE, steps, repeats,
                                                              batch_size=batch), timed=False)]
    knobs: dict[str, Any] = {"shuffle_buffer": SHUFFLE_BUFFER}  # every rung: shuffle before repeat (item 9)
    for index, (label, change) in enumerate(ladder):
        knobs = {**knobs, **change}
        rows.append(Row(label, {"pipeline": label}, _spec(size, model, images, Mode.TIME, steps, repeats,
                                                          batch_size=batch, **knobs),
                        group="ladder", baseline=index == 0))
    return Plan(
        name="input-pipeline", article="001",
        title="The tf.data ladder: parallel map, prefetch, cache, vectorized map, interleave",
        claim="With nothing tuned, a Keras model on a Colab TPU used 4.1% of the matrix units; the article lists "
              "the fixes (tf.data, prefetch at the end, num_parallel_calls, map-and-batch, interleave, "
              "vectorized maps, cache, shuffle before repeat) without measuring each.",
        article_setup="a Colab TPU v2 (TensorFlow 1.12, Fashion-MNIST)",
        columns=(("pipeline", "pipeline"),),
        rows=tuple(rows), seeds=(0,),
        sizes=(f"{model}; batch {batch}; an images: folder of JPEG files, decoded, resized and scaled per example "
               "(the simple user function article 001 says to vectorize), shuffled before repeat in every rung "
               f"(shuffle({SHUFFLE_BUFFER})): read in folder order, a batch holds one class and training learns "
               "next to nothing; each rung "
               f"adds to the one before; {repeats} timed windows of {steps} steps after a warm-up; input-bound % "
               "= 1 - (training alone / training with the pipeline), per step"
               + ("" if size == "full" else " (cut down to a small model on 16x16 images for a CPU)")),
        extra=_input_bound, extra_columns=(("ms_per_step", "ms/step"), ("input_bound_percent", "input-bound %")),
        notes=(("The article reports no figure per fix; the comparison is with its list's order and its claim "
                "that an unfed accelerator idles. On a CPU the pipeline and the model share the same cores."),),
    )


# -- 002 -----------------------------------------------------------------------------------------

def _predict_cells(row: Row, records: list[TrialRecord], every: dict[str, list[TrialRecord]]) -> JSONObject:
    ok = [r for r in records if r.status == Status.OK]
    if not ok or ok[0].spec.mode != Mode.PREDICT or ok[0].metrics is None:
        return {}
    m = ok[0].metrics.other
    return {"predict_one_ms": m["predict_one_ms"]["median"], "call_one_ms": m["call_one_ms"]["median"],
            "batched_ms_per_sample": m["batched_ms_per_sample"]}


def batch_and_workers(size: str, data: str) -> Plan:
    model = {"full": "cnn-low", "quick": "cnn-low-s", "tiny": "tiny"}[size]
    train = SAMPLES[size][0]
    batches = {"full": (64, 256, 1024), "quick": (64, 256, 1024), "tiny": (64,)}[size]
    epochs = {"full": 10, "quick": 4, "tiny": 2}[size]
    worker_steps, worker_epochs = {"full": (64, 3), "quick": (32, 2), "tiny": (4, 2)}[size]
    workers = 2 if size != "full" else 4
    rows = []
    for batch in batches:
        rows.append(Row(f"batch {batch}", {"part": "batch size", "setting": f"batch {batch}"},
                        _spec(size, model, data, Mode.TRAIN, max(1, train // batch), epochs, batch_size=batch),
                        group="batch", baseline=batch == batches[0]))
    loaders = [("PyDataset, 1 worker thread (its default)", {}),
               (f"{workers} worker threads", {"workers": workers, "use_multiprocessing": False}),
               (f"{workers} worker processes", {"workers": workers, "use_multiprocessing": True})]
    for index, (label, knobs) in enumerate(loaders if size != "tiny" else loaders[:1]):
        rows.append(Row(label, {"part": "slow __getitem__", "setting": label},
                        _spec(size, model, "pyloader", Mode.TRAIN, worker_steps, worker_epochs, batch_size=32, **knobs),
                        group="workers", baseline=index == 0))
    rows.append(Row("predict: 1 sample per call vs batches", {"part": "predict", "setting": "1 sample vs batch 256"},
                    _spec(size, model, data, Mode.PREDICT, None, 3, batch_size=256), timed=False))
    return Plan(
        name="batch-and-workers", article="002",
        title="Batch size, PyDataset workers, and predict() one sample at a time",
        claim="On a CPU, batch 64 → 1024 trained about 4× faster (6× on a GPU) for the author's model; "
              "fit_generator's workers parallelize only the data generation (threads under the GIL, or "
              "processes); predict() on one sample, called tens of thousands of times, ran faster on the CPU "
              "than on the GPU.",
        article_setup="a 6-core (12-thread) CPU under Windows 10 and an NVIDIA GPU (Keras 2.3.1, TensorFlow 2.1)",
        columns=(("part", "part"), ("setting", "setting")),
        rows=tuple(rows), seeds=(0,),
        sizes=(f"{model}; batch sizes {', '.join(map(str, batches))} each for {epochs} epochs over the same "
               f"{train} samples (fewer steps for larger batches; the learning rate is not rescaled); the "
               f"slow PyDataset (`pyloader`) at batch 32 for {worker_epochs} epochs of {worker_steps} steps; "
               "predict() timed per call"
               + ("" if size == "full" else " (cut down for a CPU)")),
        extra=_predict_cells,
        extra_columns=(("predict_one_ms", "predict(1) ms"), ("call_one_ms", "model(x) ms"),
                       ("batched_ms_per_sample", "batched ms/sample")),
        notes=(("The article's model was its own reinforcement-learning network, not published; "
                "the batch-size figures here are for the plan's CNN."),),
    )


# -- 003 -----------------------------------------------------------------------------------------

QUICK_PRECISION_TIMEOUT_S = 75.0

def _identical(row: Row, records: list[TrialRecord], every: dict[str, list[TrialRecord]]) -> JSONObject:
    digests = [r.measured("weights_sha256") for r in records if r.status == Status.OK]
    if len(digests) < 2:
        return {"bit_identical": None}
    return {"bit_identical": "yes" if len(set(digests)) == 1 else "no"}


def precision_and_determinism(size: str, data: str) -> Plan:
    model = {"full": "cnn10", "quick": "cnn-low-s", "tiny": "tiny"}[size]
    steps, epochs = {"full": (390, 10), "quick": (20, 4), "tiny": (4, 2)}[size]
    batch = 128 if size == "full" else 64
    precisions = ("float32", "mixed_bfloat16", "mixed_float16") if size != "tiny" else ("float32",)
    timeout_s = {"full": None, "quick": QUICK_PRECISION_TIMEOUT_S, "tiny": None}[size]
    rows = []
    for deterministic in (False, True) if size != "tiny" else (False,):
        for precision in precisions if size == "full" or not deterministic else precisions[:1]:
            rows.append(Row(f"{precision} · determinism {'on' if deterministic else 'off'}",
                            {"precision": precision, "deterministic": "on" if deterministic else "off"},
                            _spec(size, model, data, Mode.TRAIN, steps, epochs, timeout_s, batch_size=batch,
                                  precision=precision, deterministic=deterministic),
                            group="all", baseline=precision == "float32" and not deterministic, runs=2))
    return Plan(
        name="precision-and-determinism", article="003",
        title="Mixed precision and op determinism",
        claim="Mixed precision speeds training only on hardware with float16/bfloat16 units (Tensor Cores, "
              "TPUs) and keeps accuracy with float32 variables; TF_DETERMINISTIC_OPS makes GPU runs repeat "
              "exactly. The article measures neither.",
        article_setup="TensorFlow 2.1 on GPUs and Colab TPUs (no measurements)",
        columns=(("precision", "precision"), ("deterministic", "op determinism")),
        rows=tuple(rows), seeds=(0,),
        sizes=(f"{model}; batch {batch}; {epochs} epochs of {steps} steps; each configuration twice from one "
               "seed, to see whether the weights come out bit-identical"
               + ("" if size == "full" else f" (cut down for a CPU; op determinism on float32 only; a trial is "
                  f"stopped after {QUICK_PRECISION_TIMEOUT_S:.0f} s, about 5x what float32 takes here, and a "
                  "precision this CPU runs far slower is recorded as a timeout, not waited for)")),
        extra=_identical, extra_columns=(("bit_identical", "bit-identical over 2 runs"),),
        notes=("Accuracy per configuration is the mean of its two runs; their min–max is the spread.",),
    )


# -- 004 -----------------------------------------------------------------------------------------

def _monitor(row: Row, records: list[TrialRecord], every: dict[str, list[TrialRecord]]) -> JSONObject:
    """Total fit() time and the monitor's figures (the median over the row's trials, one per seed), and
    for a 2-device row its time as % of the 1-device row's with the same model and data_format."""
    ok = [r for r in records if r.status == Status.OK]

    def median(values: list[Any]) -> float | None:
        present = [v for v in values if v is not None]
        return statistics.median(present) if present else None

    out = {"total_s": median([r.measured("fit_s") for r in ok])}
    for key in ("cpu_percent_mean", "rss_peak_mb", "device_util_mean", "device_memory_peak_mb"):
        out[key] = median([(r.monitor or {}).get(key) for r in ok])
    if row.cells["devices"] > 1:
        one, mine = speed_of(every.get(_label_004(row.cells["model"], 1, row.cells["data_format"]), [])), speed_of(ok)
        out["percent_of_one_device"] = 100 * one / mine if one and mine else None
    return out


ARTICLE_004 = {"cnn10": 91.0, "cnn10-s": 91.0, "wrn-28-10": 95.5, "wrn-16-4-s": 95.5}  # its quick stand-ins too


def _label_004(model: str, devices: int, fmt: str) -> str:
    return f"{model} · {devices} device{'s' if devices > 1 else ''} · {fmt}"


def channels_first(size: str, data: str) -> Plan:
    models = {"full": ("cnn10", "wrn-28-10"), "quick": ("cnn10-s", "wrn-16-4-s"), "tiny": ("tiny",)}[size]
    steps, epochs = {"full": (390, 10), "quick": (20, 4), "tiny": (4, 2)}[size]
    batch = 128 if size == "full" else 64  # the global batch, on 1 device and split over 2
    rows = []
    for model in models:
        for devices in (1, 2):
            for fmt in ("channels_last", "channels_first"):
                spec = _spec(size, model, data, Mode.TRAIN, steps, epochs, batch_size=batch // devices,
                             data_format=fmt, devices=devices)
                rows.append(Row(_label_004(model, devices, fmt),
                                {"model": model, "devices": devices, "data_format": fmt}, _monitored(spec),
                                group=f"{model} · {devices}", baseline=fmt == "channels_last",
                                article=ARTICLE_004.get(model) if fmt == "channels_first" and devices == 1 else None,
                                seeds=(0,) if devices > 1 and size == "quick" else None))
    return Plan(
        name="channels-first", article="004",
        title="channels_first against channels_last, on 1 and 2 devices",
        claim="On one RTX 2080 Ti, channels_first trained under 10% faster for the 10-layer CNN and about 5% "
              "faster for WRN-28-10, with no difference in accuracy; two GPUs (multi_gpu_model) were slower "
              "than one either way.",
        article_setup="one and two RTX 2080 Ti (TensorFlow 1.13.1, CUDA 10.0, cuDNN 7.5.1)",
        columns=(("model", "model"), ("devices", "devices"), ("data_format", "data_format")),
        rows=tuple(rows), seeds=(0, 1) if size != "tiny" else (0,),
        sizes=(f"{', '.join(models)}; batch {batch}, on 2 devices {batch // 2} per device (the same global batch "
               f"of {batch}, split as multi_gpu_model split it, so accuracy and the time for the same steps "
               f"compare); {epochs} epochs of {steps} steps; total time is the whole "
               "fit() (compilation included, as the article's total training time); CPU and memory sampled "
               "by the monitor during it; time % is against channels_last on as many devices, and "
               "'% of 1 device' is a 2-device row's time against the same data_format's on 1"
               + ("" if size == "full" else " (cut down from cnn10 and WRN-28-10 on 32x32 for a CPU)")
               + ("; the 2-device rows from seed 0 only, to keep the run within 5 minutes" if size == "quick" else "")),
        article_unit="% of the channels_last time (read from its text: 'under 10%', 'under 5%' faster)",
        notes=(("Devices: with GPUs, the first two, under tf.distribute.MirroredStrategy (the article used Keras's "
                "multi_gpu_model). With none, the 2-device rows run on two logical CPU devices carved from the "
                "same cores: the same silicon, so they measure what data-parallel training costs (replicas, "
                "splitting the batch, summing the gradients), not extra hardware."),),
        extra=_monitor,
        extra_columns=(("percent_of_one_device", "% of 1 device"), ("total_s", "total s"),
                       ("cpu_percent_mean", "CPU % mean"), ("rss_peak_mb", "memory MiB peak"),
                       ("device_util_mean", "device util %"), ("device_memory_peak_mb", "device MiB peak")),
    )


def _monitored(spec: TrialSpec) -> TrialSpec:
    import dataclasses

    return dataclasses.replace(spec, monitor=True)


PLANS: dict[str, tuple[str, Callable[[str, str], Plan]]] = {
    "steps-per-execution": ("000", steps_per_execution),
    "input-pipeline": ("001", input_pipeline),
    "batch-and-workers": ("002", batch_and_workers),
    "precision-and-determinism": ("003", precision_and_determinism),
    "channels-first": ("004", channels_first),
}
