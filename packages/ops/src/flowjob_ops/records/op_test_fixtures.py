"""The test ops legacy compiled into its library (v0.4's ``user/ops/test_ops.cpp`` and
``user/kernels/test_kernels.cpp``), which its own op tests call through ``flow.user_op_builder``.

Each keeps its legacy name for ``Op(...)`` (``OpDef.legacy.legacy_names``), its shapes and dtypes, and what its legacy
kernel wrote: ``TestSource`` 0..4, ``TestRandomSource`` five draws of legacy's CPU uniform stream per step,
``TestDynamicSource`` a (5,) blob holding 3 rows (0, 1, 2), ``TestMultiOutputOrder`` a copy and zeros twice as
wide, ``TestMultiInput`` a copy of ``x1`` whose gradient rule emits ``TestMultiInputGrad`` (ones for ``x1``,
twos for ``x2``, whatever the output gradient), ``ccrelu`` a relu with its own gradient op. Three of legacy's
kernels only checked attributes and wrote nothing, leaving their outputs as the memory held them; here their
values are defined: ``TestDataTypeAttr`` gives the input converted to ``output_type``,
``test_user_op_attr_auto_type`` the input itself, ``TestListDataTypeAndListShapeAndListStringAttr`` zeros.
"""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from flowjob_core import (
    BlobSpec, Compute, Effects, Elementwise, GradContext, KernelContext, LegacyFace, OpDef, ShapeError, ShapeTraits)
from flowjob_core.ir import dtypes

from flowjob_ops.kernels.mt19937_uniform import canonical_source
from flowjob_ops.records.activations import RELU_GRAD
from flowjob_ops.records.common import dtype_attr, is_int, shape_attr, unary_float
from flowjob_ops.records.shape import CAST

SOURCE_ROWS = 5  # TestSource, TestRandomSource and TestDynamicSource make a (5,) float blob
DYNAMIC_ROWS = 3  # of which TestDynamicSource's kernel fills the first three
INT32 = np.iinfo(np.int32)
UNIFORM_SCALE = np.nextafter(np.float32(1.0), np.float32(2.0))  # legacy drew uniform(0, nextafter(1))


def _no_inputs(inputs: Sequence[BlobSpec], op: str) -> None:
    if inputs:
        raise ShapeError(f"{op} is a source op and takes no inputs, got {len(inputs)}")


def _copy_of_first(ctx: KernelContext) -> Any:
    xp, out = ctx.xp, ctx.out(0)

    def run(x: Any, *rest: Any) -> Any:
        xp.copyto(out, x.reshape(out.shape))
        return out

    return run


# TestSource, TestDynamicSource: 0, 1, 2, ... -----------------------------------------------------------
def _source_infer(inputs: Sequence[BlobSpec], attrs: dict) -> list[BlobSpec]:
    _no_inputs(inputs, "TestSource")
    return [BlobSpec((SOURCE_ROWS,), dtypes.float32)]


def _arange_kernel(rows: int) -> Any:
    def build(ctx: KernelContext) -> Any:
        xp, out = ctx.xp, ctx.out(0)
        values = xp.arange(rows, dtype=out.dtype)  # kept: the planned buffer is shared with other values

        def run() -> Any:
            filled = out[:rows]
            xp.copyto(filled, values)
            return filled

        return run

    return build


TEST_SOURCE = OpDef("test_source", _source_infer, kernel=_arange_kernel(SOURCE_ROWS), not_differentiable=True,
                    doc="the float32 values 0, 1, 2, 3, 4", legacy=LegacyFace(legacy_names=("TestSource",)))
TEST_DYNAMIC_SOURCE = OpDef(
    "test_dynamic_source", _source_infer, kernel=_arange_kernel(DYNAMIC_ROWS), not_differentiable=True,
    doc="a dynamic float32 blob of at most 5 rows holding 3: 0, 1, 2", shape=ShapeTraits(dynamic_extent=True),
    legacy=LegacyFace(legacy_names=("TestDynamicSource",)))


# TestSourceMultiGpuFixedOutNum: 0, 1, 2, ... on each device of the placement ---------------------------
def _fixed_out_num_infer(inputs: Sequence[BlobSpec], attrs: dict) -> list[BlobSpec]:
    _no_inputs(inputs, "TestSourceMultiGpuFixedOutNum")
    out_num = attrs.get("out_num")
    if not is_int(out_num) or out_num < 0:
        raise ShapeError(f"TestSourceMultiGpuFixedOutNum needs out_num, an int >= 0, got {out_num!r}")
    return [BlobSpec((out_num,), dtypes.float32)]


