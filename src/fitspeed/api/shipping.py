"""What a notebook holds, made into what a trial process can load: files, and a module that reads them.

Every trial runs in a fresh process, so a model, a builder or arrays that
live in the caller's memory travel as files, written once into a folder of
their own (`SHIPPED`, under the working folder), named by their content so
that the same model and data give the same study and a rerun resumes it:

| given                          | travels as                                         |
|--------------------------------|----------------------------------------------------|
| a compiled Functional or Sequential `keras.Model` | `model.keras` (`model.save`); the trial builds it from its config |
| a function that builds the model | cloudpickle, loaded by a generated module        |
| numpy arrays x and y (and validation_data) | `.npy` files, memory-mapped by the trial  |
| a function that returns the data | cloudpickle, as for a builder                   |
| a path to a `.keras` file, `module:function`, a built-in model's name | itself |

A generated module is one line of import and one of `cloudpickle.load` or
`numpy.load(..., mmap_mode="r")`; the trial imports it by `module:function`,
with the folder on PYTHONPATH (`ship_environment`). What cannot travel (a
`tf.data.Dataset`, a `keras.utils.PyDataset` object, a generator, a lambda
that holds a lock) is refused with what to pass instead. Nothing here
imports keras: a model's type is read from its class, and it is saved with
its own `save`.
"""

from __future__ import annotations

import hashlib
import inspect
import io
import os
import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from fitspeed.core.errors import DataError, UserError, WorkloadError
from fitspeed.core.workloads import MODELS, is_saved_model
from fitspeed.core.data_ref import is_callable_ref

SHIPPED = Path("fitspeed-shipped")  # beside the study's database: what the notebook's trials load


@dataclass(frozen=True)
class Shipment:
    """What a trial is told to load: a workload reference, a data reference, and the folder they need on PYTHONPATH."""

    model: str  # a built-in name, module:function or a .keras path, as `fitspeed tune` takes it
    data: str | None  # None: the model's default data
    folder: Path | None  # the generated modules' folder; None when nothing was generated
    name: str  # a short, stable name for the study: the model's, with its content hash


def _digest(*parts: bytes | memoryview) -> str:
    h = hashlib.blake2b(digest_size=6)
    for part in parts:
        h.update(hashlib.blake2b(part, digest_size=16).digest())
    return h.hexdigest()


def _kind_of_data(value: Any) -> str | None:
    """What kind of input `value` is, where it cannot travel as arrays; None for array-like values."""
    module = type(value).__module__ or ""
    if inspect.isgenerator(value) or isinstance(value, Iterator):
        return "a generator"
    if module.startswith("tensorflow") and hasattr(value, "element_spec"):
        return "a tf.data.Dataset"
    if any(c.__name__ == "PyDataset" and (c.__module__ or "").startswith("keras") for c in type(value).__mro__):
        return "a keras.utils.PyDataset"
    if module.startswith("torch.utils.data"):
        return "a torch DataLoader"
    return None


def _refuse_unshippable(value: Any, name: str) -> None:
    kind = _kind_of_data(value)
    if kind is not None:
        raise DataError(
            f"Expected {name} as numpy arrays, which fitspeed writes to .npy files for its trial processes. "
            f"Received {kind} ({type(value).__name__}), which cannot be sent to another process. Pass "
            "data=a function that builds it (fitspeed ships the function with cloudpickle and calls it in each "
            "trial), or pass the arrays themselves.")


def _arrays(x: Any, y: Any, what: str) -> tuple[np.ndarray, np.ndarray]:
    _refuse_unshippable(x, f"{what} x")
    _refuse_unshippable(y, f"{what} y")
    if isinstance(x, dict) or (isinstance(x, (list, tuple)) and x and isinstance(x[0], np.ndarray)):
        raise DataError(
            f"Expected {what} x as one numpy array. Received a {type(x).__name__} of arrays (a model with several "
            "inputs). Pass data=a function that returns them, as `fitspeed tune --data module:function` takes it.")
    try:
        xa, ya = np.asarray(x), np.asarray(y)
    except Exception as error:  # ragged lists, objects numpy cannot hold
        raise DataError(f"Expected {what} x and y as numpy arrays. Received {type(x).__name__} and "
                        f"{type(y).__name__}, which numpy cannot read as arrays ({error}).") from None
    if xa.ndim == 0 or ya.ndim == 0 or len(xa) != len(ya) or len(xa) == 0:
        raise DataError(
            f"Expected {what} x and y with the same, non-zero number of samples. Received x of shape "
            f"{xa.shape} and y of shape {ya.shape}. Pass the labels that go with x, one per sample.")
    if xa.dtype == object or ya.dtype == object:
        raise DataError(f"Expected {what} x and y as numeric arrays. Received dtypes {xa.dtype} and {ya.dtype}.")
    return xa, ya


