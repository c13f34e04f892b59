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


def assert_matches_numpy(got: np.ndarray, want: np.ndarray) -> None:
    """``got`` (a job's result) equals ``want`` (the same float32 math in numpy) exactly where the session runs
    on numpy; on a device (a GPU's libm and BLAS round differently) within float32 rounding."""
    if fc.get_default_session().backend.host_arrays:
        np.testing.assert_array_equal(got, want)
    else:
        np.testing.assert_allclose(got, want, rtol=2e-5, atol=1e-6)
