"""Bad calls and bad definitions: each is one exact error type whose message names the job, argument,
parameter or op at fault, and the session stays usable (the same job answers correctly right after)."""
import numpy as np
import pytest

import oneflow as flow
import oneflow.typing as tp
from flowjob_core import JobArgumentError, JobDefinitionError, JobReturnError, OpBuildError


@pytest.fixture(autouse=True)
def fresh_session():
    flow.clear_default_session()
    yield
    flow.clear_default_session()


@pytest.fixture
def job():
    @flow.global_function()
    def add(x: tp.Numpy.Placeholder((2, 3)), y: tp.Numpy.Placeholder((2,), dtype=flow.int32)) -> tp.Numpy:
        return flow.math.reduce_sum(x, axis=1) + flow.cast(y, flow.float)

    return add


X = np.ones((2, 3), np.float32)
Y = np.arange(2, dtype=np.int32)


@pytest.mark.parametrize("args, match", [
    ((np.ones((2, 4), np.float32), Y), r"global function 'add', argument 'x': expected shape \(2, 3\), found \(2, 4\)"),
    ((X.astype(np.float64), Y), r"argument 'x': expected dtype float32, found float64"),
    ((X, Y.astype(np.float32)), r"argument 'y': expected dtype int32, found float32"),
    ((X,), r"global function 'add' takes 2 argument\(s\) \(x, y\), got 1"),
    ((X, Y, Y), r"global function 'add' takes 2 argument\(s\) \(x, y\), got 3"),
    (([[1.0, 2.0, 3.0]], Y), r"argument 'x': expected a numpy.ndarray of shape \(2, 3\) and dtype float32, found list"),
    (("abc", Y), r"argument 'x': expected a numpy.ndarray .* found str"),
    ((None, Y), r"argument 'x': expected a numpy.ndarray .* found NoneType"),
])
def test_a_bad_argument_names_it_and_the_job_still_runs(job, args, match):
    with pytest.raises(JobArgumentError, match=match):
        job(*args)
    np.testing.assert_array_equal(job(X, Y), [3.0, 4.0])


def test_keyword_arguments_are_refused_by_name(job):
    with pytest.raises(JobArgumentError, match=r"'add' takes positional arguments only, got keyword arguments \['y'\]"):
        job(X, y=Y)
    np.testing.assert_array_equal(job(X, Y), [3.0, 4.0])


def _define(annotation_src: str):
    namespace = {"flow": flow, "tp": tp}
    exec(annotation_src, namespace)  # noqa: S102 - each case defines one global function


@pytest.mark.parametrize("source, match", [
    ("@flow.global_function()\ndef bad(x: int) -> tp.Numpy:\n    return x",
     r"global function 'bad', parameter 'x': invalid parameter annotation <class 'int'>"),
    ("@flow.global_function()\ndef bad(x) -> tp.Numpy:\n    return x",
     r"global function 'bad', parameter 'x' has no annotation"),
    ("@flow.global_function()\ndef bad(x: tp.Numpy.Placeholder((2,))) -> int:\n    return x",
     r"global function 'bad': invalid return annotation <class 'int'>"),
    ("@flow.global_function()\ndef bad(*xs: tp.Numpy.Placeholder((2,))) -> tp.Numpy:\n    return xs[0]",
     r"global function 'bad', parameter 'xs': \*args, \*\*kwargs and keyword-only parameters are not supported"),
    ("@flow.global_function()\ndef bad(x=(2, 3)) -> tp.Numpy:\n    return x",
     r"global function 'bad', parameter 'x': default \(2, 3\) is not an input definition"),
])
def test_a_bad_definition_names_the_function_and_parameter(source, match):
    with pytest.raises(JobDefinitionError, match=match):
        _define(source)


def test_a_bad_job_type_is_refused():
    with pytest.raises(JobDefinitionError, match=r"type must be 'predict' or 'train', got 'training'"):
        flow.global_function(type="training")


def test_an_op_that_cannot_be_built_names_job_op_and_line_and_others_still_run(job):
    @flow.global_function()
    def broken(x: tp.Numpy.Placeholder((2, 3))) -> tp.Numpy:
        return flow.matmul(x, x, name="square_it")

    with pytest.raises(OpBuildError, match=r"job 'broken', op 'square_it' \(matmul\) at .*test_bad_inputs.py:\d+: "
                                           r"matmul inner dimensions differ"):
        broken(X)
    with pytest.raises(OpBuildError, match="op 'square_it'"):  # the same error again, not a half-built job
        broken(X)
    np.testing.assert_array_equal(job(X, Y), [3.0, 4.0])


def test_a_return_value_unlike_its_annotation_is_refused(job):
    @flow.global_function()
    def pair(x: tp.Numpy.Placeholder((2, 3))) -> tp.Numpy:
        return (x, x)

    with pytest.raises(JobReturnError, match=r"global function 'pair', return value: expected a blob \(tp.Numpy\), "
                                             r"found tuple"):
        pair(X)
    np.testing.assert_array_equal(job(X, Y), [3.0, 4.0])


def test_a_raising_body_leaves_the_session_usable(job):
    @flow.global_function()
    def raising(x: tp.Numpy.Placeholder((2, 3))) -> tp.Numpy:
        raise LookupError("body failed")

    with pytest.raises(LookupError, match="body failed"):
        raising(X)
    np.testing.assert_array_equal(job(X, Y), [3.0, 4.0])


def test_load_variables_refuses_a_value_that_overflows_the_variable_dtype():
    import oneflow as flow
    import oneflow.typing as tp
    from flowjob_core.errors import VariableError

    flow.clear_default_session()

    @flow.global_function()
    def scale(x: tp.Numpy.Placeholder((2,))) -> tp.Numpy:
        w = flow.get_variable("w", shape=(2,), initializer=flow.ones_initializer())
        v = flow.get_variable("v", shape=(2,), dtype=flow.int32, initializer=flow.zeros_initializer())
        return x * w + flow.cast(v, flow.float)

    try:
        with pytest.raises(VariableError, match=r"variable 'w' is float32; the float64 value's value 1e\+40 "
                                                r"\(element 1\) does not fit float32 \(nothing was assigned\)"):
            flow.load_variables({"v": np.array([5, 6], np.int64), "w": np.array([2.0, 1e40])})
        with pytest.raises(VariableError, match=r"variable 'v' is int32; the int64 value's value 1099511627783"):
            flow.load_variables({"v": np.array([1, 2**40 + 7], np.int64)})
        np.testing.assert_array_equal(scale(np.ones(2, np.float32)), [1.0, 1.0])  # nothing changed
        flow.load_variables({"w": np.array([2.0, 3.0]), "v": np.array([1, 2], np.int64)})  # values that fit
        np.testing.assert_array_equal(scale(np.ones(2, np.float32)), [3.0, 5.0])
    finally:
        flow.clear_default_session()
