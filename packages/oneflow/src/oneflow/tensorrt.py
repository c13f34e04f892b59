"""``flow.tensorrt``: legacy's TensorRT int8 calibration, refused (flowjob has no TensorRT backend: jobs run
on numpy or CuPy; ``function_config().use_tensorrt`` is recorded and changes nothing)."""
from __future__ import annotations

from typing import Any, NoReturn

__all__ = ["cache_int8_calibration", "write_int8_calibration"]

REASON = ("flowjob has no TensorRT backend (jobs run on numpy or CuPy), so there is no int8 calibration to write "
          "or cache")


def _refused(name: str) -> Any:
    def refuse(*args: Any, **kwargs: Any) -> NoReturn:
        raise NotImplementedError(f"flow.tensorrt.{name} is not supported: {REASON}")

    refuse.__name__ = refuse.__qualname__ = name
    refuse.__doc__ = f"Refused: {REASON}."
    return refuse


write_int8_calibration = _refused("write_int8_calibration")
cache_int8_calibration = _refused("cache_int8_calibration")
