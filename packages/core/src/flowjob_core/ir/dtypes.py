"""Data types. flowjob uses numpy dtypes directly, under the legacy names."""
from __future__ import annotations

from typing import Any

import numpy as np

float16 = np.dtype(np.float16)
float32 = np.dtype(np.float32)
float64 = np.dtype(np.float64)
int8 = np.dtype(np.int8)
int32 = np.dtype(np.int32)
int64 = np.dtype(np.int64)
uint8 = np.dtype(np.uint8)
char = int8
tensor_buffer = np.dtype(object)  # an array of tensors, each its own shape: legacy's TensorBuffer
float = float32  # noqa: A001 - legacy spelling: flow.float
double = float64

_BY_NAME: dict[str, np.dtype] = {
    "float16": float16, "half": float16, "float32": float32, "float": float32,
    "float64": float64, "double": float64, "int8": int8, "char": int8,
    "int32": int32, "int64": int64, "uint8": uint8, "tensor_buffer": tensor_buffer,
}

SUPPORTED = frozenset(_BY_NAME.values())
NUMERIC = SUPPORTED - {tensor_buffer}  # the dtypes of numbers (a tensor buffer holds arrays)


def as_dtype(value: Any) -> np.dtype:
    """Turn a legacy dtype name, a numpy type or dtype into a supported numpy dtype."""
    if isinstance(value, str):
        if value in _BY_NAME:
            return _BY_NAME[value]
        raise TypeError(f"unknown dtype name {value!r}; known: {sorted(_BY_NAME)}")
    try:
        dt = np.dtype(value)
    except TypeError:
        raise TypeError(f"{value!r} is not a dtype") from None
    if dt not in SUPPORTED:
        raise TypeError(f"dtype {dt} is not supported; supported: {sorted(d.name for d in NUMERIC)} and "
                        f"tensor_buffer")
    return dt


def is_floating(dtype: np.dtype) -> bool:
    return np.dtype(dtype).kind == "f"


# legacy's remaining dtype names: flow.dtype (the type of flow.float, ...), flow.dtypes(),
# flow.half / flow.int / flow.long, flow.convert_oneflow_dtype_to_numpy_dtype
dtype = np.dtype
half = float16
int = int32  # noqa: A001 - legacy spelling: flow.int
long = int64
# legacy's dtype of an OFRecord blob: flowjob's ofrecord_reader gives the batch's record ids, an int64 blob
record = int64


def dtypes() -> list[np.dtype]:
    """The supported dtypes in legacy's order (legacy also listed record, which here is int64, listed once)."""
    return [char, float, float32, double, float64, float16, int8, int32, int64, uint8, tensor_buffer]


def convert_oneflow_dtype_to_numpy_dtype(oneflow_dtype: Any) -> type:
    """The numpy scalar type of a flow dtype (``flow.float`` -> ``numpy.float32``), as legacy returned it.

    Raises:
        NotImplementedError: ``oneflow_dtype`` is not a supported flow dtype (legacy's error).
    """
    if not isinstance(oneflow_dtype, np.dtype) or oneflow_dtype not in NUMERIC:
        raise NotImplementedError(f"{oneflow_dtype!r} is not a flow dtype of numbers; those are: "
                                  f"{sorted(d.name for d in NUMERIC)}")
    return oneflow_dtype.type


def unfit_value(values: Any, dtype: Any) -> str | None:
    """Why ``values`` (a numpy array) would not survive a cast to ``dtype``, naming the first value that would
    not, or None when every value fits.

    Lost are: a finite float that overflows a narrower float (``1e40`` into float32 becomes inf), a NaN, an
    infinity or an out-of-range number cast to an integer, an integer outside a narrower integer's range
    (``2**40 + 7`` into int32 becomes 7). Rounding is not a loss here (float64 into float32, a float's
    fraction cut off by an integer cast, as C's casts do)."""
    values, target = np.asarray(values), np.dtype(dtype)
    if values.size == 0 or np.can_cast(values.dtype, target, casting="safe"):
        return None
    source = values.dtype.kind
    if target.kind == "f" and source == "f":
        with np.errstate(over="ignore"):
            bad = np.isfinite(values) & ~np.isfinite(values.astype(target))
    elif target.kind in "iu" and source == "f":
        info = np.iinfo(target)
        with np.errstate(invalid="ignore"):
            # (this module's float and int are the legacy dtypes: numpy's types spell the numbers)
            bad = ~np.isfinite(values) | (values <= np.float64(info.min) - 1) | (values >= np.float64(info.max) + 1)
    elif target.kind in "iu" and source in "iu":
        info = np.iinfo(target)
        bad = (values < info.min) | (values > info.max)
    else:
        return None
    if not bad.any():
        return None
    first = np.flatnonzero(bad)[0].item()
    return f"value {values.reshape(-1)[first].item()!r} (element {first}) does not fit {target.name}"
