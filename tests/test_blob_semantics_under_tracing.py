"""Legacy's lazy blobs under tracing, as legacy programs use them: full reductions are (1,) and are
concatenated, ``if bias:`` tests an optional argument, and the BlobDef/ConsistentBlob attributes
(``split_axis``, ``unique_name``, ``lbi``, ...) answer as legacy's did."""
from typing import Tuple

import numpy as np
import pytest

import oneflow as flow
import oneflow.typing as tp
from flowjob_core.errors import FlowjobError
from flowjob_core.testing.modules import sibling

_helpers = sibling(__file__, "op_surface_helpers")
fresh_session = _helpers.fresh_session  # each test in its own session
RNG = np.random.default_rng(39)
X = RNG.standard_normal((4, 6)).astype(np.float32)


def test_full_reductions_are_one_element_blobs_that_concat():
    # a metric job of the model zoo: each statistic a full reduction, concatenated into one vector
    shapes = {}

    @flow.global_function()
    def stats_job(x: tp.Numpy.Placeholder((4, 6))) -> tp.Numpy:
        parts = [flow.math.reduce_max(x), flow.math.reduce_min(x), flow.math.reduce_sum(x),
                 flow.math.reduce_mean(x), flow.math.reduce_prod(x), flow.math.reduce_logsumexp(x),
                 flow.math.reduce_variance(x), flow.math.reduce_any(x > 0.0)]
        shapes["parts"] = [p.shape for p in parts[:-1]]
        shapes["moments"] = [b.shape for b in flow.nn.moments(x, [0, 1])]
        return flow.concat(parts[:-1], axis=0)

    got = stats_job(X)
    assert shapes["parts"] == [(1,)] * 7 and shapes["moments"] == [(1,), (1,)]
    want = [X.max(), X.min(), X.sum(), X.mean(), X.prod(), np.log(np.exp(X.astype(np.float64)).sum()), X.var()]
    assert got.shape == (7,)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_a_returned_full_reduction_is_indexed_as_legacy_delivered_it():
    @flow.global_function(type="train")
    def train_job(x: tp.Numpy.Placeholder((4, 6))) -> Tuple[tp.Numpy, tp.Numpy]:
        w = flow.get_variable("w", shape=(6, 1), initializer=flow.constant_initializer(0.5))
        loss = flow.math.reduce_mean(flow.matmul(x, w))
        flow.optimizer.SGD(flow.optimizer.PiecewiseConstantScheduler([], [0.1]), momentum=0).minimize(loss)
        return loss, x[1, 2]

    loss, element = train_job(X)
    assert loss.shape == (1,) and element.shape == (1,)
    want = (X @ np.full((6, 1), 0.5, np.float32)).mean()
    np.testing.assert_allclose(loss[0], want, rtol=1e-5)
    assert element[0] == X[1, 2]
    # what legacy programs did with the loss on numpy 1, which numpy 2 refuses for a plain 1-d array
    assert abs(float(loss) - want) < 1e-5 and "{:.3f}".format(loss) == f"{want:.3f}" and int(element) == int(X[1, 2])
    assert abs(loss.item() - want) < 1e-5 and str(loss).startswith("[")


def test_if_bias_tests_an_optional_argument_as_legacy():
    # the RNN cell idiom: ``if bias_blob:`` is true for a blob, false for None
    def cell(x, weight, bias_blob=None):
        out = flow.matmul(x, weight)
        if bias_blob:
            out = flow.nn.bias_add(out, bias_blob)
        return out

    @flow.global_function()
    def rnn_job(x: tp.Numpy.Placeholder((4, 6)), b: tp.Numpy.Placeholder((3,))) -> Tuple[tp.Numpy, tp.Numpy]:
        w = flow.get_variable("w", shape=(6, 3), initializer=flow.constant_initializer(1.0))
        return cell(x, w, b), cell(x, w)

    b = np.array([1.0, 2.0, 3.0], np.float32)
    with_bias, without = rnn_job(X, b)
    np.testing.assert_allclose(without, np.repeat(X.sum(1, keepdims=True), 3, 1), rtol=1e-5)
    np.testing.assert_allclose(with_bias, without + b, rtol=1e-5)


