"""Dynamic blobs: mirrored placeholders fed arrays smaller than declared (legacy's dynamic mirrored
blobs), and tensor lists (``tp.ListListNumpy`` fed several arrays per device)."""
from typing import Tuple

import numpy as np
import pytest

import oneflow as flow
import oneflow.typing as tp
from flowjob_core import FlowjobError, JobArgumentError
from flowjob_core.plan.actual_shapes import DynamicShapeError, reshaped

RNG = np.random.default_rng(7)


@pytest.fixture(autouse=True)
def fresh_session():
    flow.clear_default_session()
    yield
    flow.clear_default_session()


def _mirrored() -> flow.FunctionConfig:
    cfg = flow.function_config()
    cfg.default_logical_view(flow.scope.mirrored_view())
    return cfg


def _data(*shape, dtype=np.float32):
    return RNG.standard_normal(shape).astype(dtype)


def _specialised(job) -> dict:  # the cached steps per actual-shape key
    return job._dynamic.specialised


def test_issue_example_smaller_batch_runs_on_the_actual_shape():
    @flow.global_function(function_config=_mirrored())
    def job(x: tp.ListNumpy.Placeholder((110,))) -> tp.ListNumpy:
        return flow.math.relu(x) * 2.0 + 1.0

    for n in (110, 100, 1, 100):
        x = _data(n)
        (got,) = job([x])
        assert got.shape == (n,)
        np.testing.assert_allclose(got, np.maximum(x, 0) * 2 + 1, rtol=1e-6)
    assert list(_specialised(job)) == [((100,),), ((1,),)]  # one specialised step per actual shape, cached


def test_elementwise_scalar_and_broadcast_with_static_blobs():
    @flow.global_function(function_config=_mirrored())
    def job(x: tp.ListNumpy.Placeholder((8, 3)), y: tp.ListNumpy.Placeholder((8, 3)),
            b: tp.Numpy.Placeholder((1, 3))) -> Tuple[tp.ListNumpy, tp.ListNumpy, tp.ListNumpy, tp.ListNumpy]:
        return (x + y, x * b - b, flow.math.square(x) / 2.0, flow.math.maximum(x, b))

    x, y, b = _data(5, 3), _data(5, 3), _data(1, 3)
    s, m, q, mx = (r[0] for r in job([x], [y], b))
    np.testing.assert_allclose(s, x + y, rtol=1e-6)
    np.testing.assert_allclose(m, x * b - b, rtol=1e-6)
    np.testing.assert_allclose(q, x * x / 2, rtol=1e-6)
    np.testing.assert_allclose(mx, np.maximum(x, b), rtol=1e-6)


def test_reductions_concat_and_reshape_like_ops():
    @flow.global_function(function_config=_mirrored())
    def job(x: tp.ListNumpy.Placeholder((6, 4))) -> Tuple[tp.ListNumpy, ...]:
        return (flow.math.reduce_sum(x, axis=0), flow.math.reduce_mean(x, axis=1, keepdims=True),
                flow.math.reduce_max(x), flow.concat([x, x * 2.0], axis=0), flow.concat([x, x], axis=1),
                flow.reshape(x, (-1, 2)), flow.flatten(flow.expand_dims(x, 1)),
                flow.squeeze(flow.expand_dims(x, 2), axis=[2]), flow.identity(x), flow.cast(x, flow.int32))

    x = np.round(_data(3, 4) * 10)
    got = [r[0] for r in job([x])]
    want = [x.sum(0), x.mean(1, keepdims=True), np.asarray([x.max()]), np.concatenate([x, 2 * x]),
            np.concatenate([x, x], 1), x.reshape(-1, 2), x.reshape(-1), x, x, x.astype(np.int32)]
    for g, w in zip(got, want):
        assert g.shape == w.shape and g.dtype == w.dtype
        np.testing.assert_allclose(g, w, rtol=1e-5)


