"""``flow.enable_eager_execution(True)``: job bodies run op by op on real arrays, with lazy mode's results.

Eager and lazy mode run every value through the same kernels (the eager body runs each node's kernel, the
step after it runs the gradient and update nodes the passes add, fused as in lazy mode), so the twins below
are compared bitwise, not to a tolerance.
"""
from __future__ import annotations

from typing import Any, Callable

import numpy as np
import pytest

import oneflow as flow
import oneflow.typing as tp
from flowjob_core import get_default_session
from flowjob_core.errors import FlowjobError, OpBuildError
from flowjob_core.plan.planner import StepError

B, D, H, C = 8, 6, 16, 3
RNG = np.random.default_rng(11)
XS = [RNG.standard_normal((B, D)).astype(np.float32) for _ in range(4)]
YS = [RNG.integers(0, C, B).astype(np.int32) for _ in range(4)]
MNIST_BATCH = 100
IMAGES = [RNG.standard_normal((2, 1, 6, 6)).astype(np.float32) for _ in range(3)]


@pytest.fixture(autouse=True)
def fresh_session():
    flow.clear_default_session()
    flow.enable_eager_execution(False)
    yield
    flow.enable_eager_execution(False)
    flow.clear_default_session()


def variables() -> dict[str, np.ndarray]:
    flow.sync_default_session()
    store = get_default_session().variables
    return {name: store.get(name).copy() for name in store.names()}


def assert_bitwise(a: dict[str, np.ndarray], b: dict[str, np.ndarray]) -> None:
    assert sorted(a) == sorted(b)
    for name in a:
        assert a[name].dtype == b[name].dtype and a[name].tobytes() == b[name].tobytes(), name


def mlp_job(optimizer: Callable[[Any], None], seen: list | None = None, dropout: bool = True) -> Any:
    """An MLP (with dropout) trained by ``optimizer``; ``seen`` collects hidden values read with .numpy() in
    the body."""

    @flow.global_function(type="train")
    def train(x: tp.Numpy.Placeholder((B, D)), y: tp.Numpy.Placeholder((B,), dtype=flow.int32)) -> tp.Numpy:
        init = flow.random_normal_initializer(stddev=0.3, seed=1)
        hidden = flow.layers.dense(x, H, activation=flow.nn.relu, kernel_initializer=init, name="hidden")
        if seen is not None:
            seen.append(hidden.numpy())
        if dropout:  # a seeded stream: each step draws the next mask
            hidden = flow.nn.dropout(hidden, rate=0.25, seed=5)
        logits = flow.layers.dense(hidden, C, kernel_initializer=init, name="output")
        loss = flow.nn.sparse_softmax_cross_entropy_with_logits(y, logits)
        optimizer(loss)
        return loss

    return train


def adam(loss: Any) -> None:
    flow.optimizer.Adam(flow.optimizer.PiecewiseConstantScheduler([], [0.01])).minimize(loss)


def momentum(loss: Any) -> None:
    flow.optimizer.SGD(flow.optimizer.PiecewiseConstantScheduler([2], [0.1, 0.01]), momentum=0.9).minimize(loss)


def run_twin(eager: bool, optimizer: Callable[[Any], None],
             dropout: bool = True) -> tuple[list[np.ndarray], dict[str, np.ndarray]]:
    flow.clear_default_session()
    flow.enable_eager_execution(eager)
    train = mlp_job(optimizer, dropout=dropout)
    losses = [train(x, y) for x, y in zip(XS, YS)]
    return losses, variables()


@pytest.mark.parametrize("optimizer", [adam, momentum], ids=["adam", "sgd-momentum"])
def test_eager_training_is_bitwise_its_lazy_twin(optimizer):
    lazy_losses, lazy_vars = run_twin(False, optimizer)
    eager_losses, eager_vars = run_twin(True, optimizer)
    assert len(lazy_vars) >= 4  # weights, biases and the optimizer's slots
    for lazy, eager in zip(lazy_losses, eager_losses):
        assert lazy.tobytes() == eager.tobytes()
    assert_bitwise(lazy_vars, eager_vars)
    assert not np.array_equal(lazy_losses[0], lazy_losses[-1])  # it trained


