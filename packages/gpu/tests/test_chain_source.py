"""The CUDA source generated for an elementwise chain, on any machine: one C assignment a step from the
ufunc templates, float16 computed in float and rounded each step, number operands as parameters of
the blob's dtype in their position, and a reason instead of a source where the templates stop."""
from __future__ import annotations

import re

import numpy as np
import pytest

from flowjob_core import BlobSpec, Elementwise, OpDef
from flowjob_core.ir.job import Job, Node
from flowjob_core.testing.modules import sibling
from flowjob_gpu.c_expressions import C_TYPES, TEMPLATES
from flowjob_gpu.chain_source import chain_kernel, job_chain_kernels

cases = sibling(__file__, "chain_cases")
RECORDS = cases.RECORDS
DENSE_TAIL = (("scalar_mul", {"scalar": 2.0}, (0,)), ("add", {}, (-1, 1)), ("relu", {}, (-1,)),
              ("scalar_rsub", {"scalar": 1.0}, (-1,)), ("divide", {}, (1, -1)))


def test_a_float32_chain_is_one_assignment_a_step_with_its_numbers_as_parameters():
    kernel = chain_kernel(DENSE_TAIL, ["float32", "float32"], "float32", RECORDS)
    source = kernel.source
    assert source is not None and not kernel.reason
    assert source.in_params == "float32 x0, float32 x1, float32 c0, float32 c2, float32 c3"
    assert source.out_params == "float32 out"
    assert source.operation.splitlines() == [
        "// multiply(x0, c0) -> add(v, x1) -> maximum(v, c2) -> subtract(c3, v) -> divide(x1, v)",
        "float v = __fmul_rn(x0, c0);",
        "v = __fadd_rn(v, x1);",
        "v = (isnan(v) || v > c2) ? v : c2;",  # relu: maximum with its fixed 0, NaN kept
        "v = __fsub_rn(c3, v);",  # scalar_rsub: the number first
        "v = __fdiv_rn(x1, v);",  # the running value second
        "out = v;",
    ]
    assert kernel.constants == (np.float32(2.0), np.float32(0.0), np.float32(1.0))
    assert all(type(c) is np.float32 for c in kernel.constants)  # the blob operand's dtype, as numpy's kernel
    assert re.fullmatch(r"flowjob_chain_[0-9a-f]{16}", source.name)
    assert source.text().splitlines()[:3] == [f"// cupy.ElementwiseKernel {source.name}",
                                              "// in:  float32 x0, float32 x1, float32 c0, float32 c2, float32 c3",
                                              "// out: float32 out"]


def test_float16_steps_compute_in_float_and_round_to_half_after_each():
    kernel = chain_kernel(DENSE_TAIL, ["float16", "float16"], "float16", RECORDS)
    lines = kernel.source.operation.splitlines()[1:-1]
    assert lines[0] == "float16 v = float16(__fmul_rn(float(x0), float(c0)));"
    assert lines[2] == "v = float16((float(v) >= float(c2) || isnan(float(v))) ? float(v) : float(c2));"  # half's max
    assert all(line.split(" = ", 1)[1].startswith("float16(") for line in lines)
    assert kernel.source.in_params.split(", ")[2:] == ["float16 c0", "float16 c2", "float16 c3"]
    assert all(type(c) is np.float16 for c in kernel.constants)


def test_float64_uses_the_double_intrinsics_and_math_functions():
    steps = (("exp", {}, (0,)), ("scalar_pow", {"scalar": 1.5}, (-1,)), ("tanh", {}, (-1,)), ("sqrt", {}, (-1,)),
             ("reciprocal", {}, (-1,)), ("log", {}, (-1,)), ("square", {}, (-1,)))
    lines = chain_kernel(steps, ["float64"], "float64", RECORDS).source.operation.splitlines()[1:-1]
    assert lines == ["double v = exp(x0);", "v = pow(v, c1);", "v = tanh(v);", "v = __dsqrt_rn(v);",
                     "v = __drcp_rn(v);", "v = log(v);", "v = __dmul_rn(v, v);"]


def test_a_comparison_makes_a_bool_chain_and_bools_compare():
    steps = (("greater", {}, (0, 1)), ("equal", {}, (-1, 2)), ("not_equal", {}, (2, -1)))
    source = chain_kernel(steps, ["float32", "float32", "bool"], "bool", RECORDS).source
    assert source.in_params == "float32 x0, float32 x1, bool x2" and source.out_params == "bool out"
    assert source.operation.splitlines()[1:] == ["bool v = x0 > x1;", "v = v == x2;", "v = x2 != v;", "out = v;"]


def test_a_broadcast_operand_is_an_ordinary_input():
    """CuPy's ElementwiseKernel broadcasts its array arguments against the output: the source is the same."""
    steps = (("subtract", {}, (0, 1)), ("multiply", {}, (-1, 2)))
    flat = chain_kernel(steps, ["float32"] * 3, "float32", RECORDS).source
    assert flat.in_params == "float32 x0, float32 x1, float32 x2"
    assert flat.operation.splitlines()[1:] == ["float v = __fsub_rn(x0, x1);", "v = __fmul_rn(v, x2);", "out = v;"]


