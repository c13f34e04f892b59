"""Learning-rate schedules: the value per step (legacy learning_rate_schedule_kernel formulas)."""
import math

import numpy as np
import pytest

from flowjob_core import apply, get_variable
from flowjob_optim import api as opt


def values(schedule, steps=8):
    return [schedule(t) for t in range(steps)]


def test_piecewise_constant_uses_the_first_boundary_at_or_after_the_step():
    sched = opt.PiecewiseConstantScheduler([2, 4], [1.0, 0.5, 0.1])
    assert values(sched) == [1.0, 1.0, 1.0, 0.5, 0.5, 0.1, 0.1, 0.1]
    assert values(opt.PiecewiseConstantScheduler([], [0.1]), 3) == [0.1, 0.1, 0.1]


def test_piecewise_constant_checks_lengths():
    with pytest.raises(ValueError, match="len\\(values\\) == len\\(boundaries\\) \\+ 1"):
        opt.PiecewiseConstantScheduler([10], [0.1])


def test_piecewise_scaling():
    sched = opt.PiecewiseScalingScheduler(0.2, [1, 3], [0.5, 0.1])
    assert values(sched, 5) == pytest.approx([0.2, 0.2, 0.1, 0.1, 0.02])
    assert values(opt.PiecewiseScalingScheduler(1.0, [0, 1], 0.5), 3) == [1.0, 0.5, 0.5]


def test_cosine_and_linear_cosine():
    sched = opt.CosineScheduler(1.0, 4, alpha=0.2)
    want = [0.2 + 0.8 * 0.5 * (1 + math.cos(math.pi * min(t, 4) / 4)) for t in range(6)]
    assert values(sched, 6) == pytest.approx(want)
    lc = opt.LinearCosineScheduler(1.0, 4)
    want = [((4 - min(t, 4)) / 4) * 0.5 * (1 + math.cos(math.pi * min(t, 4) / 4)) + 0.001 for t in range(6)]
    assert values(lc, 6) == pytest.approx(want)


def test_polynomial_with_and_without_cycle():
    sched = opt.PolynomialScheduler(1.0, 4, end_learning_rate=0.0, power=2.0)
    assert values(sched, 6) == pytest.approx([1.0, 0.5625, 0.25, 0.0625, 0.0, 0.0])
    cyc = opt.PolynomialScheduler(1.0, 2, end_learning_rate=0.0, cycle=True)
    # step 0 counts as 1; the period grows to cover the step: d = 2 * ceil(t / 2)
    assert values(cyc, 5) == pytest.approx([0.5, 0.5, 0.0, 1 - 3 / 4, 0.0])


def test_ratio_decays():
    assert values(opt.ExponentialScheduler(1.0, 2, 0.5), 3) == pytest.approx([1.0, 0.5 ** 0.5, 0.5])
    assert values(opt.ExponentialScheduler(1.0, 2, 0.5, staircase=True), 4) == pytest.approx([1, 1, 0.5, 0.5])
    assert values(opt.InverseTimeScheduler(1.0, 1, 1.0), 3) == pytest.approx([1.0, 0.5, 1 / 3])
    assert values(opt.NaturalExpScheduler(1.0, 1, 1.0), 2) == pytest.approx([1.0, math.exp(-1)])


def test_warmups_replace_the_decay_while_active():
    lin = opt.PiecewiseConstantScheduler([5], [0.1, 0.01], warmup=opt.warmup.linear(4, 0.5))
    assert values(lin, 8) == pytest.approx([0.05, 0.0625, 0.075, 0.0875, 0.1, 0.1, 0.01, 0.01])
    const = opt.CosineScheduler(1.0, 10, warmup=opt.ConstantWarmup(2, 0.1))
    assert values(const, 3) == pytest.approx([0.1, 0.1, 0.5 * (1 + math.cos(math.pi * 0.2))])


def test_a_schedule_drives_the_update_through_the_step_counter(define, toy, session):
    """loss = w * 1 with one element: each step moves w by exactly that step's learning rate."""

    def train(x: toy.Array((1,))) -> toy.Sync:
        w = get_variable("w", shape=(1,))
        loss = apply("toy_mul", [w, x])
        sched = opt.PiecewiseConstantScheduler([1, 3], [1.0, 0.5, 0.25], warmup=opt.warmup.constant(1, 0.5))
        opt.SGD(sched, momentum=0).minimize(loss)
        return w

    job = define(train)
    seen = [float(job(np.ones(1, np.float32))[0]) for _ in range(6)]
    lrs = [0.5, 1.0, 0.5, 0.5, 0.25]
    assert seen == pytest.approx([0.0] + list(-np.cumsum(lrs)))
    assert session.variables.get("System-Train-TrainStep-train").tolist() == [6]


def test_custom_scheduler_reads_a_blob_of_the_job(define, toy, session):
    def train(x: toy.Array((1,)), lr: toy.Array((1,))) -> toy.Sync:
        w = get_variable("w", shape=(1,))
        opt.SGD(opt.CustomScheduler(lr), momentum=0).minimize(apply("toy_mul", [w, x]))
        return w

    job = define(train)
    one = np.ones(1, np.float32)
    job(one, np.array([0.25], np.float32))
    job(one, np.array([2.0], np.float32))
    assert session.variables.get("w").tolist() == [-2.25]