def test_sorting_gather_softmax_and_matmul_on_a_dynamic_batch():
    @flow.global_function(function_config=_mirrored())
    def job(x: tp.ListNumpy.Placeholder((9, 5)), idx: tp.ListNumpy.Placeholder((4,), dtype=flow.int32),
            w: tp.Numpy.Placeholder((5, 2))) -> Tuple[tp.ListNumpy, ...]:
        return (flow.math.argmax(x), flow.argsort(x), flow.sort(x, direction="DESCENDING"),
                flow.math.top_k(x, k=2), flow.gather(x, idx), flow.nn.softmax(x), flow.matmul(x, w),
                flow.nn.relu(x))

    x, w = _data(6, 5), _data(5, 2)
    idx = np.array([5, 0, 2], np.int32)
    got = [r[0] for r in job([x], [idx], w)]
    e = np.exp(x - x.max(1, keepdims=True))
    want = [x.argmax(1), np.argsort(x, 1, kind="stable"), -np.sort(-x, 1), np.argsort(-x, 1, kind="stable")[:, :2],
            x[idx], e / e.sum(1, keepdims=True), x @ w, np.maximum(x, 0)]
    for g, wnt in zip(got, want):
        assert g.shape == wnt.shape
        np.testing.assert_allclose(g, wnt, rtol=1e-5, atol=1e-6)


def test_dense_layer_on_a_dynamic_batch_uses_the_same_variables():
    @flow.global_function(function_config=_mirrored())
    def job(x: tp.ListNumpy.Placeholder((16, 4))) -> tp.ListNumpy:
        hidden = flow.layers.dense(x, 3, activation=flow.nn.relu, name="fc1",
                                   kernel_initializer=flow.random_normal_initializer(seed=1))
        return flow.layers.dense(hidden, 2, name="fc2", kernel_initializer=flow.random_normal_initializer(seed=2))

    full = _data(16, 4)
    (want,) = job([full])
    (got,) = job([full[:7]])
    assert got.shape == (7, 2)
    np.testing.assert_allclose(got, want[:7], rtol=1e-5, atol=1e-6)  # the same weights, row by row


def test_rank_3_dense_realigns_its_static_reshape():
    @flow.global_function(function_config=_mirrored())
    def job(x: tp.ListNumpy.Placeholder((4, 3, 5))) -> tp.ListNumpy:
        return flow.layers.dense(x, 2, name="fc", kernel_initializer=flow.random_normal_initializer(seed=3))

    full = _data(4, 3, 5)
    (want,) = job([full])
    (got,) = job([full[:2]])
    assert got.shape == (2, 3, 2)
    np.testing.assert_allclose(got, want[:2], rtol=1e-5, atol=1e-6)


def test_legacy_accepts_any_shape_of_the_same_rank_and_at_most_the_declared_elements():
    @flow.global_function(function_config=_mirrored())
    def job(x: tp.ListNumpy.Placeholder((4, 4))) -> tp.ListNumpy:
        return flow.math.abs(x) + 1.0

    x = _data(2, 8)  # 16 elements, a dim above its declared size: legacy checked the element count only
    (got,) = job([x])
    np.testing.assert_allclose(got, np.abs(x) + 1, rtol=1e-6)
    with pytest.raises(JobArgumentError, match=r"argument 'x'\[0\]: expected an array of rank 2 with at most 16 "
                                               r"elements \(declared shape \(4, 4\), a maximum\), "
                                               r"found shape \(5, 4\)"):
        job([_data(5, 4)])
    with pytest.raises(JobArgumentError, match=r"rank 2 .*found shape \(4,\)"):
        job([_data(4)])
    (again,) = job([x])  # the session is still usable
    np.testing.assert_allclose(again, got)


def test_values_that_outgrow_their_slot_get_memory_of_their_own():
    @flow.global_function(function_config=_mirrored())
    def job(x: tp.ListNumpy.Placeholder((4, 2)), y: tp.ListNumpy.Placeholder((4, 2))) -> tp.ListNumpy:
        return (x + y) * 3.0

    x, y = _data(8, 1), _data(1, 8)  # each fits, but the broadcast sum holds 64 elements, not 8
    (got,) = job([x], [y])
    np.testing.assert_allclose(got, (x + y) * 3, rtol=1e-6)


