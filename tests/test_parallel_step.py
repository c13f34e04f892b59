"""A LeNet-like training step on two host threads: the planner puts a convolution's filter gradient beside
its data gradient on another lane; the step gives the same bits run after run, and the one-thread step's
values to float32 rounding.

Not bit for bit the one-thread step: BLAS's own thread count changes a large product's last bits (OpenBLAS
cuts it differently on one and on two threads; before lanes existed, ``OPENBLAS_NUM_THREADS`` 1 and 2 differed
so too), and a chain of nodes gives BLAS every thread. Inside a lanes section each node runs with one BLAS
thread, as on the one-thread step; the property test of the pass pipeline (products too small for BLAS to
thread) checks the lanes bit for bit against one thread."""
from __future__ import annotations

import numpy as np
import pytest

import oneflow as flow
import oneflow.typing as tp
from flowjob_core import get_default_session

BATCH = 16
STEPS = 3


def _train(threads: int, monkeypatch: pytest.MonkeyPatch) -> tuple[list[np.ndarray], dict[str, np.ndarray], object]:
    monkeypatch.setenv("FLOWJOB_HOST_THREADS", str(threads))
    flow.clear_default_session()
    init = flow.random_normal_initializer(stddev=0.1, seed=1)

    @flow.global_function(type="train")
    def step(images: tp.Numpy.Placeholder((BATCH, 1, 28, 28)),
             labels: tp.Numpy.Placeholder((BATCH,), dtype=flow.int32)) -> tp.Numpy:
        x = flow.layers.conv2d(images, 32, 5, padding="SAME", activation=flow.nn.relu, kernel_initializer=init,
                               name="conv1")
        x = flow.nn.max_pool2d(x, 2, 2, "SAME")
        x = flow.layers.conv2d(x, 64, 5, padding="SAME", activation=flow.nn.relu, kernel_initializer=init,
                               name="conv2")
        x = flow.nn.max_pool2d(x, 2, 2, "SAME")
        x = flow.reshape(x, [BATCH, -1])
        logits = flow.layers.dense(x, 10, kernel_initializer=init, name="dense")
        loss = flow.nn.sparse_softmax_cross_entropy_with_logits(labels, logits)
        flow.optimizer.SGD(flow.optimizer.PiecewiseConstantScheduler([], [0.05]), momentum=0.9).minimize(loss)
        return loss

    rng = np.random.default_rng(0)
    images = rng.random((BATCH, 1, 28, 28), dtype=np.float32)
    labels = rng.integers(0, 10, BATCH).astype(np.int32)
    losses = [np.array(step(images, labels), copy=True) for _ in range(STEPS)]
    variables = get_default_session().variables
    values = {name: np.array(variables.get(name), copy=True) for name in variables.names()}
    plan = step.plan()
    flow.clear_default_session()
    return losses, values, plan


def test_two_threads_run_conv_gradients_side_by_side_with_the_one_thread_values(monkeypatch):
    monkeypatch.setenv("FLOWJOB_GPU_EMULATION", "0")  # lanes are the numpy backend's host threads
    want_losses, want_values, serial = _train(1, monkeypatch)
    got_losses, got_values, plan = _train(2, monkeypatch)
    again_losses, again_values, _ = _train(2, monkeypatch)
    assert serial.lanes is None
    assert plan.lanes is not None
    lane_of = {node.name: plan.lanes.lane_of[p] for p, node in enumerate(plan.order)}
    section_of = {node.name: next(k for k, s in enumerate(plan.lanes.sections) if s.start <= p < s.stop)
                  for p, node in enumerate(plan.order)}
    pairs = [(d.name, f.name) for d in plan.order if d.op == "conv2d_grad_data"
             for f in plan.order if f.op == "conv2d_grad_filter" and f.inputs[1] == d.inputs[0]]
    assert pairs, "a convolution with both gradients"
    assert any(section_of[d] == section_of[f] and plan.lanes.sections[section_of[d]].parallel
               and lane_of[d] != lane_of[f] for d, f in pairs), "the two gradients of a convolution side by side"
    for got, again, want in zip(got_losses, again_losses, want_losses):
        np.testing.assert_array_equal(got, again)  # the same schedule, the same bits
        np.testing.assert_allclose(got, want, rtol=1e-5)
    assert got_values.keys() == want_values.keys()
    for name, want in want_values.items():
        np.testing.assert_array_equal(got_values[name], again_values[name], err_msg=name)
        np.testing.assert_allclose(got_values[name], want, rtol=1e-4, atol=1e-6, err_msg=name)