def test_a_convolution_net_trains_bitwise_as_in_lazy_mode():
    def run(eager: bool) -> tuple[list[np.ndarray], dict[str, np.ndarray]]:
        flow.clear_default_session()
        flow.enable_eager_execution(eager)

        @flow.global_function(type="train")
        def train(images: tp.Numpy.Placeholder((2, 1, 6, 6))) -> tp.Numpy:
            init = flow.random_normal_initializer(stddev=0.5, seed=2)
            conv = flow.layers.conv2d(images, 4, 3, padding="SAME", activation=flow.nn.relu,
                                      kernel_initializer=init, name="conv")
            pooled = flow.nn.max_pool2d(conv, 2, 2, "VALID")
            loss = flow.math.reduce_mean(flow.math.square(pooled))
            flow.optimizer.SGD(flow.optimizer.PiecewiseConstantScheduler([], [0.05]), momentum=0).minimize(loss)
            return loss

        return [train(i) for i in IMAGES], variables()

    lazy_losses, lazy_vars = run(False)
    eager_losses, eager_vars = run(True)
    assert [v.tobytes() for v in lazy_losses] == [v.tobytes() for v in eager_losses]
    assert_bitwise(lazy_vars, eager_vars)


def test_blobs_hold_values_inside_the_body():
    flow.enable_eager_execution(True)
    seen: list[np.ndarray] = []
    weights: list[np.ndarray] = []

    @flow.global_function()
    def forward(x: tp.Numpy.Placeholder((B, D))) -> tp.Numpy:
        w = flow.get_variable("w", shape=(D, H), initializer=flow.random_uniform_initializer(-1, 1))
        weights.append(w.numpy())
        h = flow.nn.relu(flow.matmul(x, w))
        seen.append(h.numpy())
        assert np.array_equal(np.asarray(h), seen[-1])  # np.asarray reads the value too
        assert float(h.numpy().sum()) > 0  # Python control flow on values, as in legacy eager programs
        return h

    out = forward(XS[0])
    assert len(seen) == 1 and seen[0].shape == (B, H) and seen[0].dtype == np.float32
    np.testing.assert_allclose(seen[0], np.maximum(XS[0] @ weights[0], 0), rtol=1e-5, atol=1e-7)  # any BLAS's rounding
    assert np.array_equal(out, seen[0])
    forward(XS[1])  # the body runs again on every call, on the new feed
    assert len(seen) == 2 and not np.array_equal(seen[0], seen[1])


def test_numpy_in_the_body_sees_the_values_before_each_update():
    flow.enable_eager_execution(True)
    seen: list[np.ndarray] = []
    train = mlp_job(momentum, seen)
    train(XS[0], YS[0])
    train(XS[0], YS[0])
    flow.enable_eager_execution(False)
    # a predict twin, lazy, on the variables the first eager step started from, gives the first hidden value
    flow.clear_default_session()

    @flow.global_function()
    def hidden_only(x: tp.Numpy.Placeholder((B, D))) -> tp.Numpy:
        init = flow.random_normal_initializer(stddev=0.3, seed=1)
        return flow.layers.dense(x, H, activation=flow.nn.relu, kernel_initializer=init, name="hidden")

    assert hidden_only(XS[0]).tobytes() == seen[0].tobytes()
    assert not np.array_equal(seen[0], seen[1])  # the step between them updated the weights


def test_numpy_in_lazy_mode_names_the_switch():
    @flow.global_function()
    def job(x: tp.Numpy.Placeholder((B, D))) -> tp.Numpy:
        y = flow.nn.relu(x)
        y.numpy()
        return y

    with pytest.raises(FlowjobError, match=r"no value while the job is traced.*enable_eager_execution\(True\)"):
        job(XS[0])


