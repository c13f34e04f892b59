"""flow.optimizer.CombinedOptimizer: members over disjoint variables, each variable updated as its member alone
would update it; and legacy's misspelt PolynomialSchduler."""
import numpy as np
import pytest

from flowjob_core import FlowjobError, apply, get_variable
from flowjob_optim import api as opt


def two_variable_job(toy, make_optimizer):
    def train(x: toy.Array((2,))) -> toy.Sync:
        a = get_variable("a", shape=(2,), initializer=lambda s, d, r: np.ones(s, d))
        b = get_variable("b", shape=(2,), initializer=lambda s, d, r: np.ones(s, d))
        loss = apply("toy_square", [apply("toy_sub", [apply("toy_sub", [a, x]), b])])
        make_optimizer().minimize(loss)
        return a

    return train


def lr(value):
    return opt.PiecewiseConstantScheduler([], [value])


def test_each_member_updates_its_own_variables(define, toy, session):
    job = define(two_variable_job(toy, lambda: opt.CombinedOptimizer([
        opt.SGD(lr(0.5), momentum=0.0, variables=["a"]),
        opt.Adam(lr(0.1), variables=["b"])])))
    job(np.zeros(2, np.float32))
    names = set(session.variables.names())
    assert "b-m" in names and "b-v" in names and "a-momentum" not in names and "a-m" not in names
    # loss (a - b)^2 at a = b = 1 is 0: gradients 0, so SGD leaves a and Adam's first step leaves b
    assert session.variables.get("a").tolist() == [1.0, 1.0]
    job(np.full(2, 1.0, np.float32))  # a - x - b = -1: da = -1 (over 2 elements: 2 * -1 / 2), db = +1
    assert session.variables.get("a").tolist() == [1.5, 1.5]
    # Adam (no bias correction, legacy's default) after a zero and a unit gradient: m = 0.1, v = 0.001
    np.testing.assert_allclose(session.variables.get("b"), [1 - 0.1 * 0.1 / (np.sqrt(0.001) + 1e-8)] * 2, rtol=1e-5)


def test_a_variable_claimed_twice_or_by_none_is_an_error(define, toy, session):
    both = define(two_variable_job(toy, lambda: opt.CombinedOptimizer([opt.SGD(lr(0.1)), opt.Adam(lr(0.1))])))
    with pytest.raises(FlowjobError, match=r"variable 'a' is updated by several members \(SGD, Adam\)"):
        both(np.zeros(2, np.float32))


def test_members_may_not_hold_what_a_job_has_one_of():
    with pytest.raises(ValueError, match="train_step_lbn"):
        opt.CombinedOptimizer([opt.SGD(lr(0.1), train_step_lbn="x/out")])
    with pytest.raises(ValueError, match="loss scale"):
        opt.CombinedOptimizer([opt.SGD(lr(0.1), loss_scale_factor=2.0)])
    with pytest.raises(ValueError, match="clips gradients"):
        opt.CombinedOptimizer([opt.SGD(lr(0.1), grad_clipping=opt.grad_clipping.by_global_norm(1.0))])
    with pytest.raises(ValueError, match="may not be a CombinedOptimizer"):
        opt.CombinedOptimizer([opt.CombinedOptimizer([opt.SGD(lr(0.1))])])
    with pytest.raises(ValueError, match="at least one"):
        opt.CombinedOptimizer([])


def test_the_misspelt_polynomial_scheduler_is_the_schedule():
    with pytest.warns(DeprecationWarning, match="use flow.optimizer.PolynomialScheduler"):
        misspelt = opt.PolynomialSchduler(1.0, steps=10, end_learning_rate=0.0)
    right = opt.PolynomialScheduler(1.0, steps=10, end_learning_rate=0.0)
    assert isinstance(misspelt, opt.PolynomialScheduler)
    assert [misspelt.decayed(s) for s in (0, 5, 10, 20)] == [right.decayed(s) for s in (0, 5, 10, 20)]
