"""Parameter kinds: placeholders, tuples of them, version-0.1 defaults, and the checks at each stage."""
from typing import Tuple

import numpy as np
import pytest

import oneflow as flow
import oneflow.typing as tp
from flowjob_core import JobArgumentError, JobDefinitionError


@pytest.fixture(autouse=True)
def fresh_session():
    flow.clear_default_session()
    yield
    flow.clear_default_session()


def _data(shape, dtype=np.float32):
    return np.arange(int(np.prod(shape)), dtype=dtype).reshape(shape) - 3


def test_numpy_placeholder_round_trips_and_sees_declared_spec():
    seen = {}

    @flow.global_function()
    def job(x: tp.Numpy.Placeholder((2, 3), dtype=flow.int32, batch_axis=1)) -> tp.Numpy:
        seen.update(shape=x.shape, dtype=x.dtype, batch_axis=x.batch_axis)
        return x

    out = job(_data((2, 3), np.int32))
    np.testing.assert_array_equal(out, _data((2, 3), np.int32))
    assert seen == {"shape": (2, 3), "dtype": np.dtype(np.int32), "batch_axis": 1}


def test_batch_axis_none_and_negative():
    axes = []

    @flow.global_function()
    def job(a: tp.Numpy.Placeholder((2, 3), batch_axis=None), b: tp.Numpy.Placeholder((2, 3), batch_axis=-1)) -> None:
        axes.extend([a.batch_axis, b.batch_axis])

    job(_data((2, 3)), _data((2, 3)))
    assert axes == [None, 1]


def test_inputs_are_copied_so_the_caller_may_reuse_them():
    @flow.global_function()
    def job(x: tp.Numpy.Placeholder((4,))) -> tp.Callback[tp.Numpy]:
        return flow.nn.relu(x)

    got = []
    data = np.ones(4, np.float32)
    job(data)(got.append)
    data[:] = -5  # at once, before the step may have run
    flow.sync_default_session()
    np.testing.assert_array_equal(got[0], np.ones(4))


def test_non_contiguous_input_is_fine():
    @flow.global_function()
    def job(x: tp.Numpy.Placeholder((3,))) -> tp.Numpy:
        return x

    wide = _data((3, 2))
    np.testing.assert_array_equal(job(wide[:, 1]), wide[:, 1])


def test_tuple_parameter():
    @flow.global_function()
    def job(pair: Tuple[tp.Numpy.Placeholder((2,)), tp.Numpy.Placeholder((3,), dtype=flow.int32)]
            ) -> Tuple[tp.Numpy, tp.Numpy]:
        a, b = pair
        return b, a

    b, a = job((np.ones(2, np.float32), np.arange(3, dtype=np.int32)))
    np.testing.assert_array_equal(a, [1, 1])
    np.testing.assert_array_equal(b, [0, 1, 2])
    with pytest.raises(JobArgumentError,
                       match=r"argument 'pair': expected a tuple of 2 inputs, found tuple of length 1"):
        job((np.ones(2, np.float32),))
    with pytest.raises(JobArgumentError, match=r"argument 'pair'\[1\]: expected dtype int32, found float32"):
        job((np.ones(2, np.float32), np.ones(3, np.float32)))


def test_list_numpy_placeholder_on_one_device():
    @flow.global_function()
    def job(x: tp.ListNumpy.Placeholder((2, 2))) -> tp.ListNumpy:
        return flow.nn.relu(x)

    (out,) = job([_data((2, 2))])
    np.testing.assert_array_equal(out, np.maximum(_data((2, 2)), 0))
    with pytest.raises(JobArgumentError, match=r"expected a list with one ndarray per device, found ndarray"):
        job(_data((2, 2)))
    with pytest.raises(JobArgumentError, match=r"expected a list of 1 array\(s\), one per device .*found 2"):
        job([_data((2, 2)), _data((2, 2))])


