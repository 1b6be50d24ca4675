"""Live readings from NVIDIA GPUs through NVML (`nvidia-ml-py`, imported as `pynvml`).

This is the boundary between fitspeed and the driver, kept thin on purpose:
`GpuSource` is all the monitor needs, `Nvml` is the real one, and a test
swaps in a fake where no NVIDIA driver exists. Everything above it (CSV
columns, per-device values, summaries, plots) is the same code either way.

Units are NVML's, converted once here: memory in MiB (NVML gives bytes),
power in W (NVML gives milliwatts), temperature in °C, the SM clock in MHz.
A reading a device does not support (power on some boards, for one) is None.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

T = TypeVar("T")


@dataclass(frozen=True)
class GpuReading:
    """One device at one moment."""

    index: int
    util_percent: float | None = None
    memory_used_mb: float | None = None
    memory_total_mb: float | None = None
    power_w: float | None = None
    temperature_c: float | None = None
    sm_clock_mhz: float | None = None


class GpuSource(Protocol):
    """What the monitor reads GPUs through."""

    @property
    def names(self) -> list[str]:
        """One name per device, in index order."""
        ...

    def read(self) -> list[GpuReading]:
        """One reading per device, in index order."""
        ...

    def close(self) -> None: ...


class Nvml:
    """The real source: every NVIDIA device NVML sees."""

    def __init__(self) -> None:
        import pynvml

        self._nvml: Any = pynvml
        pynvml.nvmlInit()
        try:
            count = pynvml.nvmlDeviceGetCount()
            self._handles = [pynvml.nvmlDeviceGetHandleByIndex(i) for i in range(count)]
            self._names = [_text(pynvml.nvmlDeviceGetName(h)) for h in self._handles]
        except Exception:
            pynvml.nvmlShutdown()
            raise

    @property
    def names(self) -> list[str]:
        return list(self._names)

    def driver_version(self) -> str | None:
        return _maybe(lambda: _text(self._nvml.nvmlSystemGetDriverVersion()))

    def read(self) -> list[GpuReading]:
        nvml = self._nvml
        readings = []
        for index, handle in enumerate(self._handles):
            util = _maybe(lambda: nvml.nvmlDeviceGetUtilizationRates(handle).gpu)
            memory = _maybe(lambda: nvml.nvmlDeviceGetMemoryInfo(handle))
            power_mw = _maybe(lambda: nvml.nvmlDeviceGetPowerUsage(handle))
            readings.append(
                GpuReading(
                    index=index,
                    util_percent=_float(util),
                    memory_used_mb=memory.used / 2**20 if memory is not None else None,
                    memory_total_mb=memory.total / 2**20 if memory is not None else None,
                    power_w=power_mw / 1000 if power_mw is not None else None,
                    temperature_c=_float(_maybe(
                        lambda: nvml.nvmlDeviceGetTemperature(handle, nvml.NVML_TEMPERATURE_GPU))),
                    sm_clock_mhz=_float(_maybe(lambda: nvml.nvmlDeviceGetClockInfo(handle, nvml.NVML_CLOCK_SM))),
                )
            )
        return readings

    def close(self) -> None:
        try:
            self._nvml.nvmlShutdown()
        except Exception:
            pass


def open_gpus() -> tuple[GpuSource | None, str | None]:
    """The NVIDIA GPUs as a source, or (None, why there is none)."""
    try:
        source = Nvml()
    except ImportError:
        return None, "nvidia-ml-py is not installed"
    except Exception as error:  # pynvml.NVMLError_LibraryNotFound, _DriverNotLoaded, ...
        return None, str(error) or type(error).__name__
    if not source.names:
        source.close()
        return None, "NVML found no devices"
    return source, None


def _maybe(read: Callable[[], T]) -> T | None:
    """A reading, or None where the device does not support it."""
    try:
        return read()
    except Exception:  # pynvml.NVMLError_NotSupported and friends
        return None


def _float(value: Any) -> float | None:
    return None if value is None else float(value)


def _text(value: str | bytes) -> str:
    return value.decode() if isinstance(value, bytes) else value
