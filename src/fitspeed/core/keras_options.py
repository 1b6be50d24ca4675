"""Keras 3 options that speak to speed but are not knobs here, each with why (`fitspeed knobs` prints them).

Each reason was checked against Keras 3.15 and the backends installed beside
it; `tests/trial/test_keras_options.py` checks the ones a test can see, so a
reason that stops holding fails there. This module imports no framework.
"""

from __future__ import annotations

from collections.abc import Mapping

NOT_KNOBS: Mapping[str, str] = {
    "keras.config.enable_flash_attention()": (
        "already Keras 3.15's default: it sets the global flag to None, which tells MultiHeadAttention to use "
        "flash attention wherever the backend can, and calling it changes nothing. Where it can: JAX with cuDNN "
        "and PyTorch's CUDA kernel, on a GPU in float16 or bfloat16; TensorFlow has none. On a CPU every backend "
        "refuses it when forced (TensorFlow: not supported, JAX: cuDNN is not detected, PyTorch: not supported "
        "with the inputs). The only other value, disable_flash_attention(), turns off a kernel chosen for speed, "
        "and on a CPU changes nothing"),
}