@pytest.mark.parametrize("ask", ["float", "int", "numpy"])
def test_asking_a_traced_blob_for_its_value_is_an_error(ask):
    @flow.global_function()
    def job(x: tp.Numpy.Placeholder((4, 6))) -> tp.Numpy:
        total = flow.math.reduce_sum(x)
        {"float": float, "int": int, "numpy": lambda b: b.numpy()}[ask](total)
        return total

    with pytest.raises(FlowjobError, match="has no value while the job is traced"):
        job(X)


def test_blob_attributes_answer_as_legacys_lazy_consistent_blob():
    seen = {}

    @flow.global_function()
    def job(x: tp.Numpy.Placeholder((4, 6)), parts: tp.ListListNumpy.Placeholder((4, 6))) -> tp.Numpy:
        w = flow.get_variable("w", shape=(6, 2), initializer=flow.zeros_initializer())
        y = flow.matmul(x, w)
        seen.update(
            x_split=x.split_axis, w_split=w.split_axis, y_split=y.split_axis,
            annotated=x.with_split_distribute(1).split_axis, whole=x.with_broadcast_distribute().split_axis,
            names=(x.unique_name, x.with_split_distribute(1).unique_name, x.with_broadcast_distribute().unique_name,
                   x.with_boxing_disabled().unique_name, x.with_boxing_disabled(False).unique_name),
            boxing=(x.disable_boxing, x.with_boxing_disabled().disable_boxing),
            lbi=(y.lbi.op_name, y.lbi.blob_name), op=(y.op_name, y.blob_name, y.logical_blob_name),
            batch=(x.has_batch_axis(), w.has_batch_axis()), static=y.static_shape, size=x.parallel_size,
            lists=(x.is_tensor_list, parts.is_tensor_list), clone=x.Clone().unique_name, job=y.job_name,
        )
        with pytest.raises(FlowjobError, match="sub_consistent_blob_list"):
            seen["sub"] = x.sub_consistent_blob_list
        for refused in ("get_dtype", "set_job_name"):
            with pytest.raises(FlowjobError, match=refused):
                getattr(x, refused)(*(["other"] if refused == "set_job_name" else []))
        seen["identical"] = (x.IdenticalTo(x.Clone()), x.IdenticalTo(x.with_split_distribute(1)), x.IdenticalTo(y))
        moved = x.Clone()
        moved.set_distribute(flow.distribute.split(1))
        seen["set"] = (moved.split_axis, x.split_axis)
        seen["warnings"] = (x.get_lazy_shape_log_warning(), x.get_mirror_shape_log_warning())
        with flow.scope.mirrored_view():
            seen["mirrored_warning"] = x.get_lazy_shape_log_warning()
        return y

    job(X, [[X]])
    assert (seen["x_split"], seen["w_split"], seen["y_split"]) == (0, None, 0)  # data parallel: split on the batch
    assert (seen["annotated"], seen["whole"]) == (1, None)
    x_lbn = seen["names"][0]
    assert x_lbn.endswith("/out") and seen["names"][1:] == (x_lbn + ":S1", x_lbn + ":B", x_lbn + "|1", x_lbn + "|0")
    assert seen["boxing"] == (None, True)
    assert seen["lbi"] == seen["op"][:2] and seen["op"][2] == "/".join(seen["op"][:2])
    assert seen["batch"] == (True, False) and seen["static"] == (4, 2) and seen["size"] == 1
    assert seen["lists"] == (False, True) and seen["clone"] == x_lbn and seen["job"] == "job"
    assert seen["identical"] == (True, False, False) and seen["set"] == (1, 0)
    assert seen["warnings"][0] == "" and "mirrored blob shape in consistent view" in seen["warnings"][1]
    assert "consistent blob shape in mirrored view" in seen["mirrored_warning"]


