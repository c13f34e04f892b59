"""Ops made by the dense / elementwise fusion pass (``flowjob_ops.fusion_dense``), never by user code.

* ``matmul_bias`` (inputs a, b, bias; attributes ``transpose_a``, ``transpose_b`` as matmul has,
  ``data_format`` as bias_add has, ``activation`` None or "relu"): ``matmul -> bias_add (-> relu)``.
  The kernel runs the GEMM into its output buffer, then adds the bias and applies the ReLU in
  place: the same ufunc calls as the unfused kernels, without the two intermediate buffers.
* ``elementwise_chain`` (attribute ``steps``): a run of elementwise ops (``STEPS``) evaluated
  into one output buffer. Each step is ``(op, attrs, args)``: the member op's type and
  attributes, and where its operands come from, in the op's own order: ``-1`` is the running
  value (the previous step's result; never in step 0, exactly once in every later step), ``i >= 0``
  is input ``i`` of the fused node. The first step writes the output buffer, later ones update it
  in place, so each later step's result must have the running value's shape and dtype (its other
  operand broadcasts into it). Each step is the very ufunc call its op's kernel makes, with the
  same constants, in the same order: the result is bitwise the unfused ops' result.

Both gradient rules re-run the member ops' own rules (forward intermediates of a chain are
recomputed as plain nodes), so a differentiated fused node gives the unfused gradient graph.
"""
from __future__ import annotations

import numbers
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from flowjob_core import BlobSpec, GradContext, KernelContext, OpDef, ShapeError
from flowjob_core.builtin_ops import SCALAR_MUL

from flowjob_ops.defs import activations, math
from flowjob_ops.defs.common import normalize_axis, require_floating, typed_scalar
from flowjob_ops.defs.matmul import BIAS_ADD, MATMUL, bias_axis


class _StepGrad:
    """A GradContext for one member op of a fused node: runs the member's own rule, which emits
    its nodes through the fused node's context."""

    def __init__(self, outer: GradContext, attrs: dict, inputs: Sequence[Any], outputs: Sequence[Any], dy: Any,
                 needs: Sequence[bool]) -> None:
        self._outer = outer
        self.builder = outer.builder
        self.node = outer.node
        self.attrs = attrs
        self.inputs = tuple(inputs)
        self.outputs = tuple(outputs)
        self.out_grads = (dy,)
        self.needs = tuple(needs)

    @property
    def dy(self) -> Any:
        return self.out_grads[0]

    def apply(self, op_type: str, inputs: Sequence[Any], attrs: dict | None = None) -> Any:
        return self._outer.apply(op_type, inputs, attrs)


# matmul_bias ---------------------------------------------------------------------------------
ACTIVATIONS = (None, "relu")
MATMUL_ATTRS = ("transpose_a", "transpose_b")


def _matmul_attrs(attrs: dict) -> dict[str, bool]:
    return {k: bool(attrs.get(k, False)) for k in MATMUL_ATTRS}


def _matmul_bias_infer(inputs: Sequence[BlobSpec], attrs: dict) -> list[BlobSpec]:
    a, b, bias = inputs
    if attrs.get("activation") not in ACTIVATIONS:
        raise ShapeError(f"matmul_bias activation must be one of {ACTIVATIONS}, got {attrs.get('activation')!r}")
    (y,) = MATMUL.infer((a, b), _matmul_attrs(attrs))
    BIAS_ADD.infer((y, bias), {"data_format": attrs.get("data_format")})
    if attrs.get("activation") == "relu":
        require_floating((y,), "matmul_bias with activation 'relu'")
    return [y]


def _matmul_bias_kernel(ctx: KernelContext) -> Any:
    xp, out = ctx.xp, ctx.out(0)
    ta, tb = bool(ctx.attrs.get("transpose_a", False)), bool(ctx.attrs.get("transpose_b", False))
    rank = len(ctx.outputs[0].shape)
    axis = normalize_axis(bias_axis(ctx.attrs.get("data_format"), rank), rank)
    shape = None if axis == rank - 1 else tuple(ctx.outputs[0].shape[axis] if i == axis else 1 for i in range(rank))
    relu = ctx.attrs.get("activation") == "relu"
    # the unfused kernels' calls, one after the other on one buffer (matmul, bias_add, relu)
    matmul, add, maximum = xp.matmul, xp.add, xp.maximum

    def run(a: Any, b: Any, bias: Any) -> Any:
        matmul(a.swapaxes(-1, -2) if ta else a, b.swapaxes(-1, -2) if tb else b, out=out)
        add(out, bias if shape is None else bias.reshape(shape), out=out)
        if relu:
            maximum(out, 0, out=out)
        return out

    return run


