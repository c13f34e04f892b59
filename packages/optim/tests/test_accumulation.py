"""Gradient accumulation's ops and the optimizer pass's graph for N > 1, on the toy plugin."""
import numpy as np
import pytest

from flowjob_core import BlobSpec, FunctionConfig, KernelContext, ShapeError, apply, get_variable
from flowjob_core.ir.kernel import kernel_of
from flowjob_core.backends.numpy_backend import make_backend
from flowjob_optim import accumulation
from flowjob_optim import api as opt
from flowjob_optim.update_ops import CLIP_FACTOR, SGD_UPDATE, STEP_INCREMENT

F32 = BlobSpec((3,), np.float32)
COUNTER = accumulation.COUNTER_SPEC


def kernel(opdef, inputs, attrs):
    outs = opdef.infer(tuple(inputs), attrs)
    buffers = [np.empty(s.shape, s.dtype) for s in outs]
    backend = make_backend()
    ctx = KernelContext(np, backend, opdef.name, "node", attrs, tuple(inputs), tuple(outs), "train",
                        lambda name: None, lambda k: buffers[k], {})
    return opdef.kernel(ctx)


def counter(value):
    return np.array([value], np.int64)


def test_accumulate_restarts_each_cycle_and_scales():
    run = kernel(accumulation.GRAD_ACCUMULATE, [F32, F32, COUNTER], {"accumulation_steps": 3, "scale": 0.5})
    acc = np.full(3, 100.0, np.float32)
    g = np.array([2.0, 4.0, -6.0], np.float32)
    np.testing.assert_array_equal(run(acc, g, counter(0)), [1.0, 2.0, -3.0])  # the stale sum is ignored
    np.testing.assert_array_equal(run(acc, g, counter(4)), [101.0, 102.0, 97.0])
    np.testing.assert_array_equal(run(acc, g, counter(6)), [1.0, 2.0, -3.0])
    assert acc.tolist() == [100.0, 100.0, 100.0]  # a pure op: the store keeps sums


def test_store_skips_the_last_call_of_a_cycle():
    run = kernel(accumulation.GRAD_ACCUMULATE_STORE, [F32, F32, COUNTER], {"accumulation_steps": 2})
    acc = np.zeros(3, np.float32)
    run(acc, np.ones(3, np.float32), counter(1))
    assert acc.tolist() == [0.0, 0.0, 0.0]
    run(acc, np.ones(3, np.float32), counter(2))
    assert acc.tolist() == [1.0, 1.0, 1.0]


def test_gated_update_clip_and_increment_run_on_the_last_call_only():
    gate = {"accumulation_steps": 3}
    lr = BlobSpec((1,), np.float32)
    update = kernel(SGD_UPDATE, [F32, F32, lr, COUNTER], {"weight_decay": 0.0, **gate})
    w = np.ones(3, np.float32)
    for c in (0, 1, 3, 4):
        update(w, np.ones(3, np.float32), np.array([0.5], np.float32), counter(c))
        assert w.tolist() == [1.0, 1.0, 1.0]
    update(w, np.ones(3, np.float32), np.array([0.5], np.float32), counter(5))
    assert w.tolist() == [0.5, 0.5, 0.5]

    step = np.zeros(1, np.int64)
    increment = kernel(STEP_INCREMENT, [COUNTER, COUNTER], gate)
    for c in range(6):
        increment(step, counter(c))
    assert step.tolist() == [2]

    clip = kernel(CLIP_FACTOR, [F32, COUNTER], {"clip_norm": 1.0, **gate})
    assert clip(np.full(3, 4.0, np.float32), counter(0)) is None
    np.testing.assert_allclose(clip(np.full(3, 4.0, np.float32), counter(2)), [1.0 / np.sqrt(48.0)], rtol=1e-6)


@pytest.mark.parametrize("inputs, attrs, message", [
    ([F32, F32], {"accumulation_steps": 2}, "3 inputs"),
    ([F32, F32, BlobSpec((1,), np.int32)], {"accumulation_steps": 2}, "int64"),
    ([F32, BlobSpec((2,), np.float32), COUNTER], {"accumulation_steps": 2}, "must match"),
    ([F32, F32, COUNTER], {}, ">= 2"),
])
def test_accumulate_infer_errors(inputs, attrs, message):
    with pytest.raises(ShapeError, match=message):
        accumulation.GRAD_ACCUMULATE.infer(tuple(inputs), attrs)