def test_a_reid_loss_trains_through_flow_where_rows():
    # a re-identification loss: the features of the samples of one identity, found by flow.where, pulled
    # together; how many there are is the batch's
    def sgd(loss):
        flow.optimizer.SGD(flow.optimizer.PiecewiseConstantScheduler([], [0.1]), momentum=0).minimize(loss)

    @flow.global_function(type="train")
    def reid_job(images: tp.Numpy.Placeholder((6, 4)), labels: tp.Numpy.Placeholder((6,), dtype=flow.int32),
                 anchor: tp.Numpy.Placeholder((6,), dtype=flow.int32)) -> tp.Numpy:
        w = flow.get_variable("fc-weight", shape=(4, 3), initializer=flow.constant_initializer(0.1))
        features = flow.matmul(images, w)
        positives = flow.where(flow.math.equal(labels, anchor))
        chosen = flow.gather_nd(features, positives)
        loss = flow.math.reduce_mean(flow.math.square(chosen))
        sgd(loss)
        return loss

    images = np.arange(24, dtype=np.float32).reshape(6, 4) / 10
    weight = np.full((4, 3), 0.1, np.float32)
    for labels in ([1, 0, 1, 0, 0, 1], [0, 0, 1, 0, 0, 0], [1, 1, 1, 1, 0, 1]):
        labels = np.array(labels, np.int32)
        rows = np.flatnonzero(labels == 1)
        feats = images @ weight
        loss = reid_job(images, labels, np.ones(6, np.int32))
        np.testing.assert_allclose(loss, [np.mean(feats[rows] ** 2)], rtol=1e-5)
        d_feats = np.zeros_like(feats)
        d_feats[rows] = 2 * feats[rows] / feats[rows].size  # the mean over the rows of this batch
        weight = weight - 0.1 * images.T @ d_feats
        np.testing.assert_allclose(_helpers.value("fc-weight"), weight, rtol=1e-5)


def test_a_reid_metric_scales_the_selected_rows_by_trained_weights():
    # the rows flow.where picks, times a weight vector plus a bias: their gradients sum the step's rows
    @flow.global_function(type="train")
    def metric_job(images: tp.Numpy.Placeholder((6, 4)), labels: tp.Numpy.Placeholder((6,), dtype=flow.int32)
                   ) -> tp.Numpy:
        w = flow.get_variable("metric-weight", shape=(4,), initializer=flow.constant_initializer(0.1))
        b = flow.get_variable("metric-bias", shape=(1,), initializer=flow.constant_initializer(0.0))
        positives = flow.where(flow.math.equal(labels, flow.constant(1, dtype=flow.int32, shape=(6,))))
        scaled = flow.gather_nd(images, positives) * w + b
        loss = flow.math.reduce_mean(flow.math.reduce_sum(scaled * scaled, axis=1))
        flow.optimizer.SGD(flow.optimizer.PiecewiseConstantScheduler([], [0.1]), momentum=0).minimize(loss)
        return loss

    images = np.arange(24, dtype=np.float32).reshape(6, 4) / 10
    labels = np.array([1, 0, 1, 0, 0, 1], np.int32)
    chosen = images[labels == 1]
    y = chosen * 0.1
    np.testing.assert_allclose(metric_job(images, labels), [(y * y).sum(1).mean()], rtol=1e-5)
    dy = 2 * y / len(chosen)
    np.testing.assert_allclose(_helpers.value("metric-weight"), 0.1 - 0.1 * (dy * chosen).sum(0), rtol=1e-5)
    np.testing.assert_allclose(_helpers.value("metric-bias"), [-0.1 * dy.sum()], rtol=1e-5)
