"""Built-in models: the parameter counts `fitspeed workloads` shows, and the data format."""

from __future__ import annotations

import json
import subprocess
import sys

from conftest import child_env

from fitspeed.core.workloads import MODELS

SCRIPT = """
import json, sys, keras
keras.config.set_image_data_format(sys.argv[1])
from fitspeed.trial import models
out = {}
for name in models.BUILDERS:
    model = models.build(name)
    axes = {layer.axis for layer in model.layers if isinstance(layer, keras.layers.BatchNormalization)
            and len(layer.input.shape) == 4}
    out[name] = {"params": model.count_params(), "input": list(model.input_shape[1:]),
                 "bn_axes": sorted(axes), "out_dtype": str(model.output.dtype)}
print(json.dumps(out))
"""


def build_all(data_format: str, policy: str = "float32") -> dict:
    env = child_env()
    script = SCRIPT.replace("import json, sys, keras", f"import json, sys, keras\nkeras.config.set_dtype_policy('{policy}')")
    result = subprocess.run([sys.executable, "-c", script, data_format], env=env,
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout.strip().splitlines()[-1])


def test_parameter_counts_match_the_registry() -> None:
    built = build_all("channels_last")
    assert set(built) == set(MODELS)
    for name, info in MODELS.items():
        assert built[name]["params"] == info.params, name
        assert tuple(built[name]["input"]) == info.input_shape, name
        assert built[name]["bn_axes"] in ([], [-1], [3]), name
    assert 2.1e6 < MODELS["cnn-low"].params < 2.3e6
    assert 10.0e6 < MODELS["cnn-high"].params < 10.4e6
    assert 36.0e6 < MODELS["wrn-28-10"].params < 37.0e6


def test_channels_first_moves_channels_and_batchnorm_axis() -> None:
    built = build_all("channels_first", policy="mixed_float16")
    for name, info in MODELS.items():
        shape = info.input_shape
        expected = [shape[2], shape[0], shape[1]] if len(shape) == 3 and name != "mlp" else list(shape)
        assert built[name]["input"] == expected, name
        assert built[name]["bn_axes"] in ([], [1]), name
        assert built[name]["params"] == info.params, name
        assert built[name]["out_dtype"] == "float32", name  # softmax output stays float32
