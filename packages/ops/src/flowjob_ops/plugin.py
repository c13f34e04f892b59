"""The ops package's plugin: registers every op record of ``flowjob_ops.defs`` and the Blob operators."""
from __future__ import annotations

from typing import Any

from flowjob_core import hookimpl

from flowjob_ops import array_ops, comparisons, cpu, fusion, fusion_dense, initializers, math
from flowjob_ops.defs import (
    activations, array, compare, constants, conv, dropout, fused, indexing, matmul, nn_losses, pool, reduce, softmax)
from flowjob_ops.defs import math as math_defs
from flowjob_ops.defs import math_binary
from flowjob_ops.defs import math_unary
from flowjob_ops.defs import losses_more, reduce_more
from flowjob_ops.defs import array_more
from flowjob_ops.defs import segment, sorting, tril
from flowjob_ops.defs import conv_more
from flowjob_ops.defs import normalization
from flowjob_ops.defs import batch_norm_train
from flowjob_ops.defs import random_mask
from flowjob_ops.defs import array_extra

OP_MODULES = (activations, math_defs, compare, reduce, matmul, softmax, nn_losses, dropout, conv, pool, array,
              indexing, constants, fused, array_more, math_binary, math_unary, conv_more, losses_more, reduce_more,
              normalization, batch_norm_train)
OP_MODULES += (sorting, segment, tril)
OP_MODULES += (random_mask,)
OP_MODULES += (array_extra,)
from flowjob_ops.defs import conv3d as conv3d_defs  # noqa: E402  (3-D convolution and pooling)
OP_MODULES += (conv3d_defs,)
from flowjob_ops.defs import loss_extra, math_extra, nn_extra  # noqa: E402  (legacy v0.4 leftovers)
OP_MODULES += (loss_extra, math_extra, nn_extra)
from flowjob_ops import repeat_pass  # noqa: E402  (legacy flow.repeat / flow.acc: records and the unrolling pass)
from flowjob_ops import amp_pass  # noqa: E402  (legacy enable_auto_mixed_precision: float16 casts)
from flowjob_ops.defs import repeat_acc as repeat_acc_defs  # noqa: E402
OP_MODULES += (repeat_acc_defs,)
from flowjob_ops.defs import data_dependent  # noqa: E402  (argwhere, sync_dynamic_resize: rows the data decide)
OP_MODULES += (data_dependent,)
from flowjob_ops.defs import decode_random  # noqa: E402  (flow.data.decode_random: synthetic batches)
OP_MODULES += (decode_random,)
from flowjob_ops.defs import unique  # noqa: E402  (flow.experimental.unique_with_counts)
OP_MODULES += (unique,)
from flowjob_ops.defs import int_divide  # noqa: E402  (integer flow.math.divide, truncating as C)
OP_MODULES += (int_divide,)

# Python operators on symbolic blobs: ``x + y``, ``2.0 * x``, ``-x``, ``a @ b``, ``x ** 2``, ``x[0, 1:3]``
OPERATORS = {
    "__add__": math.add,
    "__radd__": lambda a, b: math.add(b, a),
    "__sub__": math.subtract,
    "__rsub__": lambda a, b: math.subtract(b, a),
    "__mul__": math.multiply,
    "__rmul__": lambda a, b: math.multiply(b, a),
    "__truediv__": math.divide,
    "__rtruediv__": lambda a, b: math.divide(b, a),
    "__neg__": math.negative,
    "__pow__": math.pow,
    "__rpow__": lambda a, b: math.pow(b, a),
    "__mod__": math.mod,  # legacy Blob % (floor modulo); legacy had no // on blobs
    # ``2 % x`` and ``2.0 ** x``: legacy v0.4's blobs lacked these reflected forms (a TypeError there)
    "__rmod__": lambda a, b: math.mod(b, a),
    "__matmul__": array_ops.matmul,
    "__rmatmul__": lambda a, b: array_ops.matmul(b, a),
    "__getitem__": array_ops.getitem,
    **comparisons.OPERATORS,
}


@hookimpl
def flowjob_add_ops(registry: Any) -> None:
    for module in OP_MODULES:
        for op in module.OPS:
            registry.add(op)
    # the chain finds its steps in this session's registry: any op with a descriptor fuses, a plugin's too
    registry.add(fused.chain_op(registry))
    for dunder, fn in OPERATORS.items():
        registry.add_operator(dunder, fn)


@hookimpl
def flowjob_add_passes(registry: Any) -> None:
    registry.add("fuse-conv", fusion.run, phase="fuse")
    # optim-fusion (the optimizer package, when installed) claims the matmuls an SGD update reads
    # and the gradient scales; fuse-dense then fuses what is left
    registry.add("fuse-dense", fusion_dense.run, phase="fuse", after="fuse-conv", after_if_present="optim-fusion")
    # after autodiff and the optimizer (their repeat/acc gradient nodes tick too), before dce drops unused clones
    registry.add("repeat-acc", repeat_pass.run, phase="transform")
    # on the forward graph, so that autodiff differentiates the casts it inserts
    registry.add("auto-mixed-precision", amp_pass.run, phase="differentiate", before="autodiff")


@hookimpl
def flowjob_add_kernels(registry: Any) -> None:
    # numpy-tuned variants (Winograd, blocked pooling) for the cpu backend; the records' kernels stay
    # the reference every other backend runs
    for op, builder in cpu.KERNEL_BUILDERS.items():
        registry.add(op, cpu.CPU_TAG, builder)


@hookimpl
def flowjob_read_initializer(value: Any, owner: str) -> Any:
    """Legacy InitializerConf messages (their initializers were such messages) as flowjob initializers."""
    if hasattr(value, "WhichOneof"):
        return initializers.from_initializer_conf(value, owner)
    return None