def test_a_conv_plan_holds_blas_to_one_thread_and_cuts_its_large_products(monkeypatch):
    # convolutions cut their own work over the host threads, so the plan keeps BLAS to one thread (OpenBLAS's
    # spinning workers took the cores those parts needed) and cuts the dense layer's products and its fused SGD
    # update over the threads instead; the values are the one-thread step's to float32 rounding
    from flowjob_core.backends.host_gemm import gemm_split

    monkeypatch.setenv("FLOWJOB_GPU_EMULATION", "0")

    def train(threads: int) -> tuple[np.ndarray, np.ndarray, int, bool]:
        monkeypatch.setenv("FLOWJOB_HOST_THREADS", str(threads))
        flow.clear_default_session()
        init = flow.random_normal_initializer(stddev=0.05, seed=2)

        @flow.global_function(type="train")
        def step(images: tp.Numpy.Placeholder((BATCH, 1, 28, 28))) -> tp.Numpy:
            x = flow.layers.conv2d(images, 8, 3, padding="SAME", activation=flow.nn.relu, kernel_initializer=init,
                                   name="conv")
            x = flow.reshape(flow.nn.max_pool2d(x, 2, 2, "SAME"), [BATCH, -1])
            y = flow.layers.dense(x, 512, kernel_initializer=init, name="wide")
            loss = flow.math.reduce_mean(y * y)
            flow.optimizer.SGD(flow.optimizer.PiecewiseConstantScheduler([], [0.1]), momentum=0).minimize(loss)
            return loss

        images = np.random.default_rng(3).random((BATCH, 1, 28, 28), dtype=np.float32)
        losses = np.array([np.array(step(images), copy=True) for _ in range(STEPS)])
        backend = get_default_session().backend
        chain = backend.lanes.blas.chain
        weight = np.array(get_default_session().variables.get("wide-weight"), copy=True)
        cut = gemm_split(backend) is not None  # the plan's product kernels were built to cut
        flow.clear_default_session()
        return losses, weight, chain, cut

    want_losses, want_weight, one_chain, one_cut = train(1)
    got_losses, got_weight, chain, cut = train(2)
    assert one_chain == 1 and chain == 1
    assert cut and not one_cut  # one thread: each product one whole call
    np.testing.assert_allclose(got_losses, want_losses, rtol=1e-5)
    np.testing.assert_allclose(got_weight, want_weight, rtol=1e-4, atol=1e-6)


@pytest.mark.parametrize("make_optimizer", [
    lambda lr: flow.optimizer.Adam(lr),
    lambda lr: flow.optimizer.SGD(lr, momentum=0.9),
    lambda lr: flow.optimizer.RMSProp(lr, centered=True),
], ids=["adam", "momentum", "rmsprop-centered"])
def test_a_large_variable_updates_in_blocks_with_the_bits_of_the_whole_update(monkeypatch, make_optimizer):
    # an elementwise update of a large variable runs block by block (on one thread too), the blocks shared
    # over the host threads: the same bits as the update of the whole variable in one go
    import flowjob_optim.cpu_update_blocks as update_blocks

    monkeypatch.setenv("FLOWJOB_GPU_EMULATION", "0")
    rows = 1 << 11  # a 2048 x 512 table: 1M elements, eight blocks
    built_in_blocks: list[bool] = []
    in_blocks = update_blocks.in_blocks

    def spy(*args, **kwargs):
        kernel = in_blocks(*args, **kwargs)
        built_in_blocks.append(kernel is not None)
        return kernel

    def train(threads: int) -> np.ndarray:
        monkeypatch.setenv("FLOWJOB_HOST_THREADS", str(threads))
        flow.clear_default_session()

        @flow.global_function(type="train")
        def step(ids: tp.Numpy.Placeholder((64,), dtype=flow.int32)) -> tp.Numpy:
            table = flow.get_variable("table", shape=(rows, 512),
                                      initializer=flow.random_normal_initializer(stddev=0.1, seed=4))
            loss = flow.math.reduce_mean(flow.math.square(flow.gather(table, ids)))
            make_optimizer(flow.optimizer.PiecewiseConstantScheduler([], [0.01])).minimize(loss)
            return loss

        ids = np.random.default_rng(5).integers(0, rows, 64).astype(np.int32)
        for _ in range(STEPS):
            step(ids)
        table = np.array(get_default_session().variables.get("table"), copy=True)
        flow.clear_default_session()
        return table

    monkeypatch.setattr(update_blocks, "in_blocks", lambda *args, **kwargs: None)
    want = train(1)  # the whole variable in one update
    monkeypatch.setattr(update_blocks, "in_blocks", spy)
    one_thread = train(1)
    two_threads = train(2)
    assert built_in_blocks == [True, True]
    np.testing.assert_array_equal(one_thread, want)
    np.testing.assert_array_equal(two_threads, want)
