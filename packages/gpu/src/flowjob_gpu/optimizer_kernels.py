"""The gpu backend's optimizer updates: flowjob-kernels' ``cuda/optimizer.cu``, one fused launch per variable
where the records' xp kernels (``flowjob_optim.update_ops``) make one pass over memory per operation (4 to 12).

Covered, float32 and float64 variables, keyed by the op records' names:

- ``optim_sgd_update``: ``w -= lr * (g + wd * w)``;
- ``optim_momentum_update``: ``m = beta * m - lr * g; w = w + m - lr * wd * w``;
- ``optim_adam_update``: ``m, v`` averages, ``w -= lr * (m / (sqrt(v) + eps) + wd * w)``;
- ``optim_adam_bias_corrected_update``: the same with ``lr_t = lr sqrt(1 - b2_t) / (1 - b1_t)``, computed on the
  device from the beta-power slots (shape (1,)), which a second one-thread launch then advances
  (``b1_t *= b1; b2_t *= b2``): two launches.

with every attribute the records read: the rule's hyper-parameters, ``weight_decay``, ``l1``/``l2``, ``clipped``
(the clipping factor read on the device) and ``grad_scale`` (folded into the rate for SGD and momentum exactly
where the record folds it: nothing else modifies the gradient). The gradient is the records'
``g = grad * grad_scale * clip + l1 * sign(w) + l2 * w``, and every operation is rounded where the record rounds
it (the CUDA source uses explicitly rounded intrinsics, no fused multiply-adds), so results agree with the
records' numpy kernels to float rounding. The learning rate (and clipping factor) must be float32 arrays of
shape (1,), as the optimizer makes them; they are passed to the kernel by pointer, never read on the host, and
nothing is allocated per step, so a step can be captured in a CUDA graph.

The record's own kernel runs instead (``ctx.ops[ctx.op].kernel(ctx)``) for other dtypes (float16), a learning
rate or clipping factor that is not float32, slots not shaped as the record's optimizers make them (moments like
the variable, beta powers of shape (1,)), and gated nodes: ``accumulation_steps`` > 1 (gradient accumulation) or
``skip_if_not_finite`` (a dynamic loss scale), whose gate ``flowjob_optim.accumulation.gated`` reads a counter
on the host, so the gate is left to the record's kernel. A call
whose variable, slots or gradient are not C-contiguous (the kernels walk flat memory) also runs the record's
kernel, built on first such call with private scratch.
"""
from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import numpy as np

from flowjob_core import BlobSpec, KernelContext
from flowjob_optim.update_ops import ADAM_BC_UPDATE, ADAM_UPDATE, MOMENTUM_UPDATE, SGD_UPDATE

from flowjob_gpu.record_kernels import BLOCK, launch_grid, own_kernel
from flowjob_gpu.sources import compiled_module

FAMILY = "optimizer"
SGD = SGD_UPDATE.name
MOMENTUM = MOMENTUM_UPDATE.name
ADAM = ADAM_UPDATE.name
ADAM_BIAS_CORRECTED = ADAM_BC_UPDATE.name
SYMBOLS: dict[str, dict[str, str]] = {
    SGD: {"float32": "sgd_update_f32", "float64": "sgd_update_f64"},
    MOMENTUM: {"float32": "momentum_update_f32", "float64": "momentum_update_f64"},
    ADAM: {"float32": "adam_update_f32", "float64": "adam_update_f64"},
    ADAM_BIAS_CORRECTED: {"float32": "adam_bias_corrected_update_f32", "float64": "adam_bias_corrected_update_f64"},
}
BETA_POWERS = {"float32": "adam_beta_powers_f32", "float64": "adam_beta_powers_f64"}
"""The one-thread launch that advances bias-corrected Adam's beta powers after its update."""
SLOTS: dict[str, tuple[str, ...]] = {
    SGD: (), MOMENTUM: ("like",), ADAM: ("like", "like"), ADAM_BIAS_CORRECTED: ("like", "like", "scalar", "scalar"),
}
"""Per op, its slots: ``like`` the variable, or ``scalar`` of shape (1,) (flowjob_optim.optimizers' rules)."""

# flowjob_optim.accumulation's attribute names
STEPS_ATTR = "accumulation_steps"
SKIP_ATTR = "skip_if_not_finite"
LR_SPEC = BlobSpec((1,), np.dtype(np.float32))

