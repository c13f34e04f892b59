"""matmul (plain and batched, optional transposes), bias_add, and the fused self-attention projection
``fused_self_attention_query_mul_key_and_value`` (legacy v0.4, BERT)."""
from __future__ import annotations

import numbers
from typing import Any, Callable, Sequence

from flowjob_core import BlobSpec, Compute, GradContext, KernelContext, OpDef, ShapeError

from flowjob_ops.records.common import broadcast_shape, normalize_axis, require_floating, same_dtype
from flowjob_ops import layout_rules
from flowjob_core.ir.layout import BROADCAST, Signature, split


# matmul -------------------------------------------------------------------
def _matmul_infer(inputs: Sequence[BlobSpec], attrs: dict) -> list[BlobSpec]:
    a, b = inputs
    dtype = same_dtype(inputs, "matmul")
    if dtype.kind not in "fiu":
        raise ShapeError(f"matmul needs numeric inputs, got {dtype}")
    if len(a.shape) < 2 or len(b.shape) < 2:
        raise ShapeError(f"matmul needs inputs of rank >= 2, got shapes {a.shape} and {b.shape}")
    ta, tb = bool(attrs.get("transpose_a", False)), bool(attrs.get("transpose_b", False))
    m, ka = (a.shape[-1], a.shape[-2]) if ta else a.shape[-2:]
    kb, n = (b.shape[-1], b.shape[-2]) if tb else b.shape[-2:]
    if ka != kb:
        raise ShapeError(
            f"matmul inner dimensions differ: a {a.shape}{' transposed' if ta else ''} has {ka} columns, "
            f"b {b.shape}{' transposed' if tb else ''} has {kb} rows")
    batch = broadcast_shape(a.shape[:-2], b.shape[:-2], "matmul batch dimensions")
    return [BlobSpec(batch + (m, n), dtype)]


def matmul_flops(inputs: Sequence[BlobSpec], outputs: Sequence[BlobSpec], attrs: dict) -> float:
    """Multiply-adds of op(a) @ op(b), twice (``Compute.flops``): every output element sums over the inner axis."""
    a = inputs[0]
    inner = a.shape[-2] if attrs.get("transpose_a", False) else a.shape[-1]
    return 2.0 * _count(outputs[0].shape) * inner


def _count(shape: Sequence[int]) -> int:
    total = 1
    for d in shape:
        total *= int(d)
    return total


def whole_product(xp: Any) -> Callable[[Any, Any, Any], Any]:
    """``product(a, b, out)``: ``out = a @ b`` as one call (the records' GEMM; the cpu overrides pass one that
    splits a large product over the host threads, ``flowjob_ops.overrides.cpu.matmul_parts``)."""
    def product(a: Any, b: Any, out: Any) -> Any:
        return xp.matmul(a, b, out=out)

    return product


def matmul_kernel_with(ctx: KernelContext, product: Callable[[Any, Any, Any], Any]) -> Any:
    """The kernel of ``matmul`` with its GEMM ``product(a, b, out)``."""
    out = ctx.out(0)
    ta, tb = bool(ctx.attrs.get("transpose_a", False)), bool(ctx.attrs.get("transpose_b", False))
    # transposed views: BLAS reads them as transposed operands, nothing is copied
    if ta and tb:
        return lambda a, b: product(a.swapaxes(-1, -2), b.swapaxes(-1, -2), out)
    if ta:
        return lambda a, b: product(a.swapaxes(-1, -2), b, out)
    if tb:
        return lambda a, b: product(a, b.swapaxes(-1, -2), out)
    return lambda a, b: product(a, b, out)


def _matmul_kernel(ctx: KernelContext) -> Any:
    return matmul_kernel_with(ctx, whole_product(ctx.xp))


def _mm(ctx: GradContext, a: Any, b: Any, ta: bool = False, tb: bool = False) -> Any:
    return ctx.apply("matmul", [a, b], {"transpose_a": ta, "transpose_b": tb})


def _matmul_grad(ctx: GradContext) -> list[Any]:
    a, b = ctx.inputs
    dy = ctx.dy
    ta, tb = bool(ctx.attrs.get("transpose_a", False)), bool(ctx.attrs.get("transpose_b", False))
    da = db = None
    # y = op(a) op(b): each case picks the transposes that give the input's own layout
    if not ta and not tb:
        da = _mm(ctx, dy, b, tb=True) if ctx.needs[0] else None
        db = _mm(ctx, a, dy, ta=True) if ctx.needs[1] else None
    elif ta and not tb:
        da = _mm(ctx, b, dy, tb=True) if ctx.needs[0] else None
        db = _mm(ctx, a, dy) if ctx.needs[1] else None
    elif not ta and tb:
        da = _mm(ctx, dy, b) if ctx.needs[0] else None
        db = _mm(ctx, dy, a, ta=True) if ctx.needs[1] else None
    else:
        da = _mm(ctx, b, dy, ta=True, tb=True) if ctx.needs[0] else None
        db = _mm(ctx, dy, a, ta=True, tb=True) if ctx.needs[1] else None
    return [da, db]