def _matmul_bias_grad(ctx: GradContext) -> list[Any]:
    a, b, bias = ctx.inputs
    (y,) = ctx.outputs
    dz = ctx.apply("relu_grad", [y, ctx.dy]) if ctx.attrs.get("activation") == "relu" else ctx.dy
    da = db = dbias = None
    if ctx.needs[0] or ctx.needs[1]:
        da, db = MATMUL.grad(_StepGrad(ctx, _matmul_attrs(ctx.attrs), (a, b), (y,), dz, ctx.needs[:2]))
    if ctx.needs[2]:  # bias_add's rule reads only the value's shape, which y has
        _, dbias = BIAS_ADD.grad(_StepGrad(ctx, {"data_format": ctx.attrs.get("data_format")}, (y, bias), (y,), dz,
                                           (False, True)))
    return [da, db, dbias]


MATMUL_BIAS = OpDef("matmul_bias", _matmul_bias_infer, kernel=_matmul_bias_kernel, grad=_matmul_bias_grad,
                    name_prefix="MatmulBias",
                    doc="inputs (a, b, bias): matmul -> bias_add (-> relu with activation='relu') on one buffer; "
                        "made by the fusion pass")


# elementwise_chain ---------------------------------------------------------------------------
@dataclass(frozen=True)
class Step:
    """How the chain kernel runs one member op: exactly the ufunc call of that op's own kernel.

    ``constant``: None (the blob operands only), "zero" (relu's ``maximum(x, 0)``), "scalar" /
    "scalar_first" (the attribute ``scalar`` as a numpy scalar of the dtype, after / before the
    blob: ``typed_scalar``), "scalar_array" (core's scalar_mul: a 0-d array of the dtype).
    """

    record: OpDef
    ufunc: str
    arity: int = 1
    constant: str | None = None


STEPS: dict[str, Step] = {
    "relu": Step(activations.RELU, "maximum", 1, "zero"),
    "tanh": Step(activations.TANH, "tanh"),
    "negative": Step(math.NEGATIVE, "negative"),
    "square": Step(math.SQUARE, "square"),
    "sqrt": Step(math.SQRT, "sqrt"),
    "exp": Step(math.EXP, "exp"),
    "log": Step(math.LOG, "log"),
    "abs": Step(math.ABS, "abs"),
    "reciprocal": Step(math.RECIPROCAL, "reciprocal"),
    "sign": Step(math.SIGN, "sign"),
    "scalar_add": Step(math.SCALAR_ADD, "add", 1, "scalar"),
    "scalar_rsub": Step(math.SCALAR_RSUB, "subtract", 1, "scalar_first"),
    "scalar_div": Step(math.SCALAR_DIV, "divide", 1, "scalar"),
    "scalar_rdiv": Step(math.SCALAR_RDIV, "divide", 1, "scalar_first"),
    "scalar_pow": Step(math.SCALAR_POW, "power", 1, "scalar"),
    "scalar_mul": Step(SCALAR_MUL, "multiply", 1, "scalar_array"),
    "add": Step(math.ADD, "add", 2),
    "subtract": Step(math.SUBTRACT, "subtract", 2),
    "multiply": Step(math.MULTIPLY, "multiply", 2),
    "divide": Step(math.DIVIDE, "divide", 2),
    "maximum": Step(math.MAXIMUM, "maximum", 2),
    "minimum": Step(math.MINIMUM, "minimum", 2),
}
RUNNING = -1  # in a step's args: the running value


def chain_steps(attrs: dict) -> tuple[tuple[str, dict, tuple[int, ...]], ...]:
    """The ``steps`` attribute, checked for form (not shapes): ``((op, attrs, args), ...)``."""
    steps = attrs.get("steps")
    if not isinstance(steps, (tuple, list)) or not steps:
        raise ShapeError(f"elementwise_chain needs a non-empty sequence of steps, got {steps!r}")
    checked = []
    for k, step in enumerate(steps):
        try:
            op, step_attrs, args = step
        except (TypeError, ValueError):
            raise ShapeError(f"elementwise_chain step {k} must be (op, attrs, args), got {step!r}") from None
        if op not in STEPS:
            raise ShapeError(f"elementwise_chain step {k}: op {op!r} is not one of {sorted(STEPS)}")
        args = tuple(args)
        if len(args) != STEPS[op].arity or any(isinstance(i, bool) or not isinstance(i, numbers.Integral)
                                               for i in args):
            raise ShapeError(f"elementwise_chain step {k} ({op}): args must be {STEPS[op].arity} int(s), got {args!r}")
        running = sum(1 for i in args if i == RUNNING)
        if running != (0 if k == 0 else 1):
            raise ShapeError(f"elementwise_chain step {k} ({op}): the running value ({RUNNING}) must appear "
                             f"{'never in step 0' if k == 0 else 'exactly once'}, args {args!r}")
        checked.append((op, dict(step_attrs or {}), tuple(int(i) for i in args)))
    return tuple(checked)