def test_watch_and_watch_diff_deliver_lazy_modes_values():
    def run(eager: bool) -> tuple[list[np.ndarray], list[np.ndarray]]:
        flow.clear_default_session()
        flow.enable_eager_execution(eager)
        watched: list[np.ndarray] = []
        diffs: list[np.ndarray] = []

        @flow.global_function(type="train")
        def train(x: tp.Numpy.Placeholder((B, D)), y: tp.Numpy.Placeholder((B,), dtype=flow.int32)) -> tp.Numpy:
            init = flow.random_normal_initializer(stddev=0.3, seed=1)
            logits = flow.layers.dense(x, C, kernel_initializer=init, name="logits")
            flow.watch(logits, lambda v: watched.append(v.copy()))
            flow.watch_diff(logits, lambda v: diffs.append(v.copy()))
            loss = flow.nn.sparse_softmax_cross_entropy_with_logits(y, logits)
            momentum(loss)
            return loss

        for x, y in zip(XS[:3], YS[:3]):
            train(x, y)
        flow.sync_default_session()
        return watched, diffs

    lazy = run(False)
    eager = run(True)
    assert len(eager[0]) == len(eager[1]) == 3
    for a, b in zip(lazy[0] + lazy[1], eager[0] + eager[1]):
        assert a.tobytes() == b.tobytes()


def test_callback_returns_in_eager_mode():
    flow.enable_eager_execution(True)
    got: list[np.ndarray] = []

    @flow.global_function()
    def double(x: tp.Numpy.Placeholder((B, D))) -> tp.Callback[tp.Numpy]:
        return x * 2

    double(XS[0])(got.append)
    flow.sync_default_session()
    assert np.array_equal(got[0], XS[0] * 2)


def test_checkpoints_saved_in_eager_mode_load_in_lazy_mode_and_back(tmp_path):
    flow.enable_eager_execution(True)
    train = mlp_job(adam)
    for x, y in zip(XS[:2], YS[:2]):
        train(x, y)
    trained = variables()
    flow.train.CheckPoint().save(str(tmp_path / "eager"))

    flow.clear_default_session()
    flow.enable_eager_execution(False)
    mlp_job(adam)
    flow.train.CheckPoint().load(str(tmp_path / "eager"))
    assert_bitwise(trained, variables())

    # a lazy save, loaded by an eager program, continues the run as the eager program would have
    flow.train.CheckPoint().save(str(tmp_path / "lazy"))
    flow.clear_default_session()
    flow.enable_eager_execution(True)
    resumed = mlp_job(adam)
    flow.train.CheckPoint().load(str(tmp_path / "lazy"))
    assert_bitwise(trained, variables())
    loss = resumed(XS[2], YS[2])
    assert np.isfinite(loss).all()


def test_a_failing_op_names_job_and_op_and_the_session_goes_on():
    flow.enable_eager_execution(True)

    @flow.global_function()
    def pick(table: tp.Numpy.Placeholder((4, 3)), rows: tp.Numpy.Placeholder((2,), dtype=flow.int32)) -> tp.Numpy:
        return flow.gather(table, rows, name="pick_rows")

    table = np.arange(12, dtype=np.float32).reshape(4, 3)
    with pytest.raises(StepError, match=r"job 'pick', op 'pick_rows' \(gather\) at .*test_eager_legacy.py:\d+: "
                                        r"kernel failed in eager mode: IndexError"):
        pick(table, np.array([1, 9], np.int32))
    assert np.array_equal(pick(table, np.array([3, 0], np.int32)), table[[3, 0]])


def test_a_shape_error_names_the_op_and_the_session_goes_on():
    flow.enable_eager_execution(True)
    calls: list[int] = []

    @flow.global_function()
    def bad(x: tp.Numpy.Placeholder((B, D))) -> tp.Numpy:
        calls.append(1)
        w = flow.get_variable("w_bad", shape=(D + 1, 2), initializer=flow.ones_initializer())
        return flow.matmul(x, w, name="mismatch")

    @flow.global_function()
    def good(x: tp.Numpy.Placeholder((B, D))) -> tp.Numpy:
        return flow.math.reduce_sum(x, axis=1)

    with pytest.raises(OpBuildError, match=r"job 'bad', op 'mismatch' \(matmul\)"):
        bad(XS[0])
    assert np.array_equal(good(XS[0]), XS[0].sum(axis=1))