def test_fixed_placeholders_keep_requiring_the_exact_shape():
    @flow.global_function(function_config=_mirrored())
    def job(x: tp.ListNumpy.Placeholder((4,)), b: tp.Numpy.Placeholder((4,))) -> tp.ListNumpy:
        return x + b

    with pytest.raises(JobArgumentError, match=r"argument 'b': expected shape \(4,\), found \(3,\)"):
        job([_data(3)], _data(3))


def test_an_op_that_cannot_take_the_dynamic_blob_names_op_job_and_placeholder():
    @flow.global_function(function_config=_mirrored())
    def job(x: tp.ListNumpy.Placeholder((4, 3)), b: tp.Numpy.Placeholder((4, 3))) -> tp.ListNumpy:
        return flow.math.add(x, b, name="mix")

    with pytest.raises(DynamicShapeError, match=r"job 'job', op 'mix' \(.*\) at .*dynamic placeholder\(s\) \['x'\] "
                                                r"with shapes \[\(2, 3\), \(4, 3\)\]: the op cannot take"):
        job([_data(2, 3)], _data(4, 3))
    (got,) = job([_data(4, 3)], np.zeros((4, 3), np.float32))  # the declared shape still runs
    assert got.shape == (4, 3)


def test_static_shape_ops_and_static_reshapes_are_refused_clearly():
    @flow.global_function(function_config=_mirrored())
    def job(x: tp.ListNumpy.Placeholder((4, 3))) -> tp.ListNumpy:
        return flow.reshape(x, (2, 6), name="fixed")

    with pytest.raises(DynamicShapeError, match=r"op 'fixed' \(reshape\).*\['x'\].*does not follow the dynamic input; "
                                                r"write the shape with -1"):
        job([_data(1, 3)])

    @flow.global_function(function_config=_mirrored())
    def widen(x: tp.ListNumpy.Placeholder((4, 1))) -> tp.ListNumpy:
        return flow.broadcast_like(x, flow.zeros((4, 3)), broadcast_axes=(1,), name="widened")

    np.testing.assert_array_equal(widen([np.ones((4, 1), np.float32)])[0], np.ones((4, 3)))
    # a (1, 1) feed would broadcast back to the traced 4 rows: refused, naming the op
    with pytest.raises(DynamicShapeError, match=r"op 'widened' \(broadcast_to\).*\['x'\].*fixed at trace time"):
        widen([np.ones((1, 1), np.float32)])


def test_reshape_realignment():
    assert reshaped((8, 3, 4), (5, 3, 4), (8, 12), "w") == (5, 12)
    assert reshaped((8, 10), (5, 10), (8, 1, 10), "w") == (5, 1, 10)
    assert reshaped((8, 10), (5, 10), (1, 8, 10), "w") == (1, 5, 10)
    assert reshaped((8, 1, 10), (5, 1, 10), (8, 10), "w") == (5, 10)
    assert reshaped((8, 10, 1), (5, 10, 1), (8, 10), "w") == (5, 10)
    assert reshaped((12, 5), (6, 5), (4, 3, 5), "w") == (2, 3, 5)
    assert reshaped((8, 3, 4), (5, 3, 4), (96,), "w") == (60,)
    assert reshaped((8, 4), (5, 4), (-1, 2), "w") == (-1, 2)  # the op infers -1 itself
    with pytest.raises(DynamicShapeError, match="does not follow"):
        reshaped((12, 5), (5, 5), (4, 3, 5), "w")


def _train_step(x, name, seen):
    w = flow.get_variable(f"{name}_w", (2, 1), initializer=flow.ones_initializer())
    b = flow.get_variable(f"{name}_b", (1,), initializer=flow.zeros_initializer())
    loss = flow.math.reduce_sum(flow.matmul(x, w) + b, axis=1)  # b's gradient is unbroadcast from the rows
    flow.optimizer.SGD(flow.optimizer.PiecewiseConstantScheduler([], [0.1]), momentum=0).minimize(loss)
    flow.watch_diff(w, lambda d: seen.setdefault(name, []).append(d))
    return loss


