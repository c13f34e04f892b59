"""Ops made by the dense / elementwise fusion pass (``flowjob_ops.passes.fuse_dense``), never by user code.

* ``matmul_bias`` (inputs a, b, bias; attributes ``transpose_a``, ``transpose_b`` as matmul has,
  ``data_format`` as bias_add has, ``activation`` None or "relu"): ``matmul -> bias_add (-> relu)``.
  The kernel runs the GEMM into its output buffer, then adds the bias and applies the ReLU in
  place: the same ufunc calls as the unfused kernels, without the two intermediate buffers.
* ``elementwise_chain`` (attribute ``steps``): a run of elementwise ops (any op whose record
  declares an ``Elementwise`` descriptor: ``STEPS`` for the built-in ones, the session's op
  registry for a chain registered by the plugin, so a plugin's op fuses too) evaluated into one
  output buffer. Each step is ``(op, attrs, args)``: the member op's type and
  attributes, and where its operands come from, in the op's own order: ``-1`` is the running
  value (the previous step's result; never in step 0, exactly once in every later step), ``i >= 0``
  is input ``i`` of the fused node. The first step writes the output buffer, later ones update it
  in place, so each later step's result must have the running value's shape and dtype (its other
  operand broadcasts into it). Each step is the very ufunc call its op's kernel makes (both are
  built from the op's descriptor), with the same constants, in the same order: the result is
  bitwise the unfused ops' result.

Both gradient rules re-run the member ops' own rules (forward intermediates of a chain are
recomputed as plain nodes), so a differentiated fused node gives the unfused gradient graph.
"""
from __future__ import annotations

import functools
import numbers
from dataclasses import dataclass
from typing import Any, Callable, Sequence

from flowjob_core import BlobSpec, Compute, Elementwise, GradContext, KernelContext, OpDef, ShapeError
from flowjob_core.plugins.builtin_ops import CORE_OPS

from flowjob_ops.records import activations, arithmetic, comparisons
from flowjob_ops.records.common import normalize_axis, require_floating
from flowjob_ops.records.matmul import BIAS_ADD, MATMUL, bias_axis, matmul_flops, whole_product


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


def matmul_bias_kernel_with(ctx: KernelContext, product: Callable[[Any, Any, Any], Any]) -> Any:
    """The kernel of ``matmul_bias`` with its GEMM ``product(a, b, out)`` (the cpu override passes one that runs
    a large product in parts over the host threads, ``flowjob_ops.overrides.cpu.matmul_parts``)."""
    xp, out = ctx.xp, ctx.out(0)
    ta, tb = bool(ctx.attrs.get("transpose_a", False)), bool(ctx.attrs.get("transpose_b", False))
    rank = len(ctx.outputs[0].shape)
    axis = normalize_axis(bias_axis(ctx.attrs.get("data_format"), rank), rank)
    shape = None if axis == rank - 1 else tuple(ctx.outputs[0].shape[axis] if i == axis else 1 for i in range(rank))
    relu = ctx.attrs.get("activation") == "relu"
    # the unfused kernels' calls, one after the other on one buffer (matmul, bias_add, relu)
    add, maximum = xp.add, xp.maximum

    def run(a: Any, b: Any, bias: Any) -> Any:
        product(a.swapaxes(-1, -2) if ta else a, b.swapaxes(-1, -2) if tb else b, out)
        add(out, bias if shape is None else bias.reshape(shape), out=out)
        if relu:
            maximum(out, 0, out=out)
        return out

    return run


def _matmul_bias_kernel(ctx: KernelContext) -> Any:
    return matmul_bias_kernel_with(ctx, whole_product(ctx.xp))


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
                    doc="inputs (a, b, bias): matmul -> bias_add (-> relu with activation='relu') on one buffer; "
                        "made by the fusion pass",
                    compute=Compute(flops=matmul_flops, amp="white", bitwise_as_parts=True))


