"""``flow.experimental.ssp_variable_proxy`` (legacy v0.4): a variable and its value ``buffer_size`` steps ago."""
from __future__ import annotations

import numbers

from flowjob_core import Blob, apply, get_variable, maybe_builder
from flowjob_core.ir import dtypes
from flowjob_core.trace import scope

from flowjob_ops.api._common import build_error
from flowjob_ops.api._initializers import Constant

__all__ = ["ssp_variable_proxy"]


def ssp_variable_proxy(var: Blob, buffer_size: int = 1, name: str | None = None) -> tuple[Blob, Blob]:
    """Stale-synchronous reads of a variable: ``(ref, value)``.

    Args:
        var: a variable of this job (``flow.get_variable``).
        buffer_size: how many steps old ``value`` is (>= 1).
        name: the namespace of the proxy's op and of the variables it keeps (its ring buffer ``SspBuffer``
            and step counter ``SspStep``); default the variable's name plus ``-ssp``.

    Returns:
        ``ref``: the variable itself, to assign to (``flow.assign(ref, ...)``); ``value``: the variable as it
        was after the step ``buffer_size`` steps before this one (its initial value for the first
        ``buffer_size`` steps). Read the variable through these two only.
    """
    what = "flow.experimental.ssp_variable_proxy"
    builder = maybe_builder()
    variables = {} if builder is None else {v.lbn: v for v in builder.job.variables.values()}
    if not isinstance(var, Blob) or var.lbn not in variables:
        raise build_error(what, f"var must be a variable of this job (flow.get_variable), got {var!r}")
    if isinstance(buffer_size, bool) or not isinstance(buffer_size, numbers.Integral) or buffer_size < 1:
        raise build_error(what, f"buffer_size must be an int >= 1, got {buffer_size!r}")
    with scope.namespace(name if name is not None else f"{var.op_name}-ssp"):
        ring = get_variable("SspBuffer", shape=(int(buffer_size),) + tuple(var.shape), dtype=var.dtype,
                            initializer=Constant(value=0), trainable=False, reuse=False)
        step = get_variable("SspStep", shape=(1,), dtype=dtypes.int64, initializer=Constant(value=0),
                            trainable=False, reuse=False)
        value = apply("ssp_variable_proxy", [var, ring, step], name="Proxy")
    return var, value
