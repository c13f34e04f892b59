"""Every op case of the op table (op_cases.py) whose op exports to ONNX, as a one-op model run by onnxruntime
at the oldest opsets (10, 11, 12: the forms legacy's exporter wrote), at 13 (the default) and at the newest
opset onnxruntime runs, against flowjob's own kernel on the same inputs. Where the opset has no form of the
op, the refusal must name the op and the opset, and a newer opset must export it."""
from __future__ import annotations

import re
from typing import Any, Iterator

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from flowjob_core import BlobSpec, Session
from flowjob_core.testing.modules import sibling
from flowjob_core.testing.single_op import add_returns, run_op, trace_op
from flowjob_ops.export.onnx_emitter import OnnxExportError
from flowjob_ops.export.onnx_export import build_model
from flowjob_ops.export.onnx_nodes import CONVERTERS

CASES = [case for case in sibling(__file__, "op_cases").CASES if case.op in CONVERTERS]


def _newest_runnable_opset() -> int:
    """The newest opset onnxruntime runs (it may lag the onnx package): probed with the quantization pair,
    the operators revised last."""
    scale = onnx.numpy_helper.from_array(np.array(0.5, np.float32), "scale")
    point = onnx.numpy_helper.from_array(np.array(0, np.int8), "point")
    for opset in range(onnx.defs.onnx_opset_version(), 12, -1):
        x = onnx.helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [1])
        y = onnx.helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [1])
        nodes = [onnx.helper.make_node("QuantizeLinear", ["x", "scale", "point"], ["q"]),
                 onnx.helper.make_node("DequantizeLinear", ["q", "scale", "point"], ["y"])]
        graph = onnx.helper.make_graph(nodes, "probe", [x], [y], [scale, point])
        opsets = [onnx.helper.make_opsetid("", opset)]
        model = onnx.helper.make_model(graph, opset_imports=opsets,
                                       ir_version=onnx.helper.find_min_ir_version_for(opsets))
        try:
            ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
        except Exception:  # noqa: BLE001 - onnxruntime's own error types: not this opset
            continue
        return opset
    return 13


OPSETS = sorted({10, 11, 12, 13, _newest_runnable_opset()})


@pytest.fixture(scope="module")
def session() -> Iterator[Session]:
    made = Session()
    yield made
    made.close()


def _float32(x: Any) -> np.ndarray:
    array = np.asarray(x)
    return array.astype(np.float32) if array.dtype == np.float64 else array


def test_the_table_covers_the_issues_ops() -> None:
    covered = {case.op for case in CASES}
    wanted = {"acos", "asin", "atan", "acosh", "asinh", "atanh", "tan", "sinh", "cosh", "round", "less", "greater",
              "less_equal", "greater_equal", "equal", "not_equal", "gather_nd", "fake_quantization",
              "min_max_observer", "moving_average_min_max_observer"}
    assert wanted <= covered, sorted(wanted - covered)


def _exports_at_the_opset_named(job: Any, refusal: Exception, opset: int) -> None:
    """A refusal names a newer opset (``export with opset >= N``) where the op exports (a later operator
    or attribute may name a newer one still)."""
    while True:
        newer = re.search(r"export with opset >= (\d+)", str(refusal))
        assert newer is not None and int(newer.group(1)) > opset, str(refusal)
        opset = int(newer.group(1))
        try:
            build_model(onnx, job, {}, opset, {})
            return
        except OnnxExportError as again:
            refusal = again


@pytest.mark.parametrize("opset", OPSETS)
@pytest.mark.parametrize("case", CASES, ids=[case.id for case in CASES])
@settings(max_examples=3, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture],
          report_multiple_bugs=False)
@given(data=st.data())
def test_op_case_through_onnxruntime(case: Any, opset: int, session: Session, data: Any) -> None:
    inputs, attrs = data.draw(case.strategy(), label=f"{case.id}: inputs, attrs")
    inputs = [_float32(x) for x in inputs]
    traced = trace_op(session, case.op, [BlobSpec(x.shape, x.dtype) for x in inputs], attrs, job_type="predict",
                      job_name=f"onnx_{case.op}")
    add_returns(traced, traced.outputs, "onnx_return")
    try:
        model = build_model(onnx, traced.job, {}, opset, {})
    except OnnxExportError as exc:
        assert f"({case.op})" in str(exc), str(exc)
        if case.op == "moving_average_min_max_observer" and attrs.get("training"):
            assert "training=True updates the moving range" in str(exc)  # a train step's update: no ONNX form
            return
        assert f"ONNX opset {opset} has no" in str(exc), str(exc)
        _exports_at_the_opset_named(traced.job, exc, opset)
        return
    onnx.checker.check_model(model, full_check=True)
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    got = sess.run(None, {f"inputs[{i}]": x for i, x in enumerate(inputs)})
    want = run_op(case.op, inputs, attrs, session=session)
    assert len(got) == len(want)
    for k, (g, w) in enumerate(zip(got, want)):
        where = f"op {case.op!r} at opset {opset}, output {k}, attrs {attrs!r}, inputs {inputs!r}"
        assert g.shape == w.shape and g.dtype == w.dtype, f"{where}: {g.shape}:{g.dtype} against {w.shape}:{w.dtype}"
        if w.dtype.kind == "f":
            np.testing.assert_allclose(g, w, rtol=max(1e-4, case.rtol or 0.0), atol=max(1e-5, case.atol or 0.0),
                                       err_msg=where)
        else:
            np.testing.assert_array_equal(g, w, err_msg=where)