def balanced_shares(total: int, parts: int) -> list[int]:
    """Legacy's ``BalancedSplitter``: ``total`` in ``parts`` pieces, the first ``total % parts`` one longer."""
    base, longer = divmod(total, parts)
    return [base + (1 if i < longer else 0) for i in range(parts)]


def _fixed_out_num_kernel(ctx: KernelContext) -> Any:
    xp, out = ctx.xp, ctx.out(0)
    # each device filled its own share 0, 1, 2, ...; the logical blob is the shares one after another
    shares = balanced_shares(ctx.outputs[0].shape[0], int(ctx.attrs["parallel_num"]))
    values = xp.concatenate([xp.arange(n, dtype=out.dtype) for n in shares])

    def run() -> Any:
        xp.copyto(out, values)
        return out

    return run


TEST_SOURCE_MULTI_GPU_FIXED_OUT_NUM = OpDef(
    "test_source_multi_gpu_fixed_out_num", _fixed_out_num_infer, kernel=_fixed_out_num_kernel, not_differentiable=True,
    doc="out_num float32 values split over the placement's devices as legacy balanced them, each device's "
        "share counting 0, 1, 2, ...", shape=ShapeTraits(parallel_num_attr="parallel_num"),
    legacy=LegacyFace(attr_names=("out_num",), legacy_names=("TestSourceMultiGpuFixedOutNum",)))


# TestRandomSource ------------------------------------------------------------------------------------
def _random_source_infer(inputs: Sequence[BlobSpec], attrs: dict) -> list[BlobSpec]:
    _no_inputs(inputs, "TestRandomSource")
    seed = attrs.get("seed")
    if seed is not None and not is_int(seed):
        raise ShapeError(f"TestRandomSource seed must be an int, got {seed!r}")
    return [BlobSpec((SOURCE_ROWS,), dtypes.float32)]


def _random_source_kernel(ctx: KernelContext) -> Any:
    xp, out = ctx.xp, ctx.out(0)
    draw = canonical_source(ctx.attrs.get("seed"), SOURCE_ROWS)

    def run() -> Any:
        xp.copyto(out, xp.asarray(draw() * UNIFORM_SCALE))
        return out

    return run


TEST_RANDOM_SOURCE = OpDef(
    "test_random_source", _random_source_infer, kernel=_random_source_kernel, not_differentiable=True,
    doc="five uniform float32 draws in [0, 1) per step from legacy's CPU stream of std::mt19937(seed)",
    effects=Effects(host_state=True), legacy=LegacyFace(legacy_names=("TestRandomSource",)))


# TestReshape ---------------------------------------------------------------------------------------
def _reshape_infer(inputs: Sequence[BlobSpec], attrs: dict) -> list[BlobSpec]:
    (x,) = inputs
    shape = shape_attr(attrs.get("shape", ()))
    if len(shape) != len(x.shape):
        raise ShapeError(f"TestReshape keeps the rank: shape {shape} has {len(shape)} axes, the input "
                         f"{x.shape} has {len(x.shape)}")
    if int(np.prod(shape, dtype=np.int64)) != x.size:
        raise ShapeError(f"TestReshape cannot make {x.size} elements of shape {x.shape} into shape {shape}")
    return [BlobSpec(shape, x.dtype)]


TEST_RESHAPE = OpDef("test_reshape", _reshape_infer, kernel=_copy_of_first, not_differentiable=True,
                     doc="a copy of the input in the attribute's shape (of the same rank)",
                     compute=Compute(amp="clear"), shape=ShapeTraits(fixed_shape=True),
                     legacy=LegacyFace(input_names=("in",), attr_names=("shape",), legacy_names=("TestReshape",)))


# TestMultiOutputOrder ------------------------------------------------------------------------------
def _multi_output_infer(inputs: Sequence[BlobSpec], attrs: dict) -> list[BlobSpec]:
    (x,) = inputs
    if not x.shape:
        raise ShapeError("TestMultiOutputOrder needs an input of rank >= 1 (out2 doubles the last axis)")
    return [x, BlobSpec(x.shape[:-1] + (2 * x.shape[-1],), x.dtype)]


def _multi_output_kernel(ctx: KernelContext) -> Any:
    xp, first, second = ctx.xp, ctx.out(0), ctx.out(1)

    def run(x: Any) -> tuple[Any, Any]:
        xp.copyto(first, x)
        second.fill(0)
        return first, second

    return run


