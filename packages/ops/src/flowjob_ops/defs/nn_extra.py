"""Legacy v0.4 nn ops left over: ``upsample`` (nearest / bilinear), the fused self-attention projection
``fused_self_attention_query_mul_key_and_value`` and the layer-norm gradient ops legacy exported.

upsample works on NCHW (legacy's op took channels_first only; flow.layers.upsample_2d transposes NHWC
around it). Both interpolations are separable linear maps, y = A_h @ x @ A_w^T, built once per node with
legacy's source indices: nearest reads floor((o + 0.5) / scale); bilinear reads (o + 0.5) / scale - 0.5
clamped at 0, or o * (in - 1) / (out - 1) with align_corners. The gradient is A_h^T @ dy @ A_w, the
scatter-add legacy's kernel made.
"""
from __future__ import annotations

import numbers
from typing import Any, Sequence

import numpy as np

from flowjob_core import BlobSpec, GradContext, KernelContext, OpDef, ShapeError

from flowjob_ops.defs.common import normalize_axis, require_floating


# upsample -------------------------------------------------------------------------------
def _upsample_attrs(attrs: dict, op: str) -> tuple[float, float, bool, str]:
    scales = []
    for key in ("height_scale", "width_scale"):
        value = attrs.get(key)
        if isinstance(value, bool) or not isinstance(value, numbers.Real) or not float(value) > 0:
            raise ShapeError(f"{op}: {key} must be a positive number, got {value!r}")
        scales.append(float(value))
    interpolation = attrs.get("interpolation")
    if interpolation not in ("nearest", "bilinear"):
        raise ShapeError(f'{op}: interpolation must be "nearest" or "bilinear", got {interpolation!r}')
    align = attrs.get("align_corners")
    if not isinstance(align, bool):
        raise ShapeError(f"{op}: align_corners must be a bool, got {align!r}")
    if align and interpolation == "nearest":
        raise ShapeError(f'{op}: interpolation "nearest" does not support align_corners')
    return scales[0], scales[1], align, interpolation


def _upsampled(shape: Sequence[int], attrs: dict, op: str) -> tuple[int, int, int, int]:
    if len(shape) != 4:
        raise ShapeError(f"{op}: x must be NCHW (rank 4), got shape {tuple(shape)}")
    hs, ws, _, _ = _upsample_attrs(attrs, op)
    n, c, h, w = shape
    out = (n, c, int(hs * h), int(ws * w))  # legacy truncated scale * size
    if out[2] < 1 or out[3] < 1:
        raise ShapeError(f"{op}: the scales {hs}, {ws} leave an empty output from {tuple(shape)}")
    return out


def interpolation_matrix(size: int, out_size: int, scale: float, align: bool, interpolation: str) -> np.ndarray:
    """(out_size, size): row o holds the weights output o takes from each input position."""
    matrix = np.zeros((out_size, size))
    rows = np.arange(out_size)
    if interpolation == "nearest":
        # in float32 as legacy's kernel: floor((o + 0.5f) * (1.f / scale))
        source = np.floor((rows.astype(np.float32) + np.float32(0.5)) * (np.float32(1) / np.float32(scale)))
        source = source.astype(np.int64)
        matrix[rows, np.clip(source, 0, size - 1)] = 1.0
        return matrix
    if align:
        step = (size - 1) / (out_size - 1) if out_size > 1 else 0.0
        position = rows * step
    else:
        position = np.maximum((rows + 0.5) / scale - 0.5, 0.0)
    low = np.minimum(np.floor(position).astype(np.int64), size - 1)
    high = np.minimum(np.ceil(position).astype(np.int64), size - 1)
    frac = position - np.floor(position)
    np.add.at(matrix, (rows, low), 1.0 - frac)
    np.add.at(matrix, (rows, high), frac)
    return matrix


