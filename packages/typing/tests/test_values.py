"""Local blobs and futures, on one device and on several."""
import numpy as np
import pytest

from flowjob_core.plan.mirrored import PerDevice
from flowjob_typing import FutureResult, LocalBlob
from flowjob_typing.values import logical, per_device


class FakeBlob:
    lbn = "x/out"
    batch_axis = 0


def test_local_blob_forwards_to_the_array():
    blob = LocalBlob(np.array([1.0, -2.0, 3.0], np.float32))
    assert blob.mean() == pytest.approx(2 / 3)
    assert blob.shape == (3,) and len(blob) == 3 and list(blob) == [1, -2, 3]
    assert (-blob).tolist() == [-1, 2, -3] and (blob * 2)[2] == 6 and (1 - blob)[0] == 0
    assert float(LocalBlob(np.float32(1.5))) == 1.5
    np.testing.assert_array_equal(np.add(blob, 1), [2, -1, 4])
    assert f"{LocalBlob(np.float32(0.25)):.2f}" == "0.25"


def test_local_blob_over_devices():
    pieces = PerDevice([np.ones((1, 2)), np.zeros((2, 2))])
    blob = LocalBlob(pieces, FakeBlob())
    assert blob.parallel_num() == 2 and blob.numpy().shape == (3, 2)
    assert blob.numpy(1).shape == (2, 2) and len(blob.numpy_list()) == 2
    assert [len(d) for d in blob.numpy_lists()] == [1, 1]
    assert logical(pieces, FakeBlob()).shape == (3, 2) and len(per_device(pieces)) == 2
    assert per_device(np.ones(2))[0].shape == (2,)


class FakePending:
    def __init__(self, values):
        self.values = values
        self.callbacks = []

    def wait(self):
        return self.values

    def add_done_callback(self, fn):
        fn(self.values)


def test_future_result_is_used_once():
    future = FutureResult(FakePending([1]), lambda values: values[0], "global function 'f'")
    assert future.get() == 1
    with pytest.raises(RuntimeError, match=r"global function 'f': this result was already delivered"):
        future.async_get(print)
    got = []
    other = FutureResult(FakePending([2]), lambda values: values[0], "f")
    with pytest.raises(TypeError, match="needs a callable"):
        other.async_get(3)
    other.async_get(got.append)
    assert got == [2]
