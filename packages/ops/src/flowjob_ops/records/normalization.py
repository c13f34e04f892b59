"""Normalization: ``moments`` (mean and biased variance), ``batch_norm`` (normalize with given
statistics, then scale and offset), their gradient ops, and the in-place moving-average update
the batch-normalization layer runs in train jobs; ``l2_normalize`` (out_0 legacy's y, out_1 its
square_x_sum: the per-slice sum of squares) and the layer-norm gradient ops legacy exported
(``layer_norm_grad``, ``layer_norm_param_grad``).

``batch_norm`` takes its statistics and parameters already shaped to broadcast against x with x's
rank (the public functions reshape legacy's 1-D parameters), so one op serves ``flow.nn.
batch_normalization``, ``flow.layers.batch_normalization`` (per-channel statistics) and
``flow.layers.layer_norm`` (per-sample statistics). Its gradient reaches x, the statistics and
the scale; a train-mode layer feeds ``moments`` outputs, so the gradient flows on through the
batch statistics into x as well (the full batch-norm gradient, built from two nodes).
"""
from __future__ import annotations

import math
import numbers
from typing import Any, Sequence

from flowjob_core import BlobSpec, Compute, Effects, GradContext, KernelContext, LegacyFace, OpDef, ShapeError

from flowjob_ops import layout_rules

from flowjob_ops.records.common import kept_dims_shape, normalize_axes, normalize_axis, require_floating, same_dtype


# moments ------------------------------------------------------------------------------
def _moments_axes(x: BlobSpec, attrs: dict, op: str) -> tuple[int, ...]:
    axes = attrs.get("axes")
    if axes is None or isinstance(axes, (bool, str)) or not isinstance(axes, (list, tuple)) or not axes:
        raise ShapeError(f"{op}: axes must be a non-empty list of ints, got {axes!r}")
    return normalize_axes(axes, len(x.shape))


def _moments_out_shape(x: BlobSpec, axes: Sequence[int], keepdims: bool) -> tuple[int, ...]:
    if keepdims:
        return kept_dims_shape(x.shape, axes)
    return tuple(d for i, d in enumerate(x.shape) if i not in axes) or (1,)  # legacy: never 0-d


def _moments_infer(inputs: Sequence[BlobSpec], attrs: dict) -> list[BlobSpec]:
    (x,) = inputs
    require_floating(inputs, "moments")
    axes = _moments_axes(x, attrs, "moments")
    if any(x.shape[a] == 0 for a in axes):
        raise ShapeError(f"moments over an empty axis of shape {x.shape}")
    spec = BlobSpec(_moments_out_shape(x, axes, bool(attrs.get("keepdims", False))), x.dtype)
    return [spec, spec]


def _moments_kernel(ctx: KernelContext) -> Any:
    xp = ctx.xp
    x_spec = ctx.inputs[0]
    axes = normalize_axes(ctx.attrs["axes"], len(x_spec.shape))
    kept = kept_dims_shape(x_spec.shape, axes)
    mean, var = ctx.out(0), ctx.out(1)
    centered = ctx.workspace(x_spec.shape, x_spec.dtype)

    def run(x: Any) -> tuple[Any, Any]:
        # the planned buffers are contiguous: a kept-dims view of them broadcasts against x
        mean_kept, var_kept = mean.reshape(kept), var.reshape(kept)
        xp.mean(x, axis=axes, keepdims=True, out=mean_kept)
        # two passes (centre, then square) rather than E[x^2] - E[x]^2, which cancels badly
        xp.subtract(x, mean_kept, out=centered)
        xp.multiply(centered, centered, out=centered)
        xp.mean(centered, axis=axes, keepdims=True, out=var_kept)
        return mean, var

    return run


def _moments_grad(ctx: GradContext) -> list[Any]:
    dmean, dvar = ctx.out_grads
    if dmean is None and dvar is None:
        return [None]
    inputs = [ctx.inputs[0], ctx.outputs[0]] + [g for g in (dmean, dvar) if g is not None]
    attrs = {"axes": ctx.attrs["axes"], "keepdims": ctx.attrs.get("keepdims", False),
             "with_mean": dmean is not None, "with_variance": dvar is not None}
    return [ctx.apply("moments_grad", inputs, attrs)]