Run = Callable[..., None]


def _uncovered(ctx: KernelContext) -> str | None:
    """Why the fused kernel does not apply to this node (the record's kernel runs), or None."""
    attrs = ctx.attrs
    if int(attrs.get(STEPS_ATTR, 1) or 1) != 1 or attrs.get(SKIP_ATTR):
        return "a gated node (gradient accumulation or a dynamic loss scale)"
    var = ctx.inputs[0]
    if var.dtype.name not in SYMBOLS[ctx.op]:
        return f"{var.dtype} variables"
    slots = SLOTS[ctx.op]
    clipped = bool(attrs.get("clipped"))
    if len(ctx.inputs) != len(slots) + 3 + clipped:
        return f"{len(ctx.inputs)} inputs"
    scalar = BlobSpec((1,), var.dtype)
    for kind, spec in zip(slots, ctx.inputs[1:], strict=False):
        if spec != (var if kind == "like" else scalar):
            return f"a slot {spec} of the variable {var}"
    if ctx.inputs[len(slots) + 1] != var:
        return f"the gradient {ctx.inputs[len(slots) + 1]} of the variable {var}"
    for spec in ctx.inputs[len(slots) + 2:]:
        if spec != LR_SPEC:
            return f"a learning rate or clipping factor {spec} (float32 of shape (1,) only)"
    return None


class _Fused:
    """What every update shares: the entry point, the launch shape, the hyper-parameters as scalars of the
    variable's dtype, and the record's kernel for a call on non-contiguous arrays."""

    def __init__(self, ctx: KernelContext) -> None:
        cp = self.cp = ctx.xp
        var = ctx.inputs[0]
        self.ctx = ctx
        self.dt = var.dtype.type
        self.module = compiled_module(cp, FAMILY, cp.cuda.Device().id)
        self.fn = self.module.get_function(SYMBOLS[ctx.op][var.dtype.name])
        self.grid = launch_grid(var.size)
        self.block = (BLOCK,)
        self.size = np.int64(var.size)
        self.n_slots = len(SLOTS[ctx.op])
        self.clipped = bool(ctx.attrs.get("clipped"))
        self.clipped_flag = np.int32(self.clipped)
        self.scale = float(ctx.attrs.get("grad_scale", 1.0))
        self.l1, self.l2 = self.const(ctx.attrs.get("l1", 0.0)), self.const(ctx.attrs.get("l2", 0.0))
        self._record: list[Run] = []

    def const(self, value: Any) -> Any:
        """A hyper-parameter as a scalar of the variable's dtype (the records' ``_consts``)."""
        return self.dt(value)

    def record_kernel(self) -> Run:
        # built on first need, with private scratch: the plan's pool lends only to kernels built before the step
        if not self._record:
            self._record.append(own_kernel(dataclasses.replace(self.ctx, _scratch=None),
                                            "non-contiguous arrays"))
        return self._record[0]

    def wrap(self, launch: Callable[[Any, tuple[Any, ...], Any, Any, Any], None]) -> Run:
        """``run(w, *slots, g, lr[, clip])``: ``launch(w, slots, g, lr, clip)`` (``clip`` is ``lr``, unread, when
        the node is not clipped), or the record's kernel where an array is not C-contiguous."""
        end, clipped = self.n_slots + 1, self.clipped

        def run(*args: Any) -> None:
            w, slots, g, lr = args[0], args[1:end], args[end], args[end + 1]
            if not (w.flags.c_contiguous and g.flags.c_contiguous and all(s.flags.c_contiguous for s in slots)):
                self.record_kernel()(*args)
                return
            launch(w, slots, g, lr, args[end + 2] if clipped else lr)

        return run


def _lr_times_grad(update: _Fused, weight_decay: Any) -> tuple[Any, Any]:
    """(lr_scale, grad_scale) for SGD and momentum: the record folds ``grad_scale`` into the rate where nothing
    else touches the gradient (no clipping, regularizer or weight decay), else scales the gradient."""
    fold = (update.scale != 1.0 and not update.clipped and not update.l1 and not update.l2
            and not float(weight_decay or 0.0))
    one, scale = update.dt(1), update.dt(update.scale)
    return (scale, one) if fold else (one, scale)


