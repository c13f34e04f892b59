"""What un-annotated watch handlers and un-annotated global functions get: legacy's local blob, with
``numpy()``, ``numpy_list()``, ``is_dynamic``, ``shape`` and ``dtype``, that still computes as the array."""
import numpy as np

import oneflow as flow
import oneflow.typing as tp
from flowjob_core.testing.modules import sibling

_helpers = sibling(__file__, "op_surface_helpers")
fresh_session, _mirrored = _helpers.fresh_session, _helpers.mirrored_config  # each test in its own session
RNG = np.random.default_rng(5)
X = RNG.standard_normal((4, 3)).astype(np.float32)


def test_handlers_of_a_mirrored_train_job_get_dynamic_blobs():
    # the shape of legacy's pooling tests: a variable added to a mirrored input, its gradient watched
    got = {}

    @flow.global_function(type="train", function_config=_mirrored())
    def train(x: tp.ListNumpy.Placeholder((4, 3))):
        v = flow.get_variable("v", shape=(4, 3), initializer=flow.constant_initializer(0))
        v = flow.cast_to_current_logical_view(v)
        flow.watch_diff(v, lambda b: got.setdefault("v_diff", b))
        y = x + v
        flow.watch(y, lambda b: got.setdefault("y", b))
        flow.optimizer.SGD(flow.optimizer.PiecewiseConstantScheduler([], [1e-4]), momentum=0).minimize(y)
        return y

    result = train([X]).get()
    y, diff = got["y"], got["v_diff"]
    assert y.is_dynamic and result.is_dynamic  # computed from a mirrored placeholder
    assert not diff.is_dynamic  # the variable's gradient
    for blob in (y, result):
        np.testing.assert_array_equal(blob.numpy_list()[0], X)
        assert blob.shape == (4, 3) and blob.dtype == np.float32  # the array's, as legacy forwarded them
    np.testing.assert_array_equal(diff.numpy(), np.ones((4, 3), np.float32))
    assert diff.numpy_list()[0] is diff.numpy()


def test_the_blob_still_behaves_as_the_array():
    got = []

    @flow.global_function()
    def job(x: tp.Numpy.Placeholder((4, 3))):
        flow.watch(x, got.append)
        return flow.math.reduce_sum(x, axis=1)

    total = job(X).get()
    (blob,) = got
    assert not blob.is_dynamic and blob.parallel_num() == 1
    np.testing.assert_allclose(np.asarray(blob), X)
    np.testing.assert_allclose(blob + 1, X + 1)
    np.testing.assert_allclose(blob.mean(), X.mean(), rtol=1e-6)
    np.testing.assert_allclose(blob[1], X[1])
    np.testing.assert_allclose(total, X.sum(axis=1), rtol=1e-6)
    assert total.ndim == 1 and len(total) == 4 and not total.is_dynamic


def test_annotated_handlers_keep_getting_arrays():
    got = []

    @flow.global_function(function_config=_mirrored())
    def job(x: tp.ListNumpy.Placeholder((4, 3))) -> tp.ListNumpy:
        flow.watch(x, lambda a: got.append(a))  # un-annotated lambda: the blob object
        flow.watch(x, numpy_handler)
        return x

    def numpy_handler(a: tp.Numpy) -> None:
        got.append(a)

    job([X])
    blob, array = got
    assert blob.is_dynamic and type(array) is np.ndarray
    np.testing.assert_array_equal(array, blob.numpy())