def test_switching_modes_keeps_training_on_the_same_variables():
    """Two lazy steps, two eager ones, one lazy again: bitwise the all-lazy run. (Without dropout: a random
    stream belongs to the kernel drawing it, and lazy and eager mode build their own, as a new plan would.)"""
    reference_losses, reference_vars = run_twin(False, momentum, dropout=False)
    flow.clear_default_session()
    train = mlp_job(momentum, dropout=False)
    losses = []
    for step, (x, y) in enumerate(zip(XS, YS)):
        flow.enable_eager_execution(step in (2, 3))
        assert flow.eager_execution_enabled() is (step in (2, 3))
        losses.append(train(x, y))
    assert [v.tobytes() for v in losses] == [v.tobytes() for v in reference_losses]
    assert_bitwise(reference_vars, variables())


def test_eager_switch_arguments():
    assert flow.eager_execution_enabled() is False
    flow.enable_eager_execution()
    assert flow.eager_execution_enabled() is True
    with pytest.raises(FlowjobError, match="expects True or False"):
        flow.enable_eager_execution("yes")
    assert flow.eager_execution_enabled() is True


def test_mirrored_arguments_take_the_fed_shape_and_several_devices_are_refused():
    flow.enable_eager_execution(True)
    shapes: list[tuple[int, ...]] = []

    @flow.global_function()
    def job(x: tp.ListNumpy.Placeholder((B, D))) -> tp.ListNumpy:
        shapes.append(x.shape)
        return flow.nn.relu(x)

    got = job([XS[0][:3]])  # fewer rows than declared: legacy's dynamic blob
    assert shapes == [(3, D)] and len(got) == 1 and np.array_equal(got[0], np.maximum(XS[0][:3], 0))
    assert np.array_equal(job([XS[1]])[0], np.maximum(XS[1], 0))
    flow.enable_eager_execution(False)  # lazy mode plans the declared shapes, not the first eager call's
    assert job.ensure_traced().placeholders[0].spec.shape == (B, D)
    assert np.array_equal(job([XS[2][:5]])[0], np.maximum(XS[2][:5], 0))
    assert np.array_equal(job([XS[2]])[0], np.maximum(XS[2], 0))
    flow.enable_eager_execution(True)
    flow.config.cpu_device_num(2)
    with pytest.raises(FlowjobError, match=r"global function 'job': mirrored arguments over several devices"):
        job([XS[0][:4], XS[0][4:]])


def test_summaries_written_in_eager_mode_read_back(tmp_path):
    from tensorboard.backend.event_processing import event_accumulator

    flow.enable_eager_execution(True)

    @flow.global_function()
    def create_writer():
        flow.summary.create_summary_writer(str(tmp_path))

    @flow.global_function()
    def scalar_job(value: tp.ListNumpy.Placeholder((1,), dtype=flow.float),
                   step: tp.ListNumpy.Placeholder((1,), dtype=flow.int64),
                   tag: tp.ListNumpy.Placeholder((1000,), dtype=flow.int8)):
        flow.summary.scalar(value, step, tag)

    @flow.global_function()
    def flush():
        flow.summary.flush_summary_writer()

    create_writer()
    tag = np.frombuffer(b"eager_loss", dtype=np.int8)
    for i in range(3):
        scalar_job([np.array([i * 0.25], np.float32)], [np.array([i], np.int64)], [tag])
    flush()
    flow.sync_default_session()
    acc = event_accumulator.EventAccumulator(str(tmp_path), size_guidance={event_accumulator.TENSORS: 0})
    acc.Reload()
    assert [(e.step, e.value) for e in acc.Scalars("eager_loss")] == [(i, i * 0.25) for i in range(3)]


