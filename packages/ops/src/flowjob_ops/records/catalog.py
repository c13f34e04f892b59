"""The index of the package's op records: the modules of ``flowjob_ops.records`` (each lists its records
in ``OPS``) and a lookup by op name, for the plugin that registers them and for public functions that
take their docstring from the record they call."""
from __future__ import annotations

from functools import cache

from flowjob_core import OpDef

from flowjob_ops.records import (
    activations, arithmetic, assign, batch_norm_train, categorical, comparisons, constants, conv, cross_entropy,
    data_dependent, deconv, detection, dropout, fused, indexed_slices, indexing, op_test_fixtures, losses, math_binary,
    math_unary, matmul, normalization, padding, partial_fc, pool, profiling, quantization, random, reduce, segment,
    shape, sharded, softmax, sorting, split_like, square_sum, ssp, tensor_buffer, time_shape, triangular, unique,
    upsample)

RECORD_MODULES = (
    activations, arithmetic, assign, batch_norm_train, categorical, comparisons, constants, conv, cross_entropy,
    data_dependent, deconv, detection, dropout, fused, indexed_slices, indexing, op_test_fixtures, losses, math_binary,
    math_unary, matmul, normalization, padding, partial_fc, pool, profiling, quantization, random, reduce, segment,
    shape, sharded, softmax, sorting, split_like, square_sum, ssp, tensor_buffer, time_shape, triangular, unique,
    upsample)
"""Every module of ``flowjob_ops.records`` that holds records; ``common`` holds helpers only."""


@cache
def _by_name() -> dict[str, OpDef]:
    return {op.name: op for module in RECORD_MODULES for op in module.OPS}


def record(op: str) -> OpDef:
    """The package's record of ``op``; a KeyError names an op the package does not define."""
    try:
        return _by_name()[op]
    except KeyError:
        raise KeyError(f"flowjob_ops defines no op {op!r}") from None
