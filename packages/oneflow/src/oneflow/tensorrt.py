"""``flow.tensorrt``: legacy's TensorRT int8 calibration, refused (flowjob has no TensorRT backend: jobs run
on numpy or CuPy; ``function_config().use_tensorrt`` is recorded and changes nothing)."""
from __future__ import annotations

from oneflow._refusal import refused

__all__ = ["cache_int8_calibration", "write_int8_calibration"]

REASON = ("flowjob has no TensorRT backend (jobs run on numpy or CuPy), so there is no int8 calibration to write "
          "or cache")


write_int8_calibration = refused("flow.tensorrt.write_int8_calibration", REASON)
cache_int8_calibration = refused("flow.tensorrt.cache_int8_calibration", REASON)