def documentation_program(steps: int) -> list[np.ndarray]:
    """The shape of legacy's eager_mlp_mnist.py: the job is defined inside the function called every step
    (so each step makes a new global function of the same code), SGD, a checkpoint initialized first."""
    batch = MNIST_BATCH
    rng = np.random.default_rng(5)
    images = [rng.standard_normal((batch, 1, 28, 28)).astype(np.float32) for _ in range(steps)]
    labels = [rng.integers(0, 10, batch).astype(np.int32) for _ in range(steps)]

    def main(images: np.ndarray, labels: np.ndarray) -> np.ndarray:
        @flow.global_function(type="train")
        def train_job(images: tp.Numpy.Placeholder((MNIST_BATCH, 1, 28, 28), dtype=flow.float),
                      labels: tp.Numpy.Placeholder((MNIST_BATCH,), dtype=flow.int32)) -> tp.Numpy:
            with flow.scope.placement("cpu", "0:0"):
                initializer = flow.truncated_normal(0.1)
                reshape = flow.reshape(images, [images.shape[0], -1])
                hidden = flow.layers.dense(reshape, 64, activation=flow.nn.relu, kernel_initializer=initializer,
                                           name="dense1")
                logits = flow.layers.dense(hidden, 10, kernel_initializer=initializer, name="dense2")
                loss = flow.nn.sparse_softmax_cross_entropy_with_logits(labels, logits)
            flow.optimizer.SGD(flow.optimizer.PiecewiseConstantScheduler([], [0.1]), momentum=0).minimize(loss)
            return loss

        return train_job(images, labels)

    flow.train.CheckPoint().init()
    return [main(i, lab) for i, lab in zip(images, labels)]


def test_the_documentations_eager_program_trains_as_its_lazy_twin():
    flow.enable_eager_execution(False)
    lazy = documentation_program(4)
    lazy_vars = variables()
    flow.clear_default_session()
    flow.enable_eager_execution(True)
    eager = documentation_program(4)
    assert [v.tobytes() for v in lazy] == [v.tobytes() for v in eager]
    assert_bitwise(lazy_vars, variables())
    assert eager[-1].mean() < eager[0].mean()
    # each step's new train_job took over the kernels and the step of the one it replaced
    current = get_default_session().functions["train_job"]
    assert "_eager_step" in current.__dict__ and "_eager_step" not in current.replaced.__dict__


def test_a_body_that_changes_gets_a_new_step():
    """The body runs on every call: Python branches on values and a learning rate read from the program
    change what the step does (the cached step is reused only for the same recorded job)."""
    flow.enable_eager_execution(True)

    @flow.global_function()
    def branch(x: tp.Numpy.Placeholder((2, 3))) -> tp.Numpy:
        return x * 2 if x.numpy().sum() > 0 else x - 1

    ones = np.ones((2, 3), np.float32)
    for sign in (1, -1, 1, -1):
        got = branch(sign * ones)
        assert np.array_equal(got, sign * ones * 2 if sign > 0 else sign * ones - 1)

    rate = [0.1]

    @flow.global_function(type="train")
    def train(x: tp.Numpy.Placeholder((B, D))) -> tp.Numpy:
        w = flow.get_variable("w_rate", shape=(D, 1), initializer=flow.ones_initializer())
        loss = flow.math.reduce_mean(flow.matmul(x, w))
        flow.optimizer.SGD(flow.optimizer.PiecewiseConstantScheduler([], [rate[0]]), momentum=0).minimize(loss)
        return loss

    before = np.ones((D, 1), np.float32)  # the initializer's value; the body declares the variable
    train(XS[0])
    step1 = variables()["w_rate"]
    rate[0] = 1.0
    train(XS[0])
    step2 = variables()["w_rate"]
    gradient = XS[0].mean(axis=0, keepdims=True).T
    np.testing.assert_allclose(before - step1, 0.1 * gradient, rtol=1e-5)
    np.testing.assert_allclose(step1 - step2, 1.0 * gradient, rtol=1e-5)  # not the first call's rate

    use_square = [True]

    @flow.global_function(type="train")
    def shaped(x: tp.Numpy.Placeholder((1, 2))) -> tp.Numpy:
        w = flow.get_variable("w_shape", shape=(2,), initializer=flow.ones_initializer())
        y = x * w
        z = flow.math.square(y) if use_square[0] else flow.math.exp(y)  # the same node count either way
        loss = flow.math.reduce_sum(z)
        flow.optimizer.SGD(flow.optimizer.PiecewiseConstantScheduler([], [0.1]), momentum=0).minimize(loss)
        return loss

    x = np.array([[0.5, -1.0]], np.float32)
    shaped(x)
    w1 = variables()["w_shape"]
    np.testing.assert_allclose(w1, 1 - 0.1 * 2 * x[0] * x[0], rtol=1e-6)  # d/dw (x w)^2 = 2 x^2 w
    use_square[0] = False
    shaped(x)
    np.testing.assert_allclose(variables()["w_shape"], w1 - 0.1 * x[0] * np.exp(x[0] * w1), rtol=1e-6)