def _own_module(function: Callable[..., Any]) -> Any:
    """The module `function` was written in, where it is the user's own code (not installed); else None.

    cloudpickle ships a notebook's functions (`__main__`) by value, but one
    from a module by reference, and a trial process cannot import a module
    that only the caller's sys.path finds: such a module goes by value too.
    """
    import sys
    import sysconfig

    name = getattr(function, "__module__", None)
    module = sys.modules.get(name or "")
    path = getattr(module, "__file__", None)
    if module is None or name == "__main__" or path is None:
        return None
    installed = {sysconfig.get_paths()[key] for key in ("purelib", "platlib", "stdlib", "platstdlib")}
    return None if any(Path(path).resolve().is_relative_to(Path(p).resolve()) for p in installed) else module


def _pickled(function: Callable[..., Any], what: str) -> bytes:
    import cloudpickle

    own = _own_module(function)
    try:
        if own is not None:
            cloudpickle.register_pickle_by_value(own)
        return bytes(cloudpickle.dumps(function))
    except Exception as error:  # a closure over a lock, a file, a generator: the user's object, said plainly
        raise UserError(
            f"Could not ship {what} {getattr(function, '__name__', function)!r} to the trial processes: cloudpickle "
            f"cannot pickle it ({type(error).__name__}: {error}). Define it so that it only refers to modules and "
            "plain values (build any lock, file or session inside the function), or put it in a module and pass "
            "'module:function'.") from None
    finally:
        if own is not None:
            cloudpickle.unregister_pickle_by_value(own)


def _module(folder: Path, name: str, body: str) -> str:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.py"
    text = '"""Written by fitspeed for its trial processes: loads what a Python session handed fitspeed."""\n' + body
    if not path.exists() or path.read_text() != text:
        path.write_text(text)
    return name


def _ship_function(function: Callable[..., Any], what: str, name: str, folder: Path) -> tuple[str, str]:
    """`function` pickled into `folder`, and a generated module that loads it as `name`: its `module:name`, and its digest."""
    pickled = _pickled(function, what)
    digest = _digest(pickled)
    module = f"fitspeed_{name}_{digest}"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{module}.pkl"
    path.write_bytes(pickled)
    _module(folder, module, f"import cloudpickle\n\nwith open({str(path.resolve())!r}, 'rb') as _file:\n"
                            f"    {name} = cloudpickle.load(_file)\n")
    return f"{module}:{name}", digest


def _is_keras_model(value: Any) -> bool:
    return any(c.__name__ == "Model" and (c.__module__ or "").startswith("keras") for c in type(value).__mro__)


def _check_model(model: Any) -> None:
    """A model in memory that a trial can rebuild from its saved config: compiled, and a Keras class."""
    cls = type(model)
    if not (cls.__module__ or "").startswith("keras."):  # a subclassed model: its class lives in the caller
        raise WorkloadError(
            f"Expected a Functional or Sequential keras.Model, which fitspeed saves to model.keras and each trial "
            f"rebuilds from its config. Received a subclassed model ({cls.__name__}, defined in "
            f"{cls.__module__!r}), which a fresh process cannot rebuild without importing its class. Pass the "
            f"function that builds it instead: fitspeed.tune(build_model, x, y), shipped with cloudpickle.")
    if not getattr(model, "compiled", False):
        raise WorkloadError(
            f"Expected a compiled model: fitspeed times training with your loss, optimizer and metrics. Received "
            f"{getattr(model, 'name', cls.__name__)!r}, not compiled. Call model.compile(optimizer=..., "
            "loss=...) first.")


def _architecture(model: Any) -> bytes:
    """The model's config (its compile config within), its layers' names replaced by their order.

    Keras numbers the names it makes up (conv2d, conv2d_1, ...), so running a
    notebook's cell again builds the same model under new names; named by
    their order instead, it is the same model, and `tune` resumes its study.
    """
    import json

    text = model.to_json()
    for index, layer in enumerate(model.layers):
        text = text.replace(json.dumps(layer.name), json.dumps(f"layer {index}"))
    config = json.loads(text)
    optimizer = (config.get("compile_config") or {}).get("optimizer")
    if isinstance(optimizer, dict):  # adam, adam_1, ...: named anew too
        (optimizer.get("config") or {}).pop("name", None)
    return json.dumps(config, sort_keys=True).encode()


def ship_model(model: Any, folder: Path) -> tuple[str, str]:
    """The trial's workload reference for `model`, and a name for the study."""
    if isinstance(model, os.PathLike) or isinstance(model, str):
        text = os.fspath(model)
        if is_saved_model(text):
            if not Path(text).is_file():
                raise WorkloadError(f"Expected a saved Keras model file. Received: {text!r}, which does not exist. "
                                    "Check the path, or save one with model.save('model.keras').")
            return str(Path(text).resolve()), Path(text).stem
        if text in MODELS or is_callable_ref(text):
            return text, text.replace(":", ".")
        raise WorkloadError(f"Expected a keras.Model, a function that builds one, a path to a .keras file, "
                            f"'module:function' or a built-in model ({', '.join(MODELS)}). Received: {text!r}.")
    if _is_keras_model(model):
        _check_model(model)
        try:
            config = _architecture(model)
        except Exception as error:  # noqa: BLE001 - a layer without get_config
            raise WorkloadError(
                f"Could not read the config of model {model.name!r} ({type(error).__name__}: {error}), so a trial "
                "process cannot rebuild it. Give its custom layers a get_config, or pass the function that builds "
                "the model.") from None
        name = f"{re.sub(r'[^A-Za-z0-9_]+', '_', model.name)}-{_digest(config)}"
        path = folder / f"{name}.keras"
        if not path.exists():
            folder.mkdir(parents=True, exist_ok=True)
            partial = path.with_suffix(".partial.keras")
            model.save(partial)
            partial.replace(path)
        return str(path.resolve()), name
    if callable(model):
        ref, digest = _ship_function(model, "the model builder", "model", folder)
        return ref, f"{re.sub(r'[^A-Za-z0-9_]+', '_', getattr(model, '__name__', 'builder'))}-{digest}"
    raise WorkloadError(f"Expected a keras.Model, a function that builds one, or a path to a .keras file. "
                        f"Received: {type(model).__name__}.")