def test_train_jobs_plan_each_fed_shape_as_a_job_declared_with_it():
    """Legacy built gradients of dynamic blobs at run time: a smaller feed updates as a job declared with that
    shape does (its gradients, unbroadcasts and 1/N loss scale), and the plan is cached per shape."""
    seen = {}

    @flow.global_function(type="train", function_config=_mirrored())
    def train(x: tp.ListNumpy.Placeholder((4, 2))) -> tp.ListNumpy:
        return _train_step(x, "dyn", seen)

    @flow.global_function(type="train")
    def twin_4(x: tp.Numpy.Placeholder((4, 2))) -> tp.Numpy:
        return _train_step(x, "fix", seen)

    @flow.global_function(type="train")
    def twin_3(x: tp.Numpy.Placeholder((3, 2))) -> tp.Numpy:
        return _train_step(x, "fix", seen)

    feeds = [_data(4, 2), _data(3, 2), _data(3, 2), _data(4, 2), _data(3, 2)]
    for x in feeds:
        (loss,) = train([x])
        want = (twin_4 if len(x) == 4 else twin_3)(x)
        np.testing.assert_array_equal(loss, want)
        np.testing.assert_array_equal(seen["dyn"][-1], seen["fix"][-1])
    variables = flow.get_all_variables()
    for name in ("w", "b"):
        np.testing.assert_array_equal(variables[f"dyn_{name}"].numpy(), variables[f"fix_{name}"].numpy())
    assert list(_specialised(train)) == [((3, 2),)]  # one plan for the smaller shape; the declared one is the job's
    # one SGD step by hand: w -= 0.1 * sum over rows of x / rows, b -= 0.1 * rows / rows
    assert variables["dyn_b"].numpy().tolist() == pytest.approx([-0.1 * len(feeds)], rel=1e-6)


def test_a_train_step_fed_no_rows_leaves_the_variables_as_they_were():
    seen = {}

    @flow.global_function(type="train", function_config=_mirrored())
    def train(x: tp.ListNumpy.Placeholder((4, 2))) -> tp.ListNumpy:
        w = flow.get_variable("empty_w", (2, 1), initializer=flow.ones_initializer())
        loss = flow.matmul(x, w)
        flow.optimizer.SGD(flow.optimizer.PiecewiseConstantScheduler([], [0.1]), momentum=0).minimize(loss)
        flow.watch_diff(w, lambda d: seen.setdefault("w", []).append(d))
        return loss

    (loss,) = train([np.zeros((0, 2), np.float32)])  # legacy's empty dynamic batch: no loss element, no update
    assert loss.shape == (0, 1)
    np.testing.assert_array_equal(seen["w"][-1], np.zeros((2, 1)))
    np.testing.assert_array_equal(flow.get_all_variables()["empty_w"].numpy(), np.ones((2, 1)))


def test_train_job_ops_with_a_traced_target_shape_refuse_a_smaller_feed():
    @flow.global_function(type="train", function_config=_mirrored())
    def train(x: tp.ListNumpy.Placeholder((4, 2))) -> tp.ListNumpy:
        _train_step(x, "t", {})
        return flow.user_op_builder("fixed").Op("TestReshape").Input("in", [x]).Output("out") \
            .Attr("shape", [2, 4]).Build().InferAndTryRun().SoleOutputBlob()

    train([_data(4, 2)])
    with pytest.raises(DynamicShapeError, match=r"op 'fixed' \(test_reshape\).*fixed at trace time"):
        train([_data(3, 2)])


def test_version_01_mirrored_tensor_def_is_dynamic():
    @flow.global_function(function_config=_mirrored())
    def job(x=flow.MirroredTensorDef((5, 2))):
        return flow.math.negative(x)

    x = _data(3, 2)
    got = job([x]).get()
    assert got.numpy_list()[0].shape == (3, 2)
    np.testing.assert_array_equal(got.numpy(), -x)


