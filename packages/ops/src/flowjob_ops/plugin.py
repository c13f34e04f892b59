"""The ops package's plugin: registers every op record of ``flowjob_ops.records``, the passes, the cpu kernel
overrides, the Blob operators and the eager tensor's methods that run the records."""
from __future__ import annotations

from typing import Any

from flowjob_core import hookimpl

from flowjob_ops.api._initializers import from_initializer_conf
from flowjob_ops.api.tensor_methods import TENSOR_METHODS
from flowjob_ops.operators import OPERATORS
from flowjob_ops.overrides import cpu
from flowjob_ops.passes import (auto_mixed_precision, fuse_conv, fuse_dense, quantization_aware_training, repeat_acc,
                                ssp_variable_proxy)
from flowjob_ops.records import fused
from flowjob_ops.records.catalog import RECORD_MODULES


@hookimpl
def flowjob_add_ops(registry: Any) -> None:
    for module in RECORD_MODULES:
        for op in module.OPS:
            registry.add(op)
    # the chain finds its steps in this session's registry: any op with a descriptor fuses, a plugin's too
    registry.add(fused.chain_op(registry))
    for dunder, fn in OPERATORS.items():
        registry.add_operator(dunder, fn)
    # the eager flow.Tensor's methods that run these records (core's tensor names none of them)
    for name, method in TENSOR_METHODS.items():
        registry.add_tensor_method(name, method)


@hookimpl
def flowjob_add_passes(registry: Any) -> None:
    registry.add("fuse-conv", fuse_conv.run, phase="fuse")
    # optim-fusion (the optimizer package, when installed) claims the matmuls an SGD update reads
    # and the gradient scales; fuse-dense then fuses what is left
    registry.add("fuse-dense", fuse_dense.run, phase="fuse", after="fuse-conv", after_if_present="optim-fusion")
    # after autodiff and the optimizer (their repeat/acc gradient nodes tick too), before dce drops unused clones
    registry.add("repeat-acc", repeat_acc.run, phase="transform")
    # on the forward graph, so that autodiff differentiates the casts it inserts
    registry.add("auto-mixed-precision", auto_mixed_precision.run, phase="differentiate", before="autodiff")
    # legacy's order: after mixed precision, before autodiff (the fake quantizations pass gradients straight
    # through)
    registry.add("quantization-aware-training", quantization_aware_training.run, phase="differentiate",
                 before="autodiff", after="auto-mixed-precision")
    # after the updates exist: the proxies stand in for the variables everywhere but in them
    registry.add("ssp-variable-proxy", ssp_variable_proxy.run, phase="update", after_if_present="optimizer")


@hookimpl
def flowjob_add_kernels(registry: Any) -> None:
    # numpy-tuned variants (Winograd, cache blocks, work over the host threads) for the cpu backend; the records'
    # kernels stay the reference every other backend runs
    for op, builder in cpu.KERNEL_BUILDERS.items():
        registry.add(op, cpu.CPU_TAG, builder)


@hookimpl
def flowjob_read_initializer(value: Any, owner: str) -> Any:
    """Legacy InitializerConf messages (their initializers were such messages) as flowjob initializers."""
    if hasattr(value, "WhichOneof"):
        return from_initializer_conf(value, owner)
    return None
