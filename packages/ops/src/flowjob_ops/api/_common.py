"""What the public modules of ``flowjob_ops.api`` share, so that none of them imports another: how a
function names its nodes and words its errors, the argument checks several families make, a Python
number as a 0-d blob, and a variable's in-place assignment.
"""
from __future__ import annotations

import numbers
from typing import Any, Callable

from flowjob_core import Blob, OpBuildError, ShapeError, apply, maybe_builder
from flowjob_core.ir import naming
from flowjob_core.trace.builder import user_source

from flowjob_ops.records import catalog
from flowjob_ops.records.common import check_scalar


# names and errors --------------------------------------------------------------------------------
def op_name(name: str | None, prefix: str) -> str:
    """``name``, or ``prefix_<n>`` from the process-wide counter: for public functions whose node
    name should not carry the op type's own prefix (``expand_dims`` builds a ``reshape``)."""
    return name if name is not None else naming.unique_name(prefix)


def build_error(what: str, message: str) -> Exception:
    """An ``OpBuildError`` for a check a public function makes itself (before any node exists),
    worded like the tracer's: the job, the function and the user's source line."""
    builder = maybe_builder()
    job = f"job {builder.job.name!r}, " if builder is not None else ""
    return OpBuildError(f"{job}{what} at {user_source(2)}: {message}")


def restated(op: str, rest: str = "") -> str:
    """The first line of a public function's docstring that only restates op ``op``: its record's ``doc``
    (capitalized when it begins with a word; a formula such as ``sin(x)`` keeps its case), then ``rest``.
    The record stays the one place that says what the op computes."""
    doc = catalog.record(op).doc
    if not doc:
        raise ValueError(f"op {op!r} has no doc for its public function to restate")
    first = doc.split(" ", 1)[0]
    if len(first) > 1 and first.isalpha():
        doc = doc[0].upper() + doc[1:]
    return doc + rest


def unary_function(op: str, module: str) -> Callable[..., Blob]:
    """The public function ``f(x, name=None)`` of a one-input op without attributes, defined as if in
    ``module`` (its ``__name__``); its docstring restates the op's record."""
    def fn(x: Blob, name: str | None = None) -> Blob:
        return apply(op, [x], name=name)

    fn.__name__ = fn.__qualname__ = op
    fn.__module__ = module
    fn.__doc__ = f"""{restated(op, ', elementwise.')}

    Args:
        x: a blob.
        name: the op name; default ``{catalog.record(op).legacy.name_prefix}_<n>``.

    Returns:
        A blob like x.
    """
    return fn


# argument checks --------------------------------------------------------------------------------
def blob_arg(what: str, arg: str, value: object) -> Blob:
    if not isinstance(value, Blob):
        raise TypeError(f"{what}: {arg} must be a blob, got {type(value).__name__}")
    return value


def job_blob(what: str, arg: str, value: Any) -> Blob:
    if not isinstance(value, Blob):
        raise TypeError(f"{what}: {arg} must be a blob of this job, got {type(value).__name__}")
    return value


def floating_blob(what: str, arg: str, value: Any) -> Blob:
    blob = job_blob(what, arg, value)
    if blob.dtype.kind != "f":
        raise build_error(what, f"{arg} must be a floating blob, got {blob.dtype}")
    return blob


def check_same_shape(what: str, arg: str, blob: Blob, ref_arg: str, ref: Blob) -> None:
    if tuple(blob.shape) != tuple(ref.shape):
        raise build_error(what, f"{arg} must have the shape of {ref_arg} {tuple(ref.shape)}, got {tuple(blob.shape)}")


def real_number(what: str, arg: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise build_error(what, f"{arg} must be a number, got {value!r}")
    return float(value)


def positive_int(what: str, arg: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or int(value) <= 0:
        raise build_error(what, f"{arg} must be a positive int, got {value!r}")
    return int(value)


def dropout_rate(what: str, rate: Any) -> float:
    if isinstance(rate, bool) or not isinstance(rate, numbers.Real) or not 0.0 <= float(rate) < 1.0:
        raise build_error(what, f"rate must be a number in [0, 1), got {rate!r}")
    return float(rate)


def refuse_noise_shape(what: str, noise_shape: Any) -> None:
    # legacy passed it to random_mask_like, which refused any noise_shape in v0.4
    if noise_shape is not None:
        raise build_error(what, f"noise_shape must be None (legacy v0.4 did not support it), got {noise_shape!r}")


# numbers as blobs --------------------------------------------------------------------------------
def number_as_blob(op: str, value: Any, like: Blob) -> Blob:
    """A Python number as a 0-d constant of ``like``'s dtype (it broadcasts to any shape)."""
    if isinstance(value, Blob):
        return value
    if isinstance(value, bool) or not isinstance(value, numbers.Number):
        raise TypeError(f"flow.math.{op} needs blobs or a blob and a Python number, got {type(value).__name__} "
                        f"(turn arrays into blobs with flow.constant)")
    try:
        check_scalar(value, like.dtype, op)  # 0.5 against an int blob would compare with 0
    except ShapeError as exc:
        raise build_error(f"flow.math.{op}", str(exc)) from None
    return apply("constant", [], {"value": value, "dtype": like.dtype, "shape": ()})


# assignment --------------------------------------------------------------------------------
def _variable_lbns() -> set[str]:
    builder = maybe_builder()
    return set() if builder is None else {v.lbn for v in builder.job.variables.values()}


def assign_variable(ref: Blob, value: Blob, name: str | None, what: str) -> None:
    if not isinstance(ref, Blob) or ref.lbn not in _variable_lbns():
        raise build_error(what, f"ref must be a variable of this job (flow.get_variable), got {ref!r}")
    if not isinstance(value, Blob):
        raise build_error(what, f"value must be a blob, got {type(value).__name__}")
    apply("assign", [ref, value], name=name)