def _chain_infer(inputs: Sequence[BlobSpec], attrs: dict) -> list[BlobSpec]:
    value: BlobSpec | None = None
    for k, (op, step_attrs, args) in enumerate(chain_steps(attrs)):
        if any(not RUNNING <= i < len(inputs) for i in args):
            raise ShapeError(f"elementwise_chain step {k} ({op}): args {args} name an input the node lacks "
                             f"({len(inputs)} inputs)")
        (out,) = STEPS[op].record.infer(tuple(value if i == RUNNING else inputs[i] for i in args), step_attrs)
        if value is not None and out != value:
            raise ShapeError(f"elementwise_chain step {k} ({op}) gives {out}, not the running value's {value}: "
                             f"it cannot run in place")
        value = out
    assert value is not None
    return [value]


def _step_constant(step: Step, attrs: dict, dtype: np.dtype) -> Any:
    if step.constant == "zero":
        return 0
    if step.constant == "scalar_array":
        return np.asarray(attrs["scalar"], dtype=dtype)
    return typed_scalar(attrs["scalar"], dtype)


def _chain_kernel(ctx: KernelContext) -> Any:
    xp, out = ctx.xp, ctx.out(0)
    dtype = ctx.outputs[0].dtype
    namespace: dict[str, Any] = {"out": out}
    params = [f"x{i}" for i in range(len(ctx.inputs))]
    lines = [f"def run({', '.join(params)}):"]
    for k, (op, step_attrs, args) in enumerate(chain_steps(ctx.attrs)):
        step = STEPS[op]
        namespace[f"f{k}"] = getattr(xp, step.ufunc)
        operands = ["out" if i == RUNNING else params[i] for i in args]
        if step.constant is not None:
            namespace[f"c{k}"] = _step_constant(step, step_attrs, dtype)
            operands.insert(0 if step.constant == "scalar_first" else len(operands), f"c{k}")
        lines.append(f"    f{k}({', '.join(operands)}, out=out)")
    lines.append("    return out")
    exec(compile("\n".join(lines) + "\n", f"<elementwise_chain {ctx.node_name}>", "exec"), namespace)
    return namespace["run"]


def _chain_grad(ctx: GradContext) -> list[Any]:
    steps = chain_steps(ctx.attrs)
    # recompute the intermediates as plain nodes (the rules of exp, divide, ... read them); the last is the output
    step_inputs: list[tuple[Any, ...]] = []
    step_outputs: list[Any] = []
    running_needs: list[bool] = []
    running, needed = None, False
    for k, (op, step_attrs, args) in enumerate(steps):
        operands = tuple(running if i == RUNNING else ctx.inputs[i] for i in args)
        running = ctx.outputs[0] if k == len(steps) - 1 else ctx.apply(op, list(operands), step_attrs)
        needed = needed or any(ctx.needs[i] for i in args if i != RUNNING)
        step_inputs.append(operands)
        step_outputs.append(running)
        running_needs.append(needed)
    parts: list[list[Any]] = [[] for _ in ctx.inputs]
    dy = ctx.dy
    for k in reversed(range(len(steps))):
        op, step_attrs, args = steps[k]
        needs = tuple(running_needs[k - 1] if i == RUNNING else ctx.needs[i] for i in args)
        if dy is None or not any(needs):
            break
        grads = STEPS[op].record.grad(_StepGrad(ctx, step_attrs, step_inputs[k], (step_outputs[k],), dy, needs))
        dy = None
        for i, need, grad in zip(args, needs, grads):
            if grad is None or not need:
                continue
            if i == RUNNING:
                dy = grad
            else:
                parts[i].append(grad)
    result: list[Any] = []
    for blob, grads in zip(ctx.inputs, parts):
        grads = [g if g.shape == blob.shape else ctx.apply("unbroadcast", [g], {"shape": blob.shape}) for g in grads]
        result.append(None if not grads else grads[0] if len(grads) == 1 else ctx.apply("add_n", grads))
    return result


ELEMENTWISE_CHAIN = OpDef("elementwise_chain", _chain_infer, kernel=_chain_kernel, grad=_chain_grad,
                          name_prefix="ElementwiseChain",
                          doc="a run of elementwise ops (attribute steps: (op, attrs, args) each, -1 = the running "
                              "value) evaluated in place in one buffer; made by the fusion pass")

OPS = (MATMUL_BIAS, ELEMENTWISE_CHAIN)