def test_devices_may_hold_different_actual_sizes():
    flow.config.cpu_device_num(2)

    @flow.global_function(function_config=_mirrored())
    def job(x: tp.ListNumpy.Placeholder((6, 2))) -> Tuple[tp.ListNumpy, tp.Numpy]:
        y = x * 10.0
        return y, y

    a, b = _data(4, 2), _data(6, 2)
    per_device, logical = job([a, b])
    assert [p.shape for p in per_device] == [(4, 2), (6, 2)]
    np.testing.assert_allclose(logical, np.concatenate([a, b]) * 10, rtol=1e-6)


def test_declared_shape_path_allocates_nothing_new_and_views_share_the_arena():
    @flow.global_function(function_config=_mirrored())
    def job(x: tp.ListNumpy.Placeholder((64, 8))) -> tp.ListNumpy:
        return flow.math.tanh(flow.math.sigmoid(x) + 1.0)

    job([_data(64, 8)])
    plan = job.plan()
    before = plan.arena.allocated_bytes
    x = _data(10, 8)
    (got,) = job([x])
    np.testing.assert_allclose(got, np.tanh(1 / (1 + np.exp(-x)) + 1), rtol=1e-5)
    (special,) = _specialised(job).values()
    assert special.arena.base is plan.arena and plan.arena.allocated_bytes == before


# tensor lists -------------------------------------------------------------
def test_tensor_list_identity_round_trips_several_arrays():
    @flow.global_function(function_config=_mirrored())
    def job(x: tp.ListListNumpy.Placeholder((2, 5, 4))) -> tp.ListListNumpy:
        return x

    arrays = [_data(1, 3, 4), _data(1, 1, 4)]  # legacy's tensor_list_split test feeds such lists
    (got,) = job([arrays])
    assert len(got) == 2
    for g, a in zip(got, arrays):
        np.testing.assert_array_equal(g, a)


def test_tensor_list_elementwise_and_body_views():
    @flow.global_function(function_config=_mirrored())
    def job(x: tp.ListListNumpy.Placeholder((6, 3))) -> Tuple[tp.ListListNumpy, tp.ListNumpy, tp.Numpy]:
        y = flow.math.exp(x)
        return y, y, y

    arrays = [_data(2, 3), _data(1, 3), _data(3, 3)]
    lists, per_device, logical = job([arrays])
    assert [g.shape for g in lists[0]] == [(2, 3), (1, 3), (3, 3)]
    for g, a in zip(lists[0], arrays):
        np.testing.assert_allclose(g, np.exp(a), rtol=1e-6)
    body = np.exp(np.concatenate(arrays))  # legacy's dense view of a tensor list: the elements on axis 0
    np.testing.assert_allclose(per_device[0], body, rtol=1e-6)
    np.testing.assert_allclose(logical, body, rtol=1e-6)


def test_tensor_list_checks_and_legacy_def():
    @flow.global_function(function_config=_mirrored())
    def job(x=flow.MirroredTensorListDef((2, 5))):
        return x

    data = np.ones((1, 5), np.float32)
    lists = job([[data, 2 * data]]).get().numpy_lists()
    assert len(lists) == 1 and [a.tolist() for a in lists[0]] == [[[1] * 5], [[2] * 5]]
    with pytest.raises(JobArgumentError, match=r"argument 'x'\[0\]: the tensor list holds 15 elements .* more than "
                                               r"the declared shape \(2, 5\) holds \(10\)"):
        job([[data, data, data]])
    with pytest.raises(JobArgumentError, match=r"argument 'x'\[0\]: expected a list of ndarrays \(a tensor list\)"):
        job([data])
    with pytest.raises(JobArgumentError, match=r"argument 'x'\[0\]\[1\]: expected an array of rank 2"):
        job([[data, np.ones(5, np.float32)]])


def test_tensor_lists_of_one_call_need_the_same_length():
    @flow.global_function(function_config=_mirrored())
    def job(x: tp.ListListNumpy.Placeholder((4, 2)), y: tp.ListListNumpy.Placeholder((4, 2))) -> tp.ListListNumpy:
        return x - y

    a = [_data(1, 2), _data(2, 2)]
    (got,) = job([a], [[_data(1, 2)]])  # a single array is shared by every element
    assert [g.shape for g in got] == [(1, 2), (2, 2)]
    with pytest.raises(JobArgumentError, match=r"tensor-list arguments \['x', 'y'\] hold different numbers"):
        job([a], [[_data(1, 2)] * 3])