def _moments_grad_infer(inputs: Sequence[BlobSpec], attrs: dict) -> list[BlobSpec]:
    x = inputs[0]
    require_floating(inputs, "moments_grad")
    same_dtype(inputs, "moments_grad")
    axes = _moments_axes(x, attrs, "moments_grad")
    stat = BlobSpec(_moments_out_shape(x, axes, bool(attrs.get("keepdims", False))), x.dtype)
    wanted = 2 + bool(attrs.get("with_mean")) + bool(attrs.get("with_variance"))
    if wanted == 2:
        raise ShapeError("moments_grad needs with_mean or with_variance")
    if len(inputs) != wanted or any(s != stat for s in inputs[1:]):
        raise ShapeError(f"moments_grad expects x, mean and {wanted - 2} gradient(s) shaped {stat}, "
                         f"got {[s for s in inputs]}")
    return [x]


def _moments_grad_kernel(ctx: KernelContext) -> Any:
    xp, out = ctx.xp, ctx.out(0)
    x_spec = ctx.inputs[0]
    axes = normalize_axes(ctx.attrs["axes"], len(x_spec.shape))
    kept = kept_dims_shape(x_spec.shape, axes)
    inv_n = x_spec.dtype.type(1.0 / math.prod(x_spec.shape[a] for a in axes))
    with_mean, with_var = bool(ctx.attrs["with_mean"]), bool(ctx.attrs["with_variance"])
    scaled = ctx.workspace(kept, x_spec.dtype)

    def run(x: Any, mean: Any, *grads: Any) -> Any:
        # d mean / dx = 1/n; d var / dx = 2 (x - mean) / n (the mean's own dependence sums to zero)
        dmean = grads[0].reshape(kept) if with_mean else None
        if with_var:
            dvar = grads[-1].reshape(kept)
            xp.subtract(x, mean.reshape(kept), out=out)
            xp.multiply(dvar, x_spec.dtype.type(2) * inv_n, out=scaled)
            xp.multiply(out, scaled, out=out)
            if dmean is not None:
                xp.multiply(dmean, inv_n, out=scaled)
                xp.add(out, scaled, out=out)
            return out
        xp.multiply(dmean, inv_n, out=scaled)
        out[...] = scaled
        return out

    return run


MOMENTS = OpDef("moments", _moments_infer, kernel=_moments_kernel, grad=_moments_grad,
                doc="(mean, biased variance) of x over axes, keeping the reduced axes when keepdims",
                compute=Compute(layouts=layout_rules.moments, amp="black"),
                legacy=LegacyFace(output_names=("mean", "variance")))
MOMENTS_GRAD = OpDef("moments_grad", _moments_grad_infer, kernel=_moments_grad_kernel, not_differentiable=True,
                     doc="dmean / n + dvar * 2 (x - mean) / n, broadcast over the reduced axes",
                     compute=Compute(layouts=layout_rules.moments_grad))


