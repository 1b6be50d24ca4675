"""best.json's snippet carries the input knobs the trials applied, as code that runs on a real pipeline."""

from __future__ import annotations

from fitspeed.core.config import TrialConfig
from fitspeed.core.best_json import snippet


def test_the_snippet_applies_every_tf_data_knob_to_a_real_pipeline() -> None:
    import keras
    import tensorflow as tf

    config = TrialConfig(prefetch="autotune", map_parallelism=4, cache="memory", data_autotune=False,
                         data_deterministic=False, steps_per_execution=8)
    code = snippet(config)
    assert "steps_per_execution=8" in code and "ds.prefetch(tf.data.AUTOTUNE)" in code
    data_part = code[code.index("# Your tf.data input pipeline"):]
    space = {"ds": tf.data.Dataset.range(8), "decode_and_augment": lambda x: x * 2, "keras": keras}
    exec(data_part, space)  # the user's own names stand in for theirs
    ds = space["ds"]
    assert sorted(int(v) for v in ds) == [0, 2, 4, 6, 8, 10, 12, 14]  # deterministic=False: any order
    assert ds.options().autotune.enabled is False and ds.options().deterministic is False


def test_the_snippet_sets_a_pydatasets_workers() -> None:
    import keras

    code = snippet(TrialConfig(workers=3, use_multiprocessing=False, max_queue_size=4))
    loader = code[code.index("class MyDataset"):]
    space: dict = {"keras": keras}
    exec(loader + "\n    def __len__(self):\n        return 1\n", space)
    made = space["MyDataset"]()
    assert (made.workers, made.use_multiprocessing, made.max_queue_size) == (3, False, 4)
