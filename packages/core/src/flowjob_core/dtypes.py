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
float = float32  # noqa: A001 - legacy spelling: flow.float
double = float64

_BY_NAME: dict[str, np.dtype] = {
    "float16": float16, "half": float16, "float32": float32, "float": float32,
    "float64": float64, "double": float64, "int8": int8, "char": int8,
    "int32": int32, "int64": int64, "uint8": uint8,
}

SUPPORTED = frozenset(_BY_NAME.values())


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
        raise TypeError(f"dtype {dt} is not supported; supported: {sorted(d.name for d in SUPPORTED)}")
    return dt


def is_floating(dtype: np.dtype) -> bool:
    return np.dtype(dtype).kind == "f"