def _matrices(ctx: KernelContext, in_shape: Sequence[int], out_shape: Sequence[int], dtype: Any) -> tuple[Any, Any]:
    hs, ws, align, interpolation = _upsample_attrs(ctx.attrs, ctx.op)
    rows = interpolation_matrix(in_shape[2], out_shape[2], hs, align, interpolation)
    cols = interpolation_matrix(in_shape[3], out_shape[3], ws, align, interpolation)
    return ctx.xp.asarray(rows.astype(dtype)), ctx.xp.asarray(cols.T.astype(dtype))


def _upsample_infer(inputs: Sequence[BlobSpec], attrs: dict) -> list[BlobSpec]:
    (x,) = inputs
    require_floating(inputs, "upsample")
    return [BlobSpec(_upsampled(x.shape, attrs, "upsample"), x.dtype)]


def _upsample_kernel(ctx: KernelContext) -> Any:
    xp, out = ctx.xp, ctx.out(0)
    x_spec, y_spec = ctx.inputs[0], ctx.outputs[0]
    rows, cols_t = _matrices(ctx, x_spec.shape, y_spec.shape, x_spec.dtype)
    half = ctx.scratch((*x_spec.shape[:2], y_spec.shape[2], x_spec.shape[3]), x_spec.dtype)

    def run(x: Any) -> Any:
        xp.matmul(rows, x, out=half)
        return xp.matmul(half, cols_t, out=out)

    return run


def _upsample_grad(ctx: GradContext) -> list[Any]:
    return [ctx.apply("upsample_grad", [ctx.dy, ctx.inputs[0]], dict(ctx.attrs))]


def _upsample_grad_infer(inputs: Sequence[BlobSpec], attrs: dict) -> list[BlobSpec]:
    dy, x = inputs
    require_floating(inputs, "upsample_grad")
    expected = BlobSpec(_upsampled(x.shape, attrs, "upsample_grad"), x.dtype)
    if dy != expected:
        raise ShapeError(f"upsample_grad: dy {dy} must be the upsampled {expected}")
    return [x]


def _upsample_grad_kernel(ctx: KernelContext) -> Any:
    xp, out = ctx.xp, ctx.out(0)
    dy_spec, x_spec = ctx.inputs
    rows, cols_t = _matrices(ctx, x_spec.shape, dy_spec.shape, x_spec.dtype)
    rows_t, cols = rows.T.copy(), cols_t.T.copy()
    half = ctx.scratch((*x_spec.shape[:2], x_spec.shape[2], dy_spec.shape[3]), x_spec.dtype)

    def run(dy: Any, x: Any) -> Any:
        xp.matmul(rows_t, dy, out=half)
        return xp.matmul(half, cols, out=out)

    return run


UPSAMPLE = OpDef("upsample", _upsample_infer, kernel=_upsample_kernel, grad=_upsample_grad, name_prefix="Upsample2D",
                 doc="NCHW nearest or bilinear upsampling by (height_scale, width_scale), legacy's source indices")
UPSAMPLE_GRAD = OpDef("upsample_grad", _upsample_grad_infer, kernel=_upsample_grad_kernel, not_differentiable=True,
                      name_prefix="UpsampleGrad", doc="dx: each output's gradient added back to the inputs it read")


# fused self-attention projection --------------------------------------------------------
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
    name_prefix="FusedSelfAttentionQueryMulKeyAndValue",
    doc="hidden (seq, batch, heads * 3 * size) -> (alpha * q @ k^T (batch, heads, seq, seq), v (batch, heads, seq, "
        "size))")
SELF_ATTENTION_GRAD = OpDef(
    "fused_self_attention_query_mul_key_and_value_grad", _attention_grad_infer, kernel=_attention_grad_kernel,
    not_differentiable=True, name_prefix="FusedSelfAttentionQueryMulKeyAndValueGrad",
    doc="d hidden from the gradients of query_mul_key and value")


# layer norm gradients -------------------------------------------------------------------
def _begin_axis(value: Any, rank: int, what: str) -> int:
    axis = normalize_axis(value, rank, what)
    if axis < 1:
        raise ShapeError(f"{what} must leave at least one leading axis (>= 1), got {value!r}")
    return axis