def test_the_numbers_are_arguments_not_part_of_the_signature():
    steps = lambda s: (("scalar_mul", {"scalar": s}, (0,)), ("scalar_add", {"scalar": -s}, (-1,)))  # noqa: E731
    one, other = (chain_kernel(steps(s), ["float32"], "float32", RECORDS) for s in (0.5, 3.0))
    assert one.source == other.source  # one compiled kernel for both
    assert one.constants == (0.5, -0.5) and other.constants == (3.0, -3.0)
    names = {chain_kernel(steps(0.5), [d], d, RECORDS).source.name for d in cases.FLOATS}
    names.add(chain_kernel((("scalar_add", {"scalar": 1}, (0,)), ("scalar_mul", {"scalar": 1}, (-1,))),
                           ["float32"], "float32", RECORDS).source.name)
    assert len(names) == 4  # dtypes and step order are the signature


def test_every_builtin_ufunc_has_a_template_and_the_cases_cover_each_per_dtype():
    builtin = {step.record.elementwise.ufunc for step in cases.STEPS.values()}
    assert builtin == set(TEMPLATES)
    for dtype in cases.FLOATS:
        covered = set().union(*(c.ufuncs for c in cases.CASES if dtype in c.dtypes))
        assert covered == set(TEMPLATES), dtype
    assert all(c.kernel().source is not None for c in cases.CASES), [c.kernel().reason for c in cases.CASES]
    assert set(C_TYPES) == {*cases.FLOATS, "bool"}


def _arctan() -> OpDef:
    def infer(inputs, attrs):
        return [inputs[0]]
    return OpDef("plugin_arctan", infer, elementwise=Elementwise("arctan"), not_differentiable=True)


@pytest.mark.parametrize("steps, dtypes, out, reason", [
    ((("plugin_arctan", {}, (0,)),), ["float32"], "float32", r"step 0 \(plugin_arctan, ufunc arctan\): no C template"),
    ((("relu", {}, (0,)), ("plugin_arctan", {}, (-1,))), ["float32"], "float32", r"step 1 .*'arctan'"),
    ((("add", {}, (0, 1)),), ["int32", "int32"], "int32", r"step 0 \(add, ufunc add\): int32 operands"),
    ((("negative", {}, (0,)),), ["complex64"], "complex64", r"complex64 operands"),
    ((("add", {}, (0, 1)),), ["float32", "float64"], "float64", r"operands of dtypes \['float32', 'float64'\]"),
    ((("greater", {}, (0, 1)),), ["float32", "float32"], "float32", r"a bool result in a float32 chain"),
    ((("greater", {}, (0, 1)), ("add", {}, (-1, 2))), ["float32", "float32", "bool"], "bool", r"step 1.*bool operands"),
])
def test_what_the_templates_do_not_cover_keeps_the_xp_kernel_with_a_reason(steps, dtypes, out, reason):
    kernel = chain_kernel(steps, dtypes, out, RECORDS | {"plugin_arctan": _arctan()})
    assert kernel.source is None and kernel.constants == ()
    assert re.search(reason, kernel.reason), kernel.reason


def test_a_plugin_op_with_a_templated_ufunc_is_generated_like_a_builtin():
    def infer(inputs, attrs):
        return [inputs[0]]
    halve = OpDef("plugin_halve", infer, elementwise=Elementwise("multiply", fixed=0.5), not_differentiable=True)
    kernel = chain_kernel((("plugin_halve", {}, (0,)), ("exp", {}, (-1,))), ["float32"], "float32",
                          RECORDS | {"plugin_halve": halve})
    assert kernel.source.operation.splitlines()[1:3] == ["float v = __fmul_rn(x0, c0);", "v = expf(v);"]
    assert kernel.constants == (np.float32(0.5),)


def test_job_chain_kernels_lists_each_chain_node_in_job_order():
    job = Job("j")
    job.specs.update({"x/out": BlobSpec((3,), np.float32), "i/out": BlobSpec((3,), np.int32),
                      "a/out_0": BlobSpec((3,), np.float32), "b/out_0": BlobSpec((3,), np.int32),
                      "c/out_0": BlobSpec((3,), np.float32)})
    job.nodes = [Node("input", "x", (), ("x/out",)), Node("input", "i", (), ("i/out",)),
                 Node("elementwise_chain", "a", ("x/out",), ("a/out_0",), {"steps": (("exp", {}, (0,)),)}),
                 Node("elementwise_chain", "b", ("i/out",), ("b/out_0",), {"steps": (("negative", {}, (0,)),)}),
                 Node("exp", "c", ("a/out_0",), ("c/out_0",))]
    found = job_chain_kernels(job, RECORDS)
    assert [name for name, _ in found] == ["a", "b"]
    assert found[0][1].source.operation.splitlines()[1] == "float v = expf(x0);"
    assert found[1][1].source is None and "int32" in found[1][1].reason