def sgd_update_kernel(ctx: KernelContext) -> Any:
    """``optim_sgd_update``, inputs ``(w, g, lr[, clip])``."""
    why = _uncovered(ctx)
    if why is not None:
        return own_kernel(ctx, why)
    update = _Fused(ctx)
    fn, grid, block, size = update.fn, update.grid, update.block, update.size
    wd = update.const(ctx.attrs["weight_decay"])
    lr_scale, grad_scale = _lr_times_grad(update, ctx.attrs["weight_decay"])
    params = (lr_scale, grad_scale, update.l1, update.l2, wd, update.clipped_flag, size)

    def launch(w: Any, slots: tuple[Any, ...], g: Any, lr: Any, clip: Any) -> None:
        fn(grid, block, (w, g, lr, clip, *params))

    return update.wrap(launch)


def momentum_update_kernel(ctx: KernelContext) -> Any:
    """``optim_momentum_update``, inputs ``(w, m, g, lr[, clip])``."""
    why = _uncovered(ctx)
    if why is not None:
        return own_kernel(ctx, why)
    update = _Fused(ctx)
    fn, grid, block, size = update.fn, update.grid, update.block, update.size
    beta, wd = update.const(ctx.attrs["beta"]), update.const(ctx.attrs["weight_decay"])
    lr_scale, grad_scale = _lr_times_grad(update, ctx.attrs["weight_decay"])
    params = (lr_scale, grad_scale, update.l1, update.l2, beta, wd, update.clipped_flag, size)

    def launch(w: Any, slots: tuple[Any, ...], g: Any, lr: Any, clip: Any) -> None:
        fn(grid, block, (w, slots[0], g, lr, clip, *params))

    return update.wrap(launch)


def _adam_params(update: _Fused, ctx: KernelContext) -> tuple[Any, ...]:
    b1, b2, eps, wd = (update.const(ctx.attrs[name]) for name in ("beta1", "beta2", "epsilon", "weight_decay"))
    return (update.dt(update.scale), update.l1, update.l2, b1, b2, eps, wd, update.clipped_flag, update.size)


def adam_update_kernel(ctx: KernelContext) -> Any:
    """``optim_adam_update``, inputs ``(w, m, v, g, lr[, clip])``."""
    why = _uncovered(ctx)
    if why is not None:
        return own_kernel(ctx, why)
    update = _Fused(ctx)
    fn, grid, block = update.fn, update.grid, update.block
    params = _adam_params(update, ctx)

    def launch(w: Any, slots: tuple[Any, ...], g: Any, lr: Any, clip: Any) -> None:
        fn(grid, block, (w, slots[0], slots[1], g, lr, clip, *params))

    return update.wrap(launch)


def adam_bias_corrected_update_kernel(ctx: KernelContext) -> Any:
    """``optim_adam_bias_corrected_update``, inputs ``(w, m, v, b1_t, b2_t, g, lr[, clip])``: the update reads the
    beta powers as they are before the step, then a one-thread launch advances them."""
    why = _uncovered(ctx)
    if why is not None:
        return own_kernel(ctx, why)
    update = _Fused(ctx)
    fn, grid, block = update.fn, update.grid, update.block
    powers = update.module.get_function(BETA_POWERS[ctx.inputs[0].dtype.name])
    params = _adam_params(update, ctx)
    b1, b2 = update.const(ctx.attrs["beta1"]), update.const(ctx.attrs["beta2"])

    def launch(w: Any, slots: tuple[Any, ...], g: Any, lr: Any, clip: Any) -> None:
        m, v, b1t, b2t = slots
        fn(grid, block, (w, m, v, b1t, b2t, g, lr, clip, *params))
        powers((1,), (1,), (b1t, b2t, b1, b2))

    return update.wrap(launch)


OVERRIDES: dict[str, tuple[str, dict[str, str]]] = {op: (FAMILY, symbols) for op, symbols in SYMBOLS.items()}
"""Entries for ``flowjob_gpu.overrides.OVERRIDES`` (op -> (family, symbol per dtype))."""

KERNEL_BUILDERS: dict[str, Callable[[KernelContext], Any]] = {
    SGD: sgd_update_kernel,
    MOMENTUM: momentum_update_kernel,
    ADAM: adam_update_kernel,
    ADAM_BIAS_CORRECTED: adam_bias_corrected_update_kernel,
}
"""Entries for ``flowjob_gpu.overrides.KERNEL_BUILDERS``, keyed by the op records' names."""