def test_list_list_numpy_placeholder():
    @flow.global_function()
    def job(x: tp.ListListNumpy.Placeholder((3,))) -> tp.ListListNumpy:
        return x

    assert [[a.tolist() for a in dev] for dev in job([[_data((3,))]])] == [[[-3.0, -2.0, -1.0]]]
    with pytest.raises(JobArgumentError, match=r"\[0\]: expected a list of ndarrays \(a tensor list\)"):
        job([_data((3,))])


def test_version_01_fixed_tensor_def_defaults():
    @flow.global_function()
    def job(x=flow.FixedTensorDef((3,)), y=flow.FixedTensorDef((3,), dtype=flow.int32)):
        return x, y

    x, y = job(_data((3,)), _data((3,), np.int32)).get()
    np.testing.assert_array_equal(x.ndarray(), _data((3,)))
    assert y.ndarray().dtype == np.int32


def test_version_01_mirrored_tensor_def_default():
    @flow.global_function()
    def job(x=flow.MirroredTensorDef((2,))):
        return x

    value = job([_data((2,))]).get()
    assert [a.tolist() for a in value.numpy_list()] == [[-3.0, -2.0]]


def test_fixed_tensor_def_takes_a_name_id_at_definition_like_legacy():
    from flowjob_core.ir import naming
    before = naming.next_id()
    flow.FixedTensorDef((2,))
    assert naming.next_id() == before + 2  # the def took one id; this call the other


@pytest.mark.parametrize("arg, message", [
    (np.ones((3,), np.float64), r"argument 'x': expected dtype float32, found float64 \(convert with .astype"),
    (np.ones((4,), np.float32), r"argument 'x': expected shape \(3,\), found \(4,\)"),
    ([1.0, 2.0, 3.0], r"argument 'x': expected a numpy.ndarray of shape \(3,\) and dtype float32, found list"),
])
def test_call_time_checks_name_function_argument_expected_and_found(arg, message):
    @flow.global_function()
    def job(x: tp.Numpy.Placeholder((3,))) -> tp.Numpy:
        return x

    with pytest.raises(JobArgumentError, match="global function 'job', " + message):
        job(arg)
    np.testing.assert_array_equal(job(np.zeros(3, np.float32)), np.zeros(3))  # still usable


def test_argument_count_and_keywords():
    @flow.global_function()
    def job(x: tp.Numpy.Placeholder((3,))) -> tp.Numpy:
        return x

    with pytest.raises(JobArgumentError, match=r"takes 1 argument\(s\) \(x\), got 2"):
        job(np.zeros(3, np.float32), np.zeros(3, np.float32))
    with pytest.raises(JobArgumentError, match="positional arguments only"):
        job(x=np.zeros(3, np.float32))


def test_placeholder_shape_must_be_a_tuple():
    with pytest.raises(JobDefinitionError, match=r"tp.Numpy.Placeholder: shape should be a tuple .*found list \[3\]"):
        tp.Numpy.Placeholder([3])
    with pytest.raises(JobDefinitionError, match=r"shape must hold positive ints, found \(3, 0\)"):
        tp.Numpy.Placeholder((3, 0))
    with pytest.raises(JobDefinitionError, match=r"batch_axis 2 is not an axis of shape \(3,\)"):
        tp.Numpy.Placeholder((3,), batch_axis=2)
    with pytest.raises(JobDefinitionError, match=r"unknown dtype"):
        tp.Numpy.Placeholder((3,), dtype="bogus")


def test_bad_parameter_annotation_at_decoration():
    with pytest.raises(JobDefinitionError, match=r"global function 'job', parameter 'x': invalid parameter annotation"):
        @flow.global_function()
        def job(x: int) -> tp.Numpy:
            return x


def test_placeholder_written_as_default_gets_a_hint():
    with pytest.raises(JobDefinitionError, match=r"note the colon"):
        @flow.global_function()
        def job(x=tp.Numpy.Placeholder((3,))) -> tp.Numpy:
            return x


def test_unannotated_parameter_is_rejected():
    with pytest.raises(JobDefinitionError, match=r"parameter 'x' has no annotation"):
        @flow.global_function()
        def job(x) -> tp.Numpy:
            return x
