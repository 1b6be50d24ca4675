"""`pyloader`: a built-in PyDataset whose `__getitem__` does CPU-heavy Python work.

Runs in the trial child only. It is article 002's slow generator, on purpose:
every example is made with numpy (which releases the GIL for its array work)
and then "registered" under a string key built from its features in pure
Python, the hash-key-from-a-stringified-feature mistake the article's author
found with cProfile. That string work holds the GIL, so worker threads barely
help and worker processes do (`workers`, `use_multiprocessing`).
"""

from __future__ import annotations

from typing import Any

import keras
import numpy as np

KEY_FEATURES = 768  # features formatted into each example's key
BATCHES = 64  # one epoch; the trial cycles it
HELD_OUT_BATCHES = 4  # validation: batches past the epoch, never trained on


def feature_key(example: np.ndarray) -> str:
    """The slow part: a dictionary key made by formatting features as text."""
    return ",".join(f"{value:.4f}" for value in example.ravel()[:KEY_FEATURES].tolist())


class HeavyLoader(keras.utils.PyDataset):
    """Learnable random examples (a class pattern plus noise), made one at a time in Python."""

    def __init__(
        self,
        shape: tuple[int, ...],
        num_classes: int,
        batch_size: int,
        seed: int,
        batches: int = BATCHES,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        if len(shape) == 3 and keras.config.image_data_format() == "channels_first":
            shape = (shape[2], shape[0], shape[1])
        self.shape = tuple(shape)
        self.num_classes = num_classes
        self.batch_size = batch_size
        self.seed = seed
        self.batches = batches
        self.prototypes = np.random.default_rng(seed).normal(size=(num_classes, *self.shape)).astype("float32")
        self.seen: dict[str, int] = {}

    def __len__(self) -> int:
        return self.batches

    def __getitem__(self, index: int) -> tuple[np.ndarray, np.ndarray]:
        rng = np.random.default_rng((self.seed, index))
        labels = rng.integers(0, self.num_classes, size=self.batch_size).astype("int32")
        x = np.empty((self.batch_size, *self.shape), dtype="float32")
        for row, label in enumerate(labels.tolist()):
            x[row] = self.example(rng, label)
        return x, labels

    def held_out(self, batches: int = HELD_OUT_BATCHES) -> tuple[np.ndarray, np.ndarray]:
        """Examples from the same class patterns that training never sees: the batches past its epoch."""
        parts = [self[self.batches + index] for index in range(batches)]
        return np.concatenate([p[0] for p in parts]), np.concatenate([p[1] for p in parts])

    def example(self, rng: np.random.Generator, label: int) -> np.ndarray:
        noise = rng.normal(scale=1.5, size=self.shape).astype("float32")
        example = self.prototypes[label] + noise
        key = feature_key(example)
        if len(self.seen) > 4096:
            self.seen.clear()
        self.seen[key] = label
        return example
