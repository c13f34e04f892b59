"""flow.watch_scope: every blob created inside is watched (and diff-watched), in a documented order."""
import numpy as np
import pytest

import oneflow as flow
import oneflow.typing as tp
from flowjob_core import Blob, FlowjobError
from flowjob_typing import LocalBlob
from flowjob_watch.sinks import Stats


@pytest.fixture(autouse=True)
def fresh_session():
    flow.clear_default_session()
    yield
    flow.clear_default_session()


def _train_config():
    config = flow.function_config()
    config.default_data_type(flow.float)
    config.train.primary_lr(0.1)
    config.train.model_update_conf({"naive_conf": {}})
    return config


def _dense_names(prefix):
    values = [f"{prefix}-bias/out", f"{prefix}-weight/out", f"{prefix}_matmul/out_0", f"{prefix}_bias_add/out_0"]
    grads = [f"{prefix}_matmul/out_0", f"{prefix}_bias_add/out_0", f"{prefix}-bias/out", f"{prefix}-weight/out"]
    return values, grads


def _scoped_train_job(watched, grads, **scope_kwargs):
    prefix = []

    @flow.global_function(_train_config())
    def train_job(images=flow.FixedTensorDef((4, 6)), labels=flow.FixedTensorDef((4,), dtype=flow.int32)):
        hidden = flow.layers.dense(images, 5, activation=flow.nn.relu,
                                   kernel_initializer=flow.random_uniform_initializer())
        with flow.watch_scope(watched, grads, **scope_kwargs):
            logits = flow.layers.dense(hidden, 3, kernel_initializer=flow.random_uniform_initializer())
        prefix.append(logits.op_name.rsplit("_", 2)[0])
        loss = flow.nn.sparse_softmax_cross_entropy_with_logits(labels, logits)
        flow.losses.add_loss(loss)
        return loss

    return train_job, prefix


def _feed():
    rng = np.random.default_rng(0)
    return rng.uniform(-1, 1, (4, 6)).astype(np.float32), rng.integers(0, 3, (4,)).astype(np.int32)


def test_dict_watchers_get_every_blob_in_the_documented_order():
    watched, grads = {}, {}
    job, prefix = _scoped_train_job(watched, grads)
    job(*_feed()).get()
    values, grad_keys = _dense_names(prefix[0])
    assert list(watched) == values
    assert list(grads) == grad_keys
    for lbn, entry in watched.items():
        assert set(entry) == {"blob", "blob_def"}
        assert isinstance(entry["blob"], LocalBlob) and isinstance(entry["blob_def"], Blob)
        assert entry["blob_def"].lbn == lbn
        assert entry["blob"].ndarray().shape == entry["blob_def"].shape
    for lbn, entry in grads.items():  # keyed by the forward lbn, holding the gradient
        assert entry["blob_def"].lbn == lbn
        assert entry["blob"].ndarray().shape == watched[lbn]["blob"].ndarray().shape
    logits = watched[values[3]]["blob"].ndarray()
    assert np.isfinite(logits).all()


def test_dict_values_are_overwritten_each_step():
    watched, grads = {}, {}
    job, prefix = _scoped_train_job(watched, grads)
    images, labels = _feed()
    job(images, labels).get()
    first = {k: v["blob"].ndarray().copy() for k, v in watched.items()}
    job(images * 2, labels).get()
    matmul = _dense_names(prefix[0])[0][2]
    assert not np.array_equal(first[matmul], watched[matmul]["blob"].ndarray())
    assert list(watched) == _dense_names(prefix[0])[0]


def test_callable_watcher_gets_value_and_blob_def():
    calls = []
    job, prefix = _scoped_train_job(lambda value, blob_def: calls.append((value, blob_def)), None)
    job(*_feed()).get()
    assert [b.lbn for _, b in calls] == _dense_names(prefix[0])[0]
    assert all(isinstance(v, LocalBlob) for v, _ in calls)


def test_annotated_callable_watcher():
    calls = []

    def watcher(value: tp.Numpy, blob_def):
        calls.append(type(value))

    job, _ = _scoped_train_job(watcher, None)
    job(*_feed()).get()
    assert calls == [np.ndarray] * 4


def test_scope_with_a_sink():
    stats = Stats()
    job, prefix = _scoped_train_job(None, None, sink=stats, diff_sink=stats)
    job(*_feed()).get()
    values, grads = _dense_names(prefix[0])
    assert list(stats.history) == values + [g + ":diff" for g in grads]


def test_nested_scopes_both_watch_each_lbn_once_and_outside_blobs_are_not_watched():
    outer, inner = {}, {}

    @flow.global_function()
    def job(x: tp.Numpy.Placeholder((2, 3))) -> tp.Numpy:
        before = flow.nn.relu(x)
        with flow.watch_scope(outer):
            a = flow.nn.relu(before, name="a")
            with flow.watch_scope(inner):
                b = flow.nn.relu(a, name="b")
            c = flow.nn.relu(b, name="c")
        return flow.nn.relu(c, name="after")

    job(np.ones((2, 3), np.float32))
    assert list(inner) == ["b/out_0"]
    assert list(outer) == ["a/out_0", "b/out_0", "c/out_0"]


def test_blobs_without_a_gradient_are_skipped_by_the_diff_watcher():
    watched, grads = {}, {}

    @flow.global_function(type="train")
    def train(x: tp.Numpy.Placeholder((2, 3))) -> tp.Numpy:
        with flow.watch_scope(watched, grads):
            upstream = flow.nn.relu(x, name="upstream")  # before any variable: no gradient computed
            w = flow.get_variable("w", shape=(3,), initializer=lambda s, d, r: np.ones(s, d))
            loss = flow.math.multiply(upstream, w, name="loss")
        flow.optimizer.SGD(flow.optimizer.PiecewiseConstantScheduler([], [0.1]), momentum=0).minimize(loss)
        return loss

    train(np.ones((2, 3), np.float32))
    assert list(watched) == ["w/out", "upstream/out_0", "loss/out_0"]
    assert list(grads) == ["loss/out_0", "w/out"]
    np.testing.assert_array_equal(grads["loss/out_0"]["blob"].ndarray(), np.ones((2, 3)))


def test_watch_scope_outside_a_job_and_bad_watchers():
    with pytest.raises(FlowjobError, match=r"flow.watch_scope is only valid inside"):
        with flow.watch_scope({}):
            pass

    @flow.global_function()
    def job(x: tp.Numpy.Placeholder((2,))) -> tp.Numpy:
        with flow.watch_scope(42):
            pass
        return x

    with pytest.raises(FlowjobError, match=r"a watcher must be a dict, a callable"):
        job(np.ones(2, np.float32))


def test_mirrored_scope_values_are_merged_per_step():
    flow.config.cpu_device_num(2)
    watched = {}

    @flow.global_function()
    def job(x: tp.ListNumpy.Placeholder((2, 3))) -> tp.ListNumpy:
        with flow.watch_scope(watched):
            y = flow.nn.relu(x, name="y")
        return y

    for k in (1, 2):
        pieces = [np.full((2, 3), k, np.float32), np.full((2, 3), -k, np.float32)]
        job(pieces)
        blob = watched["y/out_0"]["blob"]
        assert blob.parallel_num() == 2
        np.testing.assert_array_equal(blob.ndarray(), np.maximum(np.concatenate(pieces), 0))
