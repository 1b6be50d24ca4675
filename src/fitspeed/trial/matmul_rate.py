"""This machine's dense matmul rate at a dtype: the roof of `fitspeed doctor --model`'s roofline.

Runs in the trial child, after the knobs are applied, so the benchmark uses
the trial's backend, thread pools, oneDNN setting and device. Square
`keras.ops.matmul` of n×n operands in the trial's compute dtype (bfloat16
under mixed_bfloat16), n doubled from 512 until one product takes at least
`MIN_PRODUCT_S` (or n reaches 8192); each size is timed as the best of
repeated products, each read back to the host (which waits for the device).
The rate is 2·n³ FLOPs over that best time, the largest over the sizes tried.
"""

from __future__ import annotations

import time
from typing import Any

MIN_PRODUCT_S = 0.02
BUDGET_S = 1.0  # per size
MAX_N = 8192


def _best_seconds(n: int, dtype: str, budget_s: float) -> float:
    import keras

    a = keras.random.uniform((n, n), dtype="float32", seed=1)
    b = keras.random.uniform((n, n), dtype="float32", seed=2)
    a, b = keras.ops.cast(a, dtype), keras.ops.cast(b, dtype)
    def product() -> None:  # one element read back (as float32: numpy has no bfloat16) waits for the device
        keras.ops.convert_to_numpy(keras.ops.cast(keras.ops.matmul(a, b)[0, 0], "float32"))

    product()  # warm-up: kernel choice, allocation
    best, started, runs = float("inf"), time.perf_counter(), 0
    while runs < 3 or (time.perf_counter() - started < budget_s and runs < 50):
        begin = time.perf_counter()
        product()
        best = min(best, time.perf_counter() - begin)
        runs += 1
    return best


def measure(dtype: str, budget_s: float = BUDGET_S) -> dict[str, Any]:
    """{"dtype", "n", "flop_per_s", "sizes": {n: FLOP/s}} for square matmuls in `dtype`."""
    sizes: dict[int, float] = {}
    n = 512
    while n <= MAX_N:
        seconds = _best_seconds(n, dtype, budget_s)
        sizes[n] = 2 * n**3 / seconds
        if seconds >= MIN_PRODUCT_S:
            break
        n *= 2
    best_n = max(sizes, key=lambda size: sizes[size])
    return {"dtype": dtype, "n": best_n, "flop_per_s": sizes[best_n], "sizes": sizes,
            "method": "keras.ops.matmul of square n×n operands, best of repeated products, read back to the host"}