# elementwise_chain ---------------------------------------------------------------------------
@dataclass(frozen=True)
class Step:
    """A member op of a chain: a record with an ``Elementwise`` descriptor, whose one ufunc call the
    chain kernel makes (the call its own kernel, built from the same descriptor, makes)."""

    record: OpDef

    @property
    def arity(self) -> int:
        return self._descriptor.arity

    @property
    def ufunc(self) -> str:
        return self._descriptor.ufunc

    @property
    def _descriptor(self) -> Elementwise:
        assert self.record.elementwise is not None
        return self.record.elementwise


def _builtin_steps() -> dict[str, Step]:
    """Every record of core and of this package's elementwise families that declares a descriptor."""
    records = (*CORE_OPS, *activations.OPS, *arithmetic.OPS, *comparisons.OPS)
    return {op.name: Step(op) for op in records if op.elementwise is not None}


STEPS: dict[str, Step] = _builtin_steps()
"""The built-in steps, for a chain used without a session (a session's chain op resolves names in
its own op registry, so a plugin's op with a descriptor fuses too)."""
RUNNING = -1  # in a step's args: the running value

StepLookup = Callable[[str], "Step | None"]


def _builtin_lookup(op: str) -> Step | None:
    return STEPS.get(op)


def registry_lookup(ops: Any) -> StepLookup:
    """Steps by op name from a session's op registry (any registered op with a descriptor); a name
    the registry lacks falls back to the built-in steps (a partial registry, as in a bare pass call)."""
    if ops is None:
        return _builtin_lookup

    def lookup(op: str) -> Step | None:
        if op not in ops:
            return STEPS.get(op)
        record = ops[op]
        return Step(record) if record.elementwise is not None else None

    return lookup


def _known(lookup: StepLookup, ops: Any) -> list[str]:
    names = set(STEPS) | ({getattr(op, "name", op) for op in ops} if ops is not None else set())
    return sorted(n for n in names if lookup(n) is not None)


def chain_steps(attrs: dict, lookup: StepLookup = _builtin_lookup, ops: Any = None
                ) -> tuple[tuple[str, dict, tuple[int, ...]], ...]:
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
        member = lookup(op)
        if member is None:
            raise ShapeError(f"elementwise_chain step {k}: op {op!r} is not one of the elementwise ops "
                             f"{_known(lookup, ops)}")
        args = tuple(args)
        if len(args) != member.arity or any(isinstance(i, bool) or not isinstance(i, numbers.Integral)
                                            for i in args):
            raise ShapeError(f"elementwise_chain step {k} ({op}): args must be {member.arity} int(s), got {args!r}")
        running = sum(1 for i in args if i == RUNNING)
        if running != (0 if k == 0 else 1):
            raise ShapeError(f"elementwise_chain step {k} ({op}): the running value ({RUNNING}) must appear "
                             f"{'never in step 0' if k == 0 else 'exactly once'}, args {args!r}")
        checked.append((op, dict(step_attrs or {}), tuple(int(i) for i in args)))
    return tuple(checked)