def test_seeded_data_sources_go_on_from_step_to_step():
    """A decode_random node draws the next batch on every call, as its lazy twin's kernel does."""
    def run(eager: bool) -> list[np.ndarray]:
        flow.clear_default_session()
        flow.enable_eager_execution(eager)

        @flow.global_function()
        def batches() -> tp.Numpy:
            return flow.data.decode_random((3,), flow.float, batch_size=2,
                                           initializer=flow.random_normal_initializer(1.0, 0.5, seed=9))

        return [batches() for _ in range(3)]

    lazy, eager = run(False), run(True)
    assert [v.tobytes() for v in lazy] == [v.tobytes() for v in eager]
    assert not np.array_equal(eager[0], eager[1])


def test_the_numerics_check_names_the_first_op_giving_nan_in_the_body():
    from flowjob_core.plan.numerics import NumericsError

    flow.enable_eager_execution(True)
    flow.config.enable_numerics_check(True)
    seen: list[int] = []

    @flow.global_function()
    def logs(x: tp.Numpy.Placeholder((2, 2))) -> tp.Numpy:
        y = flow.math.log(x, name="log_of_x")
        seen.append(1)  # not reached when the log gives NaN: the check stops the body at that op
        return y + 1

    with pytest.raises(NumericsError, match=r"log_of_x.*job 'logs'|job 'logs'.*log_of_x"), \
            np.errstate(invalid="ignore"):  # numpy's own warning; the check is what this test is about
        logs(-np.ones((2, 2), np.float32))
    assert seen == []
    assert np.array_equal(logs(np.ones((2, 2), np.float32)), np.ones((2, 2), np.float32))


def test_ops_whose_rows_the_data_decide_are_refused_naming_the_op():
    flow.enable_eager_execution(True)

    @flow.global_function()
    def where(x: tp.Numpy.Placeholder((4,))) -> tp.Numpy:
        return flow.argwhere(x, name="positions")

    with pytest.raises(FlowjobError, match=r"job 'where', op 'positions' \(argwhere\).*not run in eager mode"):
        where(np.array([0, 1, 0, 2], np.float32))
    flow.enable_eager_execution(False)
    assert where(np.array([0, 1, 0, 2], np.float32)).ravel().tolist() == [1, 3]


def test_calls_from_several_threads_take_turns():
    import threading

    flow.enable_eager_execution(True)

    @flow.global_function()
    def scaled(x: tp.Numpy.Placeholder((B, D))) -> tp.Numpy:
        h = flow.nn.relu(x)
        return h * 3

    inputs = [RNG.standard_normal((B, D)).astype(np.float32) for _ in range(8)]
    results: dict[int, list[np.ndarray]] = {}

    def worker(k: int) -> None:
        results[k] = [scaled(inputs[k]) for _ in range(20)]

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(len(inputs))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for k, got in results.items():
        for value in got:
            assert np.array_equal(value, np.maximum(inputs[k], 0) * 3)


def test_a_checkpoint_before_the_first_eager_call_of_a_body_reading_values_says_what_to_do():
    flow.enable_eager_execution(True)

    @flow.global_function()
    def job(x: tp.Numpy.Placeholder((2,))) -> tp.Numpy:
        w = flow.get_variable("w_first", shape=(2,), initializer=flow.ones_initializer())
        y = x * w
        assert y.numpy().shape == (2,)
        return y

    with pytest.raises(FlowjobError, match=r"traced without running.*call the job once before them"):
        flow.train.CheckPoint().init()
    assert np.array_equal(job(np.full(2, 3, np.float32)), np.full(2, 3, np.float32))
    flow.train.CheckPoint().init()  # the first call's job is the function's: no second trace
