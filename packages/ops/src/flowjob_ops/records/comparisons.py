"""Comparisons: broadcasting ``greater``, ``less``, ``equal``, ... giving int8 (1 true, 0 false).

int8 as legacy OneFlow's ``broadcast_greater`` & co. give. Comparisons are piecewise constant
in their inputs: they carry the explicit not-differentiable mark, no gradient flows through them.
"""
from __future__ import annotations

from typing import Callable, Sequence

import numpy as np

from flowjob_core import BlobSpec, Compute, Elementwise, OpDef, ShapeError

from flowjob_ops.records.common import broadcast_shape, same_dtype

RESULT_DTYPE = np.dtype(np.int8)


def _compare_infer(op: str) -> Callable[[Sequence[BlobSpec], dict], list[BlobSpec]]:
    def infer(inputs: Sequence[BlobSpec], attrs: dict) -> list[BlobSpec]:
        dtype = same_dtype(inputs, op)
        if dtype.kind not in "fiub":
            raise ShapeError(f"{op} needs numeric inputs, got {dtype}")
        return [BlobSpec(broadcast_shape(inputs[0].shape, inputs[1].shape, f"{op} operands"), RESULT_DTYPE)]

    return infer


def _comparison(op: str, symbol: str) -> OpDef:
    # the ufunc writes its bool result into the int8 output buffer (a safe cast): no bool temporary
    return OpDef(op, _compare_infer(op), not_differentiable=True, elementwise=Elementwise(op, arity=2),
                 doc=f"x {symbol} y, elementwise with broadcasting, as int8 (1 or 0)", compute=Compute(amp="black"))


GREATER = _comparison("greater", ">")
GREATER_EQUAL = _comparison("greater_equal", ">=")
LESS = _comparison("less", "<")
LESS_EQUAL = _comparison("less_equal", "<=")
EQUAL = _comparison("equal", "==")
NOT_EQUAL = _comparison("not_equal", "!=")

OPS = (GREATER, GREATER_EQUAL, LESS, LESS_EQUAL, EQUAL, NOT_EQUAL)