def _layer_norm_grad_infer(inputs: Sequence[BlobSpec], attrs: dict) -> list[BlobSpec]:
    dy, x, mean, inv_variance = inputs
    require_floating(inputs, "layer_norm_grad")
    if dy != x:
        raise ShapeError(f"layer_norm_grad: dy {dy} must match x {x}")
    axis = _begin_axis(attrs.get("begin_norm_axis"), len(x.shape), "layer_norm_grad begin_norm_axis")
    stats = BlobSpec(x.shape[:axis], x.dtype)
    for what, spec in (("mean", mean), ("inv_variance", inv_variance)):
        if spec != stats:
            raise ShapeError(f"layer_norm_grad: {what} {spec} must be x's leading axes {stats}")
    return [x]


def _layer_norm_grad_kernel(ctx: KernelContext) -> Any:
    xp, out = ctx.xp, ctx.out(0)
    shape = ctx.inputs[1].shape
    axis = _begin_axis(ctx.attrs["begin_norm_axis"], len(shape), "begin_norm_axis")
    axes = tuple(range(axis, len(shape)))
    kept = shape[:axis] + (1,) * len(axes)

    def run(dy: Any, x: Any, mean: Any, inv_variance: Any) -> Any:
        # dx = r * (dy - mean(dy) - xhat * mean(dy * xhat)), xhat = (x - mean) * r over the normalized axes
        r = inv_variance.reshape(kept)
        xhat = (x - mean.reshape(kept)) * r
        centred = dy - dy.mean(axis=axes, keepdims=True) - xhat * (dy * xhat).mean(axis=axes, keepdims=True)
        return xp.multiply(centred, r, out=out)

    return run


def _param_grad_infer(inputs: Sequence[BlobSpec], attrs: dict) -> list[BlobSpec]:
    dy, normalized, gamma = inputs
    require_floating(inputs, "layer_norm_param_grad")
    if normalized != dy:
        raise ShapeError(f"layer_norm_param_grad: normalized {normalized} must match dy {dy}")
    axis = _begin_axis(attrs.get("begin_params_axis"), len(dy.shape), "layer_norm_param_grad begin_params_axis")
    param = BlobSpec(dy.shape[axis:], dy.dtype)
    if gamma != param:
        raise ShapeError(f"layer_norm_param_grad: gamma {gamma} must be dy's trailing axes {param}")
    return [dy, param, param]


def _param_grad_kernel(ctx: KernelContext) -> Any:
    xp = ctx.xp
    shape = ctx.inputs[0].shape
    axis = _begin_axis(ctx.attrs["begin_params_axis"], len(shape), "begin_params_axis")
    lead = tuple(range(axis))
    normalized_diff, beta_diff, gamma_diff = ctx.out(0), ctx.out(1), ctx.out(2)

    def run(dy: Any, normalized: Any, gamma: Any) -> tuple[Any, Any, Any]:
        xp.multiply(dy, gamma, out=normalized_diff)
        xp.sum(dy, axis=lead, out=beta_diff)
        xp.sum(dy * normalized, axis=lead, out=gamma_diff)
        return normalized_diff, beta_diff, gamma_diff

    return run


LAYER_NORM_GRAD = OpDef("layer_norm_grad", _layer_norm_grad_infer, kernel=_layer_norm_grad_kernel,
                        not_differentiable=True, name_prefix="LayerNormGrad",
                        doc="dx of layer normalization over the axes from begin_norm_axis, from mean and 1/std")
LAYER_NORM_PARAM_GRAD = OpDef("layer_norm_param_grad", _param_grad_infer, kernel=_param_grad_kernel,
                              not_differentiable=True, name_prefix="LayerNormParamGrad",
                              doc="(dy * gamma, sum of dy, sum of dy * normalized) over the axes before "
                                  "begin_params_axis")

OPS = (UPSAMPLE, UPSAMPLE_GRAD, SELF_ATTENTION, SELF_ATTENTION_GRAD, LAYER_NORM_GRAD, LAYER_NORM_PARAM_GRAD)