TEST_MULTI_OUTPUT_ORDER = OpDef(
    "test_multi_output_order", _multi_output_infer, kernel=_multi_output_kernel, not_differentiable=True,
    doc="out1: a copy of the input; out2: zeros with the last axis twice as long", compute=Compute(amp="clear"),
    legacy=LegacyFace(output_names=("out1_0", "out2_0"), input_names=("in",), attr_names=(),
                      legacy_names=("TestMultiOutputOrder",)))


# TestMultiInput and its gradient ------------------------------------------------------------------------
def _multi_input_infer(inputs: Sequence[BlobSpec], attrs: dict) -> list[BlobSpec]:
    x1, x2 = inputs
    if x1.shape != x2.shape:
        raise ShapeError(f"TestMultiInput needs x1 and x2 of one shape, got {x1.shape} and {x2.shape}")
    return [x1]


def _multi_input_grad(ctx: GradContext) -> list[Any]:
    x1, x2 = ctx.inputs
    dx1, dx2 = ctx.apply("test_multi_input_grad", [x1, x2, ctx.dy])
    return [dx1 if ctx.needs[0] else None, dx2 if ctx.needs[1] else None]


def _multi_input_grad_infer(inputs: Sequence[BlobSpec], attrs: dict) -> list[BlobSpec]:
    x1, x2, _dy = inputs
    return [x1, x2]


def _multi_input_grad_kernel(ctx: KernelContext) -> Any:
    first, second = ctx.out(0), ctx.out(1)

    def run(x1: Any, x2: Any, dy: Any) -> tuple[Any, Any]:
        first.fill(1)
        second.fill(2)
        return first, second

    return run


TEST_MULTI_INPUT = OpDef(
    "test_multi_input", _multi_input_infer, kernel=_copy_of_first, grad=_multi_input_grad,
    doc="y: a copy of x1 (x2 of the same shape); its gradient op gives 1 for x1 and 2 for x2",
    compute=Compute(amp="clear"),
    legacy=LegacyFace(output_names=("y_0",), input_names=("x1", "x2"), attr_names=(), legacy_names=("TestMultiInput",)))
TEST_MULTI_INPUT_GRAD = OpDef(
    "test_multi_input_grad", _multi_input_grad_infer, kernel=_multi_input_grad_kernel, not_differentiable=True,
    doc="ones shaped like x1 and twos shaped like x2",
    legacy=LegacyFace(output_names=("x1_diff_0", "x2_diff_0"), input_names=("x1", "x2", "y_diff"), attr_names=(),
                      legacy_names=("TestMultiInputGrad",)))


# TestDataTypeAttr ------------------------------------------------------------------------------------
def _data_type_infer(inputs: Sequence[BlobSpec], attrs: dict) -> list[BlobSpec]:
    (x,) = inputs
    if attrs.get("output_type") is None:
        raise ShapeError("TestDataTypeAttr needs the attribute output_type (a flow dtype)")
    return [BlobSpec(x.shape, dtype_attr(attrs["output_type"]))]


TEST_DATA_TYPE_ATTR = OpDef(
    "test_data_type_attr", _data_type_infer, kernel=CAST.kernel, not_differentiable=True,
    doc="the input converted to the dtype of the attribute output_type", compute=Compute(amp="black"),
    legacy=LegacyFace(input_names=("in",), attr_names=("output_type",), legacy_names=("TestDataTypeAttr",)))


# TestListDataTypeAndListShapeAndListStringAttr ---------------------------------------------------------
LIST_ATTR_OP = "TestListDataTypeAndListShapeAndListStringAttr"


def _list_attr_infer(inputs: Sequence[BlobSpec], attrs: dict) -> list[BlobSpec]:
    shapes, types, strings = (attrs.get(name) for name in ("out_shapes", "out_types", "string_list"))
    if not isinstance(shapes, (tuple, list)) or not shapes:
        raise ShapeError(f"{LIST_ATTR_OP} needs out_shapes, a non-empty list of shapes, got {shapes!r}")
    if not isinstance(types, (tuple, list)) or len(types) != len(shapes):
        raise ShapeError(f"{LIST_ATTR_OP} needs out_types, one flow dtype per shape of out_shapes "
                         f"({len(shapes)}), got {types!r}")
    if (not isinstance(strings, (tuple, list)) or not strings
            or not all(isinstance(s, str) for s in strings)):
        raise ShapeError(f"{LIST_ATTR_OP} needs string_list, a non-empty list of str, got {strings!r}")
    return [BlobSpec(shape_attr(shape), dtype_attr(dtype)) for shape, dtype in zip(shapes, types)]


