"""The kit's private plugin: the scalar test loss, its gradient op and the pass that fetches gradients.

``check_grads`` differentiates ``L = sum_k <out_k, c_k>`` (random cotangents ``c_k``) with
the real autodiff pass. The loss is an op of its own, so the kit depends on no op package;
it is registered like any plugin, but only in a session the kit derives from the caller's
(``flowjob_core.testing.kit_session``): the caller's own session never sees it.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Sequence

import numpy as np

from flowjob_core.errors import ShapeError
from flowjob_core.ir.job import BlobSpec, Job
from flowjob_core.ir.opdef import KernelContext, OpDef
from flowjob_core.plugins.host import hookimpl
from flowjob_core.trace.builder import JobBuilder

if TYPE_CHECKING:
    from flowjob_core.passes.autodiff import GradContext
    from flowjob_core.passes.pipeline import PassContext

PLUGIN_NAME = "flowjob-testing"
FETCH_INTENT = "testing_fetch_grads"
FETCH_PASS = "testing-fetch-grads"


def grad_return_name(index: int) -> str:
    """Node name of the ``return`` that fetches the gradient of the ``index``-th requested blob."""
    return f"testing_grad_return_{index}"


# the loss: sum_k <y_k, c_k> ------------------------------------------------
def _weighted_sum_infer(inputs: Sequence[BlobSpec], attrs: dict) -> list[BlobSpec]:
    if not inputs or len(inputs) % 2:
        raise ShapeError(f"testing_weighted_sum takes (value, cotangent) pairs, got {len(inputs)} inputs")
    for y, c in zip(inputs[0::2], inputs[1::2]):
        if y != c:
            raise ShapeError(f"testing_weighted_sum: value {y} and cotangent {c} differ")
    return [BlobSpec((), np.result_type(*[s.dtype for s in inputs]))]


def _weighted_sum_kernel(ctx: KernelContext) -> Any:
    xp, out = ctx.xp, ctx.out(0)
    scratch = [ctx.scratch(spec.shape, out.dtype) for spec in ctx.inputs[0::2]]

    def run(*arrays: Any) -> Any:
        out[...] = 0
        for k, products in enumerate(scratch):
            xp.multiply(arrays[2 * k], arrays[2 * k + 1], out=products)
            out[...] += xp.sum(products)
        return out

    return run


def _weighted_sum_grad(ctx: "GradContext") -> list[Any]:
    grads: list[Any] = []
    for i in range(len(ctx.inputs)):
        partner = ctx.inputs[i + 1] if i % 2 == 0 else ctx.inputs[i - 1]
        grads.append(ctx.apply("testing_weighted_sum_grad", [ctx.dy, partner]) if ctx.needs[i] else None)
    return grads


def _scale_infer(inputs: Sequence[BlobSpec], attrs: dict) -> list[BlobSpec]:
    if inputs[0].shape != ():
        raise ShapeError(f"testing_weighted_sum_grad: the loss gradient must be a scalar, got {inputs[0]}")
    return [inputs[1]]


def _scale_kernel(ctx: KernelContext) -> Any:
    xp, out = ctx.xp, ctx.out(0)
    return lambda dy, other: xp.multiply(other, dy, out=out)


WEIGHTED_SUM = OpDef("testing_weighted_sum", _weighted_sum_infer, kernel=_weighted_sum_kernel, grad=_weighted_sum_grad,
                     doc="sum_k <y_k, c_k> over (y_0, c_0, y_1, c_1, ...): the gradient kit's test loss.")
WEIGHTED_SUM_GRAD = OpDef("testing_weighted_sum_grad", _scale_infer, kernel=_scale_kernel, not_differentiable=True,
                          doc="dy * other, dy a scalar: the gradient of testing_weighted_sum.")
KIT_OPS = (WEIGHTED_SUM, WEIGHTED_SUM_GRAD)


# fetching gradients ------------------------------------------------------------
def fetch_grads(job: Job, ctx: "PassContext") -> None:
    """Return the raw gradient of every blob a kit intent names (before dce would drop it).

    A blob no gradient reached gets no return: its gradient is zero.
    """
    for intent in job.intents:
        if intent.kind != FETCH_INTENT:
            continue
        builder = JobBuilder(job, ctx.session)
        for i, lbn in enumerate(intent.payload["lbns"]):
            grad = ctx.grads.get(lbn)
            if grad is None:
                continue
            (ret,) = builder.add_op("return", [builder.blob(grad)], scoped_name=grad_return_name(i),
                                    source="flowjob_core.testing.check_grads")
            job.returns.append(ret.lbn)


@hookimpl
def flowjob_add_ops(registry: Any) -> None:
    for op in KIT_OPS:
        registry.add(op)


@hookimpl
def flowjob_add_passes(registry: Any) -> None:
    registry.add(FETCH_PASS, fetch_grads, after="autodiff", before="dce")