def ship_data(x: Any, y: Any, validation_data: Any, data: Any, folder: Path) -> tuple[str | None, str]:
    """The trial's data reference, and a short name for the study."""
    if data is not None:
        if x is not None or y is not None:
            raise DataError("Expected either x and y, or data=. Received both. Pass one of them.")
        if isinstance(data, str):
            return data, data.replace(":", ".")
        _refuse_unshippable(data, "data")
        if not callable(data):
            raise DataError(f"Expected data= as a function that returns (x, y), a tf.data.Dataset or a PyDataset, "
                            f"or a reference such as 'npz:data.npz'. Received: {type(data).__name__}.")
        ref, _ = _ship_function(data, "the data function", "data", folder)
        return ref, getattr(data, "__name__", "data")
    if x is None and y is None:
        if validation_data is not None:
            raise DataError("Expected x and y with validation_data. Received validation_data alone.")
        return None, "synthetic"
    _refuse_unshippable(x, "x")  # a dataset or a generator carries its labels: say what it is, not "pass y"
    if x is None or y is None:
        raise DataError(f"Expected both x and y. Received only {'x' if y is None else 'y'}. Pass the labels too.")
    arrays = dict(zip(("x", "y"), _arrays(x, y, "the training")))
    if validation_data is not None:
        if not (isinstance(validation_data, (tuple, list)) and len(validation_data) == 2):
            raise DataError(f"Expected validation_data as (x_val, y_val), as keras fit() takes it. Received: "
                            f"{type(validation_data).__name__}"
                            + (f" of length {len(validation_data)}" if isinstance(validation_data, (tuple, list))
                               else "") + ".")
        x_val, y_val = validation_data
        arrays.update(zip(("x_val", "y_val"), _arrays(x_val, y_val, "the validation")))
        if arrays["x_val"].shape[1:] != arrays["x"].shape[1:]:
            raise DataError(f"Expected validation x with the training x's sample shape {arrays['x'].shape[1:]}. "
                            f"Received {arrays['x_val'].shape[1:]}.")
    digests = []
    for key, array in arrays.items():
        buffer = io.BytesIO()
        np.lib.format.write_array_header_2_0(buffer, np.lib.format.header_data_from_array_1_0(array))
        digests.append(_digest(key.encode(), buffer.getvalue(), np.ascontiguousarray(array).data.cast("B")))
    tag = _digest(*(d.encode() for d in digests))
    paths = {}
    for key, array in arrays.items():
        path = folder / f"{key}-{tag}.npy"
        if not path.exists():
            folder.mkdir(parents=True, exist_ok=True)
            partial = folder / f"{key}-{tag}.partial.npy"
            np.save(partial, array)
            partial.replace(path)
        paths[key] = str(path.resolve())
    module = "fitspeed_arrays_" + tag
    loads = ", ".join(f"{key!r}: numpy.load({path!r}, mmap_mode='r')" for key, path in paths.items())
    _module(folder, module, f"import numpy\n\n\ndef data():\n    return {{{loads}}}\n")
    return f"{module}:data", f"arrays-{tag}"


def ship(model: Any, x: Any = None, y: Any = None, validation_data: Any = None, data: Any = None,
         folder: Path | None = None) -> Shipment:
    """`model` and its data as references a trial loads, written under `folder` (default: ./fitspeed-shipped)."""
    folder = Path(folder or SHIPPED).absolute()
    model_ref, model_name = ship_model(model, folder)
    data_ref, data_name = ship_data(x, y, validation_data, data, folder)
    generated = folder if model_ref.startswith("fitspeed_") or (data_ref or "").startswith("fitspeed_") else None
    return Shipment(model_ref, data_ref, generated, f"{model_name}-{data_name}")


@contextmanager
def ship_environment(shipment: Shipment) -> Iterator[None]:
    """PYTHONPATH with the shipment's folder while trials run; the caller's environment as it was afterwards."""
    if shipment.folder is None:
        yield
        return
    before = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (str(shipment.folder), before) if p)
    try:
        yield
    finally:
        if before is None:
            os.environ.pop("PYTHONPATH", None)
        else:
            os.environ["PYTHONPATH"] = before