class _Chain:
    """The rules of ``elementwise_chain`` with one way to find the member records: the built-in
    steps, or a session's op registry."""

    def __init__(self, ops: Any = None) -> None:
        self.ops = ops
        self.lookup: StepLookup = registry_lookup(ops)

    def steps(self, attrs: dict) -> tuple[tuple[str, dict, tuple[int, ...]], ...]:
        return chain_steps(attrs, self.lookup, self.ops)

    def record(self, op: str) -> OpDef:
        member = self.lookup(op)
        assert member is not None  # steps() checked every name
        return member.record

    def infer(self, inputs: Sequence[BlobSpec], attrs: dict) -> list[BlobSpec]:
        value: BlobSpec | None = None
        for k, (op, step_attrs, args) in enumerate(self.steps(attrs)):
            if any(not RUNNING <= i < len(inputs) for i in args):
                raise ShapeError(f"elementwise_chain step {k} ({op}): args {args} name an input the node lacks "
                                 f"({len(inputs)} inputs)")
            (out,) = self.record(op).infer(tuple(value if i == RUNNING else inputs[i] for i in args), step_attrs)
            if value is not None and out != value:
                raise ShapeError(f"elementwise_chain step {k} ({op}) gives {out}, not the running value's {value}: "
                                 f"it cannot run in place")
            value = out
        assert value is not None
        return [value]

    def kernel(self, ctx: KernelContext) -> Any:
        return functools.partial(self.function(ctx), ctx.out(0))

    def function(self, ctx: KernelContext) -> Callable[..., Any]:
        """``run(out, *inputs)``: the steps as one generated function writing ``out`` (the whole output, or,
        in the cpu override ``flowjob_ops.overrides.cpu.chain_in_blocks``, a run of its rows)."""
        xp = ctx.xp
        dtype = ctx.outputs[0].dtype
        namespace: dict[str, Any] = {}
        params = [f"x{i}" for i in range(len(ctx.inputs))]
        lines = [f"def run(out, {', '.join(params)}):"]
        for k, (op, step_attrs, args) in enumerate(self.steps(ctx.attrs)):
            descriptor = self.record(op).elementwise
            assert descriptor is not None
            namespace[f"f{k}"] = getattr(xp, descriptor.ufunc)
            # the number operand takes the blob operand's dtype, as in the op's own kernel
            operand_dtype = dtype if args[0] == RUNNING else ctx.inputs[args[0]].dtype
            constant = descriptor.constant(step_attrs, operand_dtype)
            if constant is not None:
                namespace[f"c{k}"] = constant
            operands = descriptor.operands(["out" if i == RUNNING else params[i] for i in args], f"c{k}")
            lines.append(f"    f{k}({', '.join(operands)}, out=out)")
        lines.append("    return out")
        exec(compile("\n".join(lines) + "\n", f"<elementwise_chain {ctx.node_name}>", "exec"), namespace)
        run: Callable[..., Any] = namespace["run"]
        return run

    def grad(self, ctx: GradContext) -> list[Any]:
        steps = self.steps(ctx.attrs)
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
            record = self.record(op)
            if record.grad is None:  # a not-differentiable member (a comparison): nothing flows back through it
                break
            grads = record.grad(_StepGrad(ctx, step_attrs, step_inputs[k], (step_outputs[k],), dy, needs))
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
            grads = [g if g.shape == blob.shape else ctx.apply("unbroadcast", [g], {"shape": blob.shape})
                     for g in grads]
            result.append(None if not grads else grads[0] if len(grads) == 1 else ctx.apply("add_n", grads))
        return result


def chain_op(ops: Any = None) -> OpDef:
    """The ``elementwise_chain`` record; with a session's op registry its steps may be any registered
    op with an ``Elementwise`` descriptor (the plugin registers this one), without, the built-in ones."""
    rules = _Chain(ops)
    # made by the fusion pass, after mixed precision has cast the graph: black, as it was without a class
    return OpDef("elementwise_chain", rules.infer, kernel=rules.kernel, grad=rules.grad,
                 doc="a run of elementwise ops (attribute steps: (op, attrs, args) each, -1 = the running "
                     "value) evaluated in place in one buffer; made by the fusion pass",
                 compute=Compute(amp="black", bitwise_as_parts=True))


def chain_function(ctx: KernelContext) -> Callable[..., Any]:
    """``run(out, *inputs)``: the chain of ``ctx.attrs['steps']`` as one function writing ``out``, its steps
    looked up in ``ctx.ops`` (the session's records), else among the built-in ones."""
    return _Chain(ctx.ops).function(ctx)


ELEMENTWISE_CHAIN = chain_op()
"""The chain over the built-in steps (for use without a session: tests, a bare fusion call)."""

OPS = (MATMUL_BIAS,)
"""Registered as they are; the plugin registers ``chain_op(registry)`` beside them."""
