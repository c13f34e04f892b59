"""Legacy's distribute annotations through the face: ``Blob.with_*_distribute``, ``flow.distribute``,
``flow.scope.*_view_enabled``, ``flow.current_scope`` and ``flow.advanced.distribute_*`` (one piece per device of
the placement: identities on one device, balanced pieces over several)."""
import numpy as np
import pytest

import oneflow as flow
import oneflow.python.framework.distribute as legacy_distribute
import oneflow.typing as tp
from flowjob_core import OpBuildError
from flowjob_core.testing.modules import sibling

_helpers = sibling(__file__, "op_surface_helpers")
fresh_session = _helpers.fresh_session  # each test in its own session
RNG = np.random.default_rng(11)
X = RNG.standard_normal((5, 4)).astype(np.float32)


def test_annotated_blobs_compute_as_the_blob_and_train_the_same():
    @flow.global_function(type="train")
    def train(x: tp.Numpy.Placeholder((5, 4))) -> tp.Numpy:
        w = flow.get_variable("w", shape=(4, 3), initializer=flow.constant_initializer(0.5),
                              distribute=flow.distribute.split(1))
        y = flow.matmul(x.with_split_distribute(0), w.with_broadcast_distribute())
        loss = flow.math.reduce_mean(flow.math.square(y.with_distribute(flow.distribute.auto())))
        flow.optimizer.SGD(flow.optimizer.PiecewiseConstantScheduler([], [0.1]), momentum=0).minimize(loss)
        return loss

    first = train(X)
    y = X @ np.full((4, 3), 0.5, np.float32)
    np.testing.assert_allclose(first, np.mean(y * y), rtol=1e-6)
    grad = X.T @ (2 * y / y.size)
    np.testing.assert_allclose(flow.get_all_variables()["w"].numpy(), 0.5 - 0.1 * grad, rtol=1e-5)


def test_the_face_names():
    assert flow.distribute.split(2) == legacy_distribute.split(2)
    flow.distribute.assert_is_valid_distribute(flow.distribute.broadcast())
    with pytest.raises(AssertionError, match="not a valid distribute policy"):
        flow.distribute.assert_is_valid_distribute(0)
    assert flow.distribute.consistent_strategy_enabled() and not flow.distribute.mirrored_strategy_enabled()
    with flow.distribute.mirrored_strategy():
        assert flow.scope.mirrored_view_enabled() and not flow.scope.consistent_view_enabled()
    with pytest.warns(DeprecationWarning, match="use flow.current_scope"):
        assert flow.scope.current_scope() == flow.current_scope()


def test_views_inside_a_mirrored_job():
    seen = []

    @flow.global_function(function_config=_helpers.mirrored_config())
    def job(x: tp.ListNumpy.Placeholder((5, 4))) -> tp.ListNumpy:
        seen.append((flow.scope.mirrored_view_enabled(), flow.current_scope().is_mirrored))
        return flow.cast_to_current_logical_view(x)

    np.testing.assert_array_equal(job([X])[0], X)
    assert seen == [(True, True)]


def test_on_one_device_the_advanced_ops_are_identities():
    @flow.global_function()
    def job(x: tp.Numpy.Placeholder((5, 4))) -> tp.Numpy:
        (piece,) = flow.advanced.distribute_split(x, axis=1)
        (copy,) = flow.advanced.distribute_clone(piece)
        joined = flow.advanced.distribute_concat([copy], axis=1)
        added = flow.advanced.distribute_add([joined])
        return flow.advanced.distribute_map(added, lambda p: p * 2.0)

    np.testing.assert_array_equal(job(X), X * 2)


def test_over_several_devices_blobs_split_into_balanced_pieces():
    seen = {}

    @flow.global_function()
    def job(x: tp.Numpy.Placeholder((5, 4))) -> tp.Numpy:
        with flow.scope.placement("cpu", "0:0-1"):
            assert flow.current_scope().device_parallel_desc_symbol.parallel_num == 2
            pieces = flow.advanced.distribute_split(x, axis=0)
            seen["shapes"] = [p.shape for p in pieces]
            clones = flow.advanced.distribute_clone(x)
            total = flow.advanced.distribute_add(list(clones))
            doubled = flow.advanced.distribute_map([x, total], lambda a, b: (a + b, a * 0.0 + 1.0))
            back = flow.advanced.distribute_concat(list(pieces), axis=0)
        return flow.concat([back, total, doubled[0], doubled[1]], axis=1)

    out = job(X)
    assert seen["shapes"] == [(3, 4), (2, 4)]  # the first 5 % 2 pieces take one row more, as legacy's splitter
    np.testing.assert_array_equal(out[:, :4], X)
    np.testing.assert_array_equal(out[:, 4:8], 2 * X)
    np.testing.assert_allclose(out[:, 8:12], 3 * X, rtol=1e-6)
    np.testing.assert_array_equal(out[:, 12:], np.ones_like(X))


def test_the_advanced_ops_check_the_device_count():
    @flow.global_function()
    def job(x: tp.Numpy.Placeholder((5, 4))) -> tp.Numpy:
        with flow.scope.placement("cpu", "0:0-2"):
            return flow.advanced.distribute_concat([x, x])

    with pytest.raises(OpBuildError, match=r"distribute_concat.*one blob per device of the placement \(3\), got 2"):
        job(X)