def _zeros_kernel(ctx: KernelContext) -> Any:
    outs = tuple(ctx.out(i) for i in range(len(ctx.outputs)))

    def run(x: Any) -> Any:
        for out in outs:
            out.fill(0)
        return outs if len(outs) > 1 else outs[0]  # one output is returned as the array itself

    return run


TEST_LIST_DATA_TYPE_AND_LIST_SHAPE_AND_LIST_STRING_ATTR = OpDef(
    "test_list_data_type_and_list_shape_and_list_string_attr", _list_attr_infer, kernel=_zeros_kernel,
    not_differentiable=True,
    doc="zeros, one output per shape of out_shapes with the dtype of out_types at its position (string_list: "
        "a non-empty list of str, only checked)", compute=Compute(amp="black"),
    legacy=LegacyFace(input_names=("in",), attr_names=("out_shapes", "out_types", "string_list"),
                      legacy_names=(LIST_ATTR_OP,)))


# test_user_op_attr_auto_type --------------------------------------------------------------------------
def _auto_type_infer(inputs: Sequence[BlobSpec], attrs: dict) -> list[BlobSpec]:
    for name in ("int1", "int2"):
        value = attrs.get(name)
        if not is_int(value) or not INT32.min <= value <= INT32.max:
            raise ShapeError(f"test_user_op_attr_auto_type needs {name}, an int32 attribute, got {value!r}")
    return [inputs[0]]


TEST_USER_OP_ATTR_AUTO_TYPE = OpDef(
    "test_user_op_attr_auto_type", _auto_type_infer, kernel=_copy_of_first, not_differentiable=True,
    doc="a copy of the input (int1 and int2: int32 attributes, only checked)", compute=Compute(amp="clear"),
    legacy=LegacyFace(input_names=("in",), attr_names=("int1", "int2")))


# ccrelu and its gradient ------------------------------------------------------------------------------
def _ccrelu_grad(ctx: GradContext) -> list[Any]:
    return [ctx.apply("ccrelu_grad", [ctx.outputs[0], ctx.dy])]


def _ccrelu_grad_infer(inputs: Sequence[BlobSpec], attrs: dict) -> list[BlobSpec]:
    y, dy = inputs
    if y.shape != dy.shape:
        raise ShapeError(f"ccrelu_grad needs y and dy of one shape, got {y.shape} and {dy.shape}")
    return [y]


CCRELU = OpDef("ccrelu", unary_float, grad=_ccrelu_grad, elementwise=Elementwise("maximum", fixed=0),
               doc="max(x, 0), with its own gradient op", compute=Compute(amp="clear"),
               legacy=LegacyFace(input_names=("in",), attr_names=()))
CCRELU_GRAD = OpDef("ccrelu_grad", _ccrelu_grad_infer, kernel=RELU_GRAD.kernel, not_differentiable=True,
                    doc="dy where y > 0, else 0", legacy=LegacyFace(input_names=("y", "dy"), attr_names=()))


# cpu_only_relu_test --------------------------------------------------------------------------------------
CPU_ONLY_RELU_TEST = OpDef(
    "cpu_only_relu_test", unary_float, elementwise=Elementwise("maximum", fixed=0), not_differentiable=True,
    doc="max(x, 0), an op legacy placed on the cpu whatever the placement scope said", compute=Compute(amp="black"),
    effects=Effects(cpu_only=True), legacy=LegacyFace(input_names=("in",), attr_names=()))


OPS = (TEST_SOURCE, TEST_DYNAMIC_SOURCE, TEST_SOURCE_MULTI_GPU_FIXED_OUT_NUM, TEST_RANDOM_SOURCE, TEST_RESHAPE,
       TEST_MULTI_OUTPUT_ORDER, TEST_MULTI_INPUT, TEST_MULTI_INPUT_GRAD, TEST_DATA_TYPE_ATTR,
       TEST_LIST_DATA_TYPE_AND_LIST_SHAPE_AND_LIST_STRING_ATTR, TEST_USER_OP_ATTR_AUTO_TYPE, CCRELU, CCRELU_GRAD,
       CPU_ONLY_RELU_TEST)