MATMUL = OpDef("matmul", _matmul_infer, kernel=_matmul_kernel, grad=_matmul_grad,
               doc="op(a) @ op(b), op = transpose of the last two axes when asked; batch axes broadcast",
               compute=Compute(flops=matmul_flops, layouts=layout_rules.matmul, amp="white"))


# bias_add -----------------------------------------------------------------
def bias_axis(data_format: Any, rank: int) -> int:
    """The channel axis bias_add adds along: legacy default 1 (``NC...``), last for ``N...C``."""
    if data_format is None:
        return 1 if rank > 1 else 0
    if not isinstance(data_format, str):
        raise ShapeError(f"bias_add data_format must be a string like 'NCHW' or 'NHWC', got {data_format!r}")
    fmt = data_format.upper()
    if fmt.startswith("NC"):
        return 1
    if fmt.startswith("N") and fmt.endswith("C"):
        return rank - 1
    raise ShapeError(f"bias_add data_format must look like 'NC...' or 'N...C', got {data_format!r}")


def _bias_add_infer(inputs: Sequence[BlobSpec], attrs: dict) -> list[BlobSpec]:
    x, bias = inputs
    same_dtype(inputs, "bias_add")
    if not x.shape:
        raise ShapeError("bias_add needs a value of rank >= 1")
    axis = normalize_axis(bias_axis(attrs.get("data_format"), len(x.shape)), len(x.shape))
    if len(bias.shape) != 1 or bias.shape[0] != x.shape[axis]:
        raise ShapeError(
            f"bias_add: bias must have shape ({x.shape[axis]},) to match axis {axis} of value {x.shape}, "
            f"got {bias.shape}")
    return [x]


def _bias_add_kernel(ctx: KernelContext) -> Any:
    xp, out = ctx.xp, ctx.out(0)
    rank = len(ctx.inputs[0].shape)
    axis = bias_axis(ctx.attrs.get("data_format"), rank)
    shape = tuple(ctx.inputs[0].shape[axis] if i == axis else 1 for i in range(rank))
    if axis == rank - 1:
        return lambda x, b: xp.add(x, b, out=out)  # broadcasts as it is
    return lambda x, b: xp.add(x, b.reshape(shape), out=out)


def _bias_add_grad(ctx: GradContext) -> list[Any]:
    rank = len(ctx.inputs[0].shape)
    axis = bias_axis(ctx.attrs.get("data_format"), rank)
    db = None
    if ctx.needs[1]:
        others = [i for i in range(rank) if i != axis]
        db = ctx.apply("reduce_sum", [ctx.dy], {"axis": others, "keepdims": False}) if others else ctx.dy
    return [ctx.dy, db]


def _bias_add_layouts(inputs: Sequence[BlobSpec], attrs: dict) -> list[Signature]:
    """The channel axis split with the bias split alike; another axis split with the bias broadcast."""
    x, _ = inputs
    axis = normalize_axis(bias_axis(attrs.get("data_format"), len(x.shape)), len(x.shape))
    return [Signature((split(k), split(0) if k == axis else BROADCAST), (split(k),)) for k in range(len(x.shape))]


BIAS_ADD = OpDef("bias_add", _bias_add_infer, kernel=_bias_add_kernel, grad=_bias_add_grad,
                 doc="value + bias along the channel axis (1 by default, the last for N...C formats)",
                 compute=Compute(layouts=_bias_add_layouts, amp="gray"))


# fused_self_attention_query_mul_key_and_value --------------------------------------------------------
def _attention_dims(hidden: BlobSpec, attrs: dict, op: str) -> tuple[int, int, int, int]:
    head_size = attrs.get("head_size")
    if isinstance(head_size, bool) or not isinstance(head_size, numbers.Integral) or head_size < 1:
        raise ShapeError(f"{op}: head_size must be a positive int, got {head_size!r}")
    alpha = attrs.get("alpha")
    if isinstance(alpha, bool) or not isinstance(alpha, numbers.Real):
        raise ShapeError(f"{op}: alpha must be a number, got {alpha!r}")
    if len(hidden.shape) != 3:
        raise ShapeError(f"{op}: hidden_states must be (seq_len, batch, hidden), got shape {hidden.shape}")
    seq, batch, width = hidden.shape
    if width % (3 * head_size):
        raise ShapeError(f"{op}: hidden size {width} is not a multiple of 3 * head_size = {3 * head_size}")
    return seq, batch, width // (3 * head_size), int(head_size)