def test_a_gated_update_needs_the_counter_last():
    lr = BlobSpec((1,), np.float32)
    with pytest.raises(ShapeError, match="micro-step counter"):
        SGD_UPDATE.infer((F32, F32, lr), {"accumulation_steps": 2})
    assert SGD_UPDATE.infer((F32, F32, lr, COUNTER), {"accumulation_steps": 2}) == []


def accumulating_job(toy, n, clip=False):
    def train(x: toy.Array((2,))) -> toy.Sync:
        w = get_variable("w", shape=(2,), initializer=lambda s, d, r: np.ones(s, d))
        loss = apply("toy_square", [apply("toy_sub", [w, x])])
        clipping = opt.grad_clipping.by_global_norm(1.0) if clip else None
        opt.SGD(opt.PiecewiseConstantScheduler([], [0.5]), momentum=0.0, grad_clipping=clipping).minimize(loss)
        return loss

    cfg = FunctionConfig()
    cfg.train.num_gradient_accumulation_steps(n)
    return train, cfg


def test_pass_gates_every_once_per_update_node(define, toy, session):
    train, cfg = accumulating_job(toy, 2, clip=True)
    job = define(train, config=cfg)
    job(np.zeros(2, np.float32))
    nodes = {n.op: n for n in job.plan().order}
    for op in ("optim_sgd_update", "optim_clip_by_global_norm", "optim_grad_accumulate",
               "optim_grad_accumulate_store"):
        assert nodes[op].attrs["accumulation_steps"] == 2, op
        assert nodes[op].inputs[-1] == "System-GradientAccumulation-MicroStep-train/out", op
    # the accumulator reads the raw gradient and applies 1 / (N * loss elements) itself
    assert nodes["optim_grad_accumulate"].attrs["scale"] == pytest.approx(1 / (2 * 2))
    assert "scalar_mul" not in {n.op for n in job.plan().order if n.name.endswith("_grad_scaled")}
    increments = [n for n in job.plan().order if n.op == "optim_train_step_increment"]
    assert sorted(bool(n.attrs) for n in increments) == [False, True]  # the micro counter is never gated


def test_pass_two_calls_give_the_mean_gradient(define, toy, session):
    train, cfg = accumulating_job(toy, 2)
    job = define(train, config=cfg)
    job(np.zeros(2, np.float32))  # grad of sum (w - x)^2 / 2 elements: (w - x) = 1
    assert session.variables.get("w").tolist() == [1.0, 1.0]
    job(np.full(2, 3.0, np.float32))  # (w - x) = -2
    # mean of the two gradients: (1 + -2) / 2 = -0.5; w = 1 - 0.5 * -0.5
    assert session.variables.get("w").tolist() == [1.25, 1.25]
    assert session.variables.get("System-Train-TrainStep-train").tolist() == [1]


def test_the_learning_rate_and_the_gates_say_they_work_on_the_host():
    # a backend that records steps for replay (CUDA graphs) runs such nodes live, every step
    from flowjob_optim.update_ops import LEARNING_RATE

    assert LEARNING_RATE.effects.host_state
    assert accumulation.GRAD_ACCUMULATE.effects.host_state and accumulation.GRAD_ACCUMULATE_STORE.effects.host_state
    on_last = kernel_of(accumulation.gated(lambda *a: None, {accumulation.STEPS_ATTR: 2}))
    assert on_last.host_state and on_last.gated  # sits out micro-batches: the output check waits
    if_finite = kernel_of(accumulation.gated(lambda *a: None, {accumulation.SKIP_ATTR: True}))
    assert if_finite.host_state and not if_finite.gated
    both = kernel_of(accumulation.gated(lambda *a: None, {accumulation.STEPS_ATTR: 2, accumulation.SKIP_ATTR: True}))
    assert both.host_state and both.gated
    assert accumulation.gated(print, {}) is print  # ungated: the kernel itself
    assert not SGD_UPDATE.effects.host_state
