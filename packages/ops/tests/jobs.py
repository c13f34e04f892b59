"""Run a function of blobs as a real global function (a predict job) on numpy arrays."""
from __future__ import annotations

import inspect
from typing import Any, Callable

import numpy as np

import flowjob_core as fc
import flowjob_typing as tp


def run_job(fn: Callable[..., Any], *arrays: np.ndarray) -> Any:
    """``fn`` traced over one ``tp.Numpy.Placeholder`` per array (shape and dtype of the array), called once."""

    def job(*blobs: Any) -> Any:
        return fn(*blobs)

    params = [inspect.Parameter(f"a{i}", inspect.Parameter.POSITIONAL_OR_KEYWORD,
                                annotation=tp.Numpy.Placeholder(a.shape, dtype=a.dtype))
              for i, a in enumerate(arrays)]
    job.__signature__ = inspect.Signature(params, return_annotation=tp.Numpy)  # type: ignore[attr-defined]
    return fc.global_function()(job)(*arrays)