def _attention_infer(inputs: Sequence[BlobSpec], attrs: dict) -> list[BlobSpec]:
    (hidden,) = inputs
    require_floating(inputs, "fused_self_attention_query_mul_key_and_value")
    seq, batch, heads, size = _attention_dims(hidden, attrs, "fused_self_attention_query_mul_key_and_value")
    return [BlobSpec((batch, heads, seq, seq), hidden.dtype), BlobSpec((batch, heads, seq, size), hidden.dtype)]


def _split_heads(xp: Any, hidden: Any, heads: int, size: int) -> tuple[Any, Any, Any]:
    """q, k, v as (batch, heads, seq, size): each head's 3 * size slice holds q, then k, then v."""
    seq, batch, _ = hidden.shape
    per_head = hidden.reshape(seq, batch, heads, 3, size)
    return tuple(xp.transpose(per_head[:, :, :, i], (1, 2, 0, 3)) for i in range(3))  # type: ignore[return-value]


def _attention_kernel(ctx: KernelContext) -> Any:
    xp = ctx.xp
    qmk_out, v_out = ctx.out(0), ctx.out(1)
    _, _, heads, size = _attention_dims(ctx.inputs[0], ctx.attrs, ctx.op)
    alpha = ctx.inputs[0].dtype.type(ctx.attrs["alpha"])

    def run(hidden: Any) -> tuple[Any, Any]:
        q, k, v = _split_heads(xp, hidden, heads, size)
        xp.matmul(q, xp.swapaxes(k, -1, -2), out=qmk_out)
        xp.multiply(qmk_out, alpha, out=qmk_out)
        xp.copyto(v_out, v)
        return qmk_out, v_out

    return run


def _attention_grad(ctx: GradContext) -> list[Any]:
    dqmk, dv = ctx.out_grads
    if dqmk is None and dv is None:
        return [None]
    dqmk = dqmk if dqmk is not None else ctx.apply("zeros_like", [ctx.outputs[0]])
    dv = dv if dv is not None else ctx.apply("zeros_like", [ctx.outputs[1]])
    attrs = {"head_size": ctx.attrs["head_size"], "alpha": ctx.attrs["alpha"]}
    return [ctx.apply("fused_self_attention_query_mul_key_and_value_grad", [ctx.inputs[0], dqmk, dv], attrs)]


def _attention_grad_infer(inputs: Sequence[BlobSpec], attrs: dict) -> list[BlobSpec]:
    hidden, dqmk, dv = inputs
    op = "fused_self_attention_query_mul_key_and_value_grad"
    require_floating(inputs, op)
    expected = _attention_infer([hidden], attrs)
    if [dqmk, dv] != expected:
        raise ShapeError(f"{op}: the gradients {dqmk}, {dv} must match the outputs {expected[0]}, {expected[1]}")
    return [hidden]


def _attention_grad_kernel(ctx: KernelContext) -> Any:
    xp, out = ctx.xp, ctx.out(0)
    seq, batch, heads, size = _attention_dims(ctx.inputs[0], ctx.attrs, ctx.op)
    alpha = ctx.inputs[0].dtype.type(ctx.attrs["alpha"])

    def run(hidden: Any, dqmk: Any, dv: Any) -> Any:
        q, k, _ = _split_heads(xp, hidden, heads, size)
        scaled = dqmk * alpha
        grads = (xp.matmul(scaled, k), xp.matmul(xp.swapaxes(scaled, -1, -2), q), dv)  # dq, dk, dv
        per_head = out.reshape(seq, batch, heads, 3, size)
        for i, grad in enumerate(grads):
            per_head[:, :, :, i] = xp.transpose(grad, (2, 0, 1, 3))
        return out

    return run


SELF_ATTENTION = OpDef(
    "fused_self_attention_query_mul_key_and_value", _attention_infer, kernel=_attention_kernel, grad=_attention_grad,
    doc="hidden (seq, batch, heads * 3 * size) -> (alpha * q @ k^T (batch, heads, seq, seq), v (batch, heads, seq, "
        "size))", compute=Compute(amp="white"))


SELF_ATTENTION_GRAD = OpDef(
    "fused_self_attention_query_mul_key_and_value_grad", _attention_grad_infer, kernel=_attention_grad_kernel,
    not_differentiable=True, doc="d hidden from the gradients of query_mul_key and value")

OPS = (MATMUL, BIAS_ADD, SELF_ATTENTION, SELF_ATTENTION_GRAD)