def test_a_body_that_differs_beyond_axis_0_must_be_read_as_a_list():
    @flow.global_function(function_config=_mirrored())
    def job(x: tp.ListListNumpy.Placeholder((2, 5, 4))) -> tp.ListNumpy:
        return x

    with pytest.raises(FlowjobError, match=r"tensor list whose elements differ beyond axis 0 .* tp.ListListNumpy"):
        job([[_data(1, 3, 4), _data(1, 1, 4)]])


def test_watch_handlers_get_tensor_lists_and_dynamic_values():
    seen = []

    def as_lists(v: tp.ListListNumpy) -> None:
        seen.append([a.shape for a in v[0]])

    def as_array(v: tp.Numpy) -> None:
        seen.append(v.shape)

    @flow.global_function(function_config=_mirrored())
    def job(x: tp.ListListNumpy.Placeholder((6, 2))) -> tp.ListListNumpy:
        y = x * 3.0
        flow.watch(y, as_lists)
        flow.watch(y, as_array)
        return y

    job([[_data(2, 2), _data(3, 2)]])
    job([[_data(4, 2)]])
    flow.sync_default_session()
    assert seen == [[(2, 2), (3, 2)], (5, 2), [(4, 2)], (4, 2)]


def test_a_backend_without_host_arrays_moves_every_piece(monkeypatch):
    import types

    from flowjob_core import Backend, JobFunction, Session, hookimpl, make_plugin_manager

    moved = []
    plugin = types.ModuleType("xpu_dynamic")

    @hookimpl
    def flowjob_add_backends(registry):
        registry.add(Backend(tag="xpu", name="numpy as xpu", xp=np, make_rng=np.random.default_rng,
                             from_host=lambda a: moved.append(a.shape) or np.array(a, copy=True),
                             to_host=lambda a: np.array(a, copy=True)))

    plugin.flowjob_add_backends = flowjob_add_backends
    monkeypatch.setenv("FLOWJOB_DEVICE", "xpu")
    session = Session(make_plugin_manager(plugins=[plugin], autoload=True))
    try:
        assert not session.backend.host_arrays

        def job(x: tp.ListListNumpy.Placeholder((4, 2)), y: tp.ListNumpy.Placeholder((4, 2))
                ) -> Tuple[tp.ListListNumpy, tp.ListNumpy]:
            return flow.math.exp(x), y + 1.0

        fn = JobFunction(job, "predict", _mirrored(), session)
        a = [np.ones((1, 2), np.float32), np.zeros((3, 2), np.float32)]
        lists, shifted = fn([a], [np.zeros((2, 2), np.float32)])
        assert moved == [(1, 2), (3, 2), (2, 2)]
        np.testing.assert_allclose(lists[0][0], np.exp(a[0]), rtol=1e-6)
        np.testing.assert_array_equal(lists[0][1], np.ones((3, 2)))
        np.testing.assert_array_equal(shifted[0], np.ones((2, 2)))
    finally:
        session.close()


def test_a_conv_net_predicts_a_smaller_last_batch_row_for_row():
    @flow.global_function(function_config=_mirrored())
    def predict(images: tp.ListNumpy.Placeholder((8, 1, 12, 12))) -> tp.ListNumpy:
        conv = flow.layers.conv2d(images, 4, 3, padding="SAME", activation=flow.nn.relu, name="conv",
                                  kernel_initializer=flow.random_normal_initializer(seed=4))
        pool = flow.nn.max_pool2d(conv, 2, 2, "VALID")
        return flow.layers.dense(flow.flatten(pool, start_dim=1), 3, name="out",
                                 kernel_initializer=flow.random_normal_initializer(seed=5))

    batch = _data(8, 1, 12, 12)
    (full,) = predict([batch])
    (last,) = predict([batch[:3]])
    assert last.shape == (3, 3)
    np.testing.assert_allclose(last, full[:3], rtol=1e-4, atol=1e-5)
