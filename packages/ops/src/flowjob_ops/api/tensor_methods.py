"""The eager ``flow.Tensor``'s methods that run flowjob-ops' records, and ``flow.to``.

Core's tensor (``flowjob_core.imperative.tensor``) names no op of this package: the plugin registers each entry
of ``TENSOR_METHODS`` with ``OpRegistry.add_tensor_method`` (``tensor.reshape``, ``tensor.sum``, ``tensor.to``,
``tensor.normal_``, the unary math, ...), and the tensor finds them in the default session's registry. Each method
runs its record through a one-operation job (``run_on_blobs``), so a result keeps its gradient.
"""
from __future__ import annotations

from typing import Any, Callable

import numpy as np

from flowjob_core.imperative.tensor import (Device, Tensor, backend_device, run_on_blobs, run_source,
                                            tensor_dtype)
from flowjob_core.trace.builder import apply


def _run(op: str, tensor: Tensor, attrs: dict[str, Any] | None = None) -> Tensor:
    result: Tensor = run_on_blobs(op, lambda b: apply(op, [b], attrs), tensor)
    return result


def to(input: Tensor, *args: Any, **kwargs: Any) -> Tensor:  # noqa: A002 - legacy's argument name
    """Legacy ``flow.to`` / ``tensor.to``: ``input`` converted to a dtype and/or device, given as another
    tensor (its dtype and device), a dtype, or a device and optionally a dtype, then ``copy``. Returns
    ``input`` itself when nothing changes and ``copy`` is false."""
    if not isinstance(input, Tensor):
        raise TypeError(f"flow.to: input must be a flow.Tensor, got {type(input).__name__}")
    unknown = set(kwargs) - {"device", "dtype", "copy"}
    if unknown:
        raise TypeError(f"flow.to: unexpected keyword arguments {sorted(unknown)}")
    device, dtype, copy = kwargs.get("device"), kwargs.get("dtype"), kwargs.get("copy", False)
    rest = list(args)
    if rest and isinstance(rest[0], Tensor):
        device, dtype = rest[0].device, rest[0].dtype
        rest.pop(0)
    elif rest and isinstance(rest[0], np.dtype):
        dtype = rest.pop(0)
    elif rest and isinstance(rest[0], (str, Device)):
        device = rest.pop(0)
        if rest and isinstance(rest[0], np.dtype):
            dtype = rest.pop(0)
    if rest and isinstance(rest[0], bool):
        copy = rest.pop(0)
    if rest:
        raise TypeError(f"flow.to: invalid arguments {args!r}: expected a tensor, a dtype, or a device and a dtype, "
                        f"then copy")
    backend_device(device, "flow.to")
    target = input.dtype if dtype is None else tensor_dtype(dtype, "flow.to")
    if target == input.dtype and not copy:
        return input
    result: Tensor = run_on_blobs("to", lambda b: apply("cast", [b], {"dtype": target}), input)
    return result


def _cast(self: Tensor, dtype: Any) -> Tensor:
    return _run("cast", self, {"dtype": tensor_dtype(dtype, "cast")})


def _clone(self: Tensor) -> Tensor:
    result: Tensor = run_on_blobs("clone", lambda b: apply("identity", [b]), self)
    return result


def _fill_(self: Tensor, value: Any) -> Tensor:
    return self.replace_value(run_source("constant", {"value": value, "dtype": self.dtype, "shape": self.shape}),
                              "fill_")


def _normal_(self: Tensor, mean: float = 0.0, std: float = 1.0) -> Tensor:
    attrs = {"shape": self.shape, "dtype": self.dtype, "mean": mean, "stddev": std, "seed": None}
    return self.replace_value(run_source("random_normal", attrs), "normal_")


def _uniform_(self: Tensor, a: float = 0.0, b: float = 1.0) -> Tensor:
    attrs = {"shape": self.shape, "dtype": self.dtype, "minval": a, "maxval": b, "seed": None}
    return self.replace_value(run_source("random_uniform", attrs), "uniform_")


def _reshape(self: Tensor, *shape: Any) -> Tensor:
    dims = tuple(shape[0]) if len(shape) == 1 and isinstance(shape[0], (list, tuple)) else shape
    return _run("reshape", self, {"shape": tuple(int(d) for d in dims)})


def _permute(self: Tensor, *dims: Any) -> Tensor:
    perm = tuple(dims[0]) if len(dims) == 1 and isinstance(dims[0], (list, tuple)) else dims
    return _run("transpose", self, {"perm": tuple(int(d) for d in perm)})


def _reduction(op: str) -> Callable[..., Tensor]:
    def method(self: Tensor, dim: Any = None, keepdim: bool = False) -> Tensor:
        axis = tuple(range(self.ndim)) if dim is None else (tuple(dim) if isinstance(dim, (list, tuple)) else (dim,))
        return _run(op, self, {"axis": tuple(int(a) for a in axis), "keepdims": bool(keepdim)})

    method.__doc__ = f"The ``{op}`` op over ``dim`` (every axis when None)."
    return method


def _along(op: str) -> Callable[..., Tensor]:
    def method(self: Tensor, dim: int = -1) -> Tensor:
        return _run(op, self, {"axis": dim})

    method.__doc__ = f"The ``{op}`` op along ``dim``."
    return method


def _clamp(self: Tensor, min: float | None = None, max: float | None = None) -> Tensor:  # noqa: A002 - legacy's
    return _run("clip_by_value", self, {"min_value": min, "max_value": max})


def _unary(op: str) -> Callable[[Tensor], Tensor]:
    def method(self: Tensor) -> Tensor:
        return _run(op, self)

    method.__name__ = method.__qualname__ = op
    method.__doc__ = f"The ``{op}`` op of this tensor."
    return method


# methods named after the op record they run, and legacy's other names for some
UNARY = ("abs", "acos", "acosh", "asin", "asinh", "atan", "atanh", "ceil", "cos", "cosh", "erf", "erfc", "exp",
         "expm1", "floor", "gelu", "hardsigmoid", "hardswish", "lgamma", "log", "log1p", "log_sigmoid", "mish",
         "negative", "reciprocal", "relu", "relu6", "rint", "round", "rsqrt", "sigmoid", "sign",
         "sin", "sinh", "softplus", "sqrt", "square", "tan", "tanh")
ALIASES = {"neg": "negative", "arccos": "acos", "arccosh": "acosh", "arcsin": "asin", "arcsinh": "asinh",
           "arctan": "atan", "arctanh": "atanh"}

TENSOR_METHODS: dict[str, Callable[..., Any]] = {
    "to": to, "cast": _cast, "clone": _clone, "fill_": _fill_, "normal_": _normal_, "uniform_": _uniform_,
    "reshape": _reshape, "view": _reshape, "permute": _permute,
    "sum": _reduction("reduce_sum"), "mean": _reduction("reduce_mean"), "max": _reduction("reduce_max"),
    "min": _reduction("reduce_min"), "prod": _reduction("reduce_prod"),
    "argmax": _along("argmax"), "softmax": _along("softmax"), "log_softmax": _along("log_softmax"),
    "clamp": _clamp, "clip": _clamp,
    **{name: _unary(name) for name in UNARY}, **{alias: _unary(op) for alias, op in ALIASES.items()},
}
"""method name -> ``fn(tensor, *args, **kwargs)``, registered by the plugin (``OpRegistry.add_tensor_method``)."""

# the face's namespace: flow.to
NAMESPACES = {"flow": ["to"]}
__all__ = ["to"]