# batch_norm ---------------------------------------------------------------------------
def check_epsilon(value: Any, op: str, arg: str = "epsilon") -> float:
    """A finite non-negative epsilon; bad values name the op and the argument."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not math.isfinite(value) or value < 0:
        raise ShapeError(f"{op}: {arg} must be a finite number >= 0, got {value!r}")
    return float(value)


def _param_names(attrs: dict) -> list[str]:
    names = ["mean", "variance"]
    if attrs.get("with_scale"):
        names.append("scale")
    if attrs.get("with_offset"):
        names.append("offset")
    return names


def _check_params(x: BlobSpec, params: Sequence[BlobSpec], names: Sequence[str], op: str) -> None:
    for name, spec in zip(names, params):
        if len(spec.shape) != len(x.shape) or any(p not in (1, d) for p, d in zip(spec.shape, x.shape)):
            raise ShapeError(f"{op}: {name} of shape {spec.shape} must have x's rank and broadcast to x {x.shape}")


def _batch_norm_infer(inputs: Sequence[BlobSpec], attrs: dict) -> list[BlobSpec]:
    names = _param_names(attrs)
    if len(inputs) != 1 + len(names):
        raise ShapeError(f"batch_norm expects inputs x, {', '.join(names)}; got {len(inputs)} inputs")
    require_floating(inputs, "batch_norm")
    same_dtype(inputs, "batch_norm")
    check_epsilon(attrs.get("epsilon"), "batch_norm")
    _check_params(inputs[0], inputs[1:], names, "batch_norm")
    return [inputs[0]]


def _batch_norm_kernel(ctx: KernelContext) -> Any:
    xp, out = ctx.xp, ctx.out(0)
    dtype = ctx.inputs[0].dtype
    eps = dtype.type(ctx.attrs["epsilon"])
    with_scale, with_offset = bool(ctx.attrs.get("with_scale")), bool(ctx.attrs.get("with_offset"))
    inv = ctx.workspace(ctx.inputs[2].shape, dtype)

    def run(x: Any, mean: Any, variance: Any, *params: Any) -> Any:
        xp.add(variance, eps, out=inv)
        xp.sqrt(inv, out=inv)
        xp.divide(dtype.type(1), inv, out=inv)
        xp.subtract(x, mean, out=out)
        xp.multiply(out, inv, out=out)
        if with_scale:
            xp.multiply(out, params[0], out=out)
        if with_offset:
            xp.add(out, params[-1], out=out)
        return out

    return run


def _batch_norm_grad(ctx: GradContext) -> list[Any]:
    attrs = ctx.attrs
    with_scale, with_offset = bool(attrs.get("with_scale")), bool(attrs.get("with_offset"))
    needs = ctx.needs
    grads: list[Any] = [None] * len(ctx.inputs)
    if any(needs[:3 + with_scale]):
        saved = list(ctx.inputs[:3 + with_scale])
        outs = ctx.apply("batch_norm_grad", saved + [ctx.dy],
                         {"epsilon": attrs["epsilon"], "with_scale": with_scale})
        grads[:len(outs)] = list(outs)
    if with_offset:
        grads[-1] = ctx.dy  # a broadcast of the offset: autodiff sums it back to the offset's shape
    return grads


def _batch_norm_grad_infer(inputs: Sequence[BlobSpec], attrs: dict) -> list[BlobSpec]:
    names = ["mean", "variance"] + (["scale"] if attrs.get("with_scale") else [])
    if len(inputs) != 2 + len(names):
        raise ShapeError(f"batch_norm_grad expects x, {', '.join(names)}, dy; got {len(inputs)} inputs")
    require_floating(inputs, "batch_norm_grad")
    same_dtype(inputs, "batch_norm_grad")
    check_epsilon(attrs.get("epsilon"), "batch_norm_grad")
    x, dy = inputs[0], inputs[-1]
    if dy.shape != x.shape:
        raise ShapeError(f"batch_norm_grad: dy {dy.shape} must be shaped like x {x.shape}")
    _check_params(x, inputs[1:-1], names, "batch_norm_grad")
    return list(inputs[:-1])  # dx, dmean, dvariance (, dscale): each shaped like its input


def _sum_to(xp: Any, a: Any, out: Any) -> Any:
    """``a`` summed over the axes where ``out`` has extent 1 (same rank), into ``out``."""
    axes = tuple(i for i, (n, m) in enumerate(zip(out.shape, a.shape)) if n == 1 and m != 1)
    if not axes:
        out[...] = a
        return out
    return xp.sum(a, axis=axes, keepdims=True, out=out)


def _batch_norm_grad_kernel(ctx: KernelContext) -> Any:
    xp = ctx.xp
    x_spec = ctx.inputs[0]
    dtype = x_spec.dtype
    eps = dtype.type(ctx.attrs["epsilon"])
    with_scale = bool(ctx.attrs.get("with_scale"))
    inv = ctx.workspace(ctx.inputs[2].shape, dtype)
    g = ctx.workspace(x_spec.shape, dtype)
    centered = ctx.workspace(x_spec.shape, dtype)
    outs = [ctx.out(i) for i in range(len(ctx.outputs))]

    def run(x: Any, mean: Any, variance: Any, *rest: Any) -> tuple[Any, ...]:
        dy = rest[-1]
        dx, dmean, dvar = outs[:3]
        xp.add(variance, eps, out=inv)
        xp.sqrt(inv, out=inv)
        xp.divide(dtype.type(1), inv, out=inv)             # inv = (var + eps)^-1/2
        xp.subtract(x, mean, out=centered)
        if with_scale:
            # d/dscale = sum(dy * (x - mean) * inv); dy * scale is what reaches the normalized value
            xp.multiply(centered, inv, out=g)
            xp.multiply(g, dy, out=g)
            _sum_to(xp, g, outs[3])
            xp.multiply(dy, rest[0], out=g)
        else:
            g[...] = dy
        xp.multiply(g, inv, out=dx)                         # dx = g * inv
        _sum_to(xp, dx, dmean)
        xp.negative(dmean, out=dmean)                       # dmean = -sum(g * inv)
        xp.multiply(g, centered, out=g)
        _sum_to(xp, g, dvar)                                # dvar = -1/2 inv^3 sum(g (x - mean))
        xp.multiply(dvar, inv, out=dvar)
        xp.multiply(dvar, inv, out=dvar)
        xp.multiply(dvar, inv, out=dvar)
        xp.multiply(dvar, dtype.type(-0.5), out=dvar)
        return tuple(outs)

    return run


BATCH_NORM = OpDef("batch_norm", _batch_norm_infer, kernel=_batch_norm_kernel, grad=_batch_norm_grad,
                   doc="(x - mean) / sqrt(variance + epsilon) * scale + offset, parameters broadcast against x",
                   compute=Compute(layouts=layout_rules.batch_norm, amp="gray"))
BATCH_NORM_GRAD = OpDef("batch_norm_grad", _batch_norm_grad_infer, kernel=_batch_norm_grad_kernel,
                        not_differentiable=True,
                        doc="(dx, dmean, dvariance[, dscale]) of batch_norm from x, its statistics, scale and dy",
                        compute=Compute(layouts=layout_rules.batch_norm_grad))


# moving averages ----------------------------------------------------------------------
def check_momentum(value: Any, op: str) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not 0.0 <= float(value) <= 1.0:
        raise ShapeError(f"{op}: momentum must be a number in [0, 1], got {value!r}")
    return float(value)


def _moving_infer(inputs: Sequence[BlobSpec], attrs: dict) -> list[BlobSpec]:
    if len(inputs) != 2:
        raise ShapeError(f"batch_norm_moving_update expects (moving, batch_statistic), got {len(inputs)} inputs")
    require_floating(inputs, "batch_norm_moving_update")
    moving, stat = inputs
    if moving != stat:
        raise ShapeError(f"batch_norm_moving_update: the batch statistic {stat} must match the moving value {moving}")
    check_momentum(attrs.get("momentum"), "batch_norm_moving_update")
    return []


def _moving_kernel(ctx: KernelContext) -> Any:
    xp = ctx.xp
    dtype = ctx.inputs[0].dtype
    momentum = float(ctx.attrs["momentum"])
    keep, take = dtype.type(momentum), dtype.type(1.0 - momentum)
    part = ctx.workspace(ctx.inputs[1].shape, dtype)

    def run(moving: Any, stat: Any) -> None:
        xp.multiply(stat, take, out=part)
        xp.multiply(moving, keep, out=moving)
        xp.add(moving, part, out=moving)

    return run


MOVING_UPDATE = OpDef("batch_norm_moving_update", _moving_infer, kernel=_moving_kernel, not_differentiable=True,
                      doc="moving = momentum * moving + (1 - momentum) * batch_statistic, in place, after "
                          "every other reader of moving in the step", compute=Compute(amp="black"),
                      effects=Effects(mutates=(0,), effect=True), legacy=LegacyFace(name_prefix="MovingUpdate"))


# l2_normalize (out_0 legacy's y, out_1 its square_x_sum: the per-slice sum of squares) ---------------
def _l2_infer(inputs: Sequence[BlobSpec], attrs: dict) -> list[BlobSpec]:
    (x,) = inputs
    require_floating([x], "l2_normalize (input)")
    if not x.shape:
        raise ShapeError("l2_normalize needs an input of rank >= 1")
    axis = normalize_axis(attrs["axis"], len(x.shape))
    if not float(attrs["epsilon"]) >= 0:
        raise ShapeError(f"l2_normalize: epsilon must be >= 0, got {attrs['epsilon']!r}")
    return [x, BlobSpec(kept_dims_shape(x.shape, (axis,)), x.dtype)]


def _l2_kernel(ctx: KernelContext) -> Any:
    xp = ctx.xp
    y, square_sum = ctx.out(0), ctx.out(1)
    spec = ctx.inputs[0]
    axis = normalize_axis(ctx.attrs["axis"], len(spec.shape))
    eps = spec.dtype.type(ctx.attrs["epsilon"])
    norm = ctx.scratch(square_sum.shape, spec.dtype)

    def run(x: Any) -> tuple[Any, Any]:  # x / sqrt(max(sum(x^2), epsilon)), as legacy's kernel
        xp.square(x, out=y)
        xp.sum(y, axis=axis, keepdims=True, out=square_sum)
        xp.maximum(square_sum, eps, out=norm)
        xp.sqrt(norm, out=norm)
        xp.divide(x, norm, out=y)
        return y, square_sum

    return run


def _l2_grad(ctx: GradContext) -> list[Any]:
    x = ctx.inputs[0]
    y, square_sum = ctx.outputs
    dy, dsum = ctx.out_grads
    parts = []
    if dy is not None:
        parts.append(ctx.apply("l2_normalize_grad", [dy, y, square_sum], dict(ctx.attrs)))
    if dsum is not None:  # d sum(x^2) = 2 x
        spread = ctx.apply("broadcast_to", [dsum], {"shape": x.shape}) if dsum.shape != x.shape else dsum
        parts.append(ctx.apply("scalar_mul", [ctx.apply("multiply", [x, spread])], {"scalar": 2.0}))
    if not parts:
        return [None]
    return [parts[0] if len(parts) == 1 else ctx.apply("add", parts)]


def _l2_grad_infer(inputs: Sequence[BlobSpec], attrs: dict) -> list[BlobSpec]:
    dy, y, square_sum = inputs
    axis = normalize_axis(attrs["axis"], len(y.shape))
    if dy.shape != y.shape or square_sum.shape != kept_dims_shape(y.shape, (axis,)):
        raise ShapeError(f"l2_normalize_grad: dy {dy.shape}, y {y.shape}, square_x_sum {square_sum.shape}")
    return [y]


def _l2_grad_kernel(ctx: KernelContext) -> Any:
    xp, dx = ctx.xp, ctx.out(0)
    spec = ctx.inputs[1]
    axis = normalize_axis(ctx.attrs["axis"], len(spec.shape))
    eps = spec.dtype.type(ctx.attrs["epsilon"])
    kept = kept_dims_shape(spec.shape, (axis,))
    norm = ctx.scratch(kept, spec.dtype)
    dot = ctx.scratch(kept, spec.dtype)
    clamped = ctx.scratch(kept, dtype=bool)

    def run(dy: Any, y: Any, square_sum: Any) -> Any:
        # above epsilon the norm depends on x: (dy - y * sum(y dy)) / norm; below it the norm is the
        # constant sqrt(epsilon) and dx = dy / norm
        xp.maximum(square_sum, eps, out=norm)
        xp.sqrt(norm, out=norm)
        xp.multiply(y, dy, out=dx)
        xp.sum(dx, axis=axis, keepdims=True, out=dot)
        xp.less(square_sum, eps, out=clamped)
        dot[clamped] = 0
        xp.multiply(y, dot, out=dx)
        xp.subtract(dy, dx, out=dx)
        return xp.divide(dx, norm, out=dx)

    return run


L2_NORMALIZE = OpDef("l2_normalize", _l2_infer, kernel=_l2_kernel, grad=_l2_grad,
                     doc="y = x / sqrt(max(sum(x^2 over axis), epsilon)); square_x_sum keeps the axis as 1",
                     compute=Compute(layouts=layout_rules.l2_normalize, amp="black"))


L2_NORMALIZE_GRAD = OpDef("l2_normalize_grad", _l2_grad_infer, kernel=_l2_grad_kernel, not_differentiable=True,
                          doc="inputs (dy, y, square_x_sum): the gradient of x",
                          compute=Compute(layouts=layout_rules.l2_normalize))


# layer_norm_grad, layer_norm_param_grad (legacy exported them) ---------------------------------------
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
                        not_differentiable=True,
                        doc="dx of layer normalization over the axes from begin_norm_axis, from mean and 1/std")


LAYER_NORM_PARAM_GRAD = OpDef("layer_norm_param_grad", _param_grad_infer, kernel=_param_grad_kernel,
                              not_differentiable=True,
                              doc="(dy * gamma, sum of dy, sum of dy * normalized) over the axes before "
                                  "begin_params_axis")

OPS = (MOMENTS, MOMENTS_GRAD, BATCH_NORM, BATCH_NORM_GRAD, MOVING_UPDATE, L2_NORMALIZE, L2_NORMALIZE_GRAD,
       LAYER_NORM_GRAD, LAYER_NORM_PARAM_GRAD)
