"""A train job is plain data, with every optimizer, schedule, warmup, regularizer, clipping and loss scale:
the objects it needs are keys of the global function's bindings, so it deep-copies, compares equal to
its copy and holds no callable or user object, traced and after every pass."""
import numpy as np
import pytest

from flowjob_core import FunctionConfig, add_loss, apply, get_variable
from flowjob_core.testing.plain_data import traced_and_passed
from flowjob_optim import api as opt
from flowjob_optim.regularizers import l1, l1_l2, l2

SHAPE = (3, 4)
X = np.linspace(-1, 1, 12, dtype=np.float32).reshape(SHAPE)
PIECEWISE = opt.PiecewiseConstantScheduler([2], [0.1, 0.01])

OPTIMIZERS = {
    "SGD": lambda: opt.SGD(PIECEWISE, momentum=0),
    "momentum": lambda: opt.SGD(PIECEWISE, momentum=0.9),
    "SGDW": lambda: opt.SGDW(PIECEWISE, weight_decay=0.01, weight_decay_excludes=["^b$"]),
    "Adam": lambda: opt.Adam(PIECEWISE),
    "Adam bias-corrected": lambda: opt.Adam(PIECEWISE, do_bias_correction=True),
    "AdamW": lambda: opt.AdamW(PIECEWISE, weight_decay=0.01, weight_decay_includes="w"),
    "LazyAdam": lambda: opt.LazyAdam(PIECEWISE),
    "RMSProp": lambda: opt.RMSProp(PIECEWISE),
    "RMSProp centered": lambda: opt.RMSProp(PIECEWISE, centered=True),
    "LARS": lambda: opt.LARS(PIECEWISE, weight_decay=0.01),
    "LAMB": lambda: opt.LAMB(PIECEWISE, weight_decay=0.01),
}
SCHEDULES = {
    "constant": lambda: opt.LrScheduler(0.1),
    "piecewise constant": lambda: opt.PiecewiseConstantScheduler([2, 4], [0.1, 0.05, 0.01]),
    "piecewise scaling": lambda: opt.PiecewiseScalingScheduler(0.1, [2, 4], [0.5, 0.1]),
    "cosine": lambda: opt.CosineScheduler(0.1, 10, alpha=0.1),
    "linear cosine": lambda: opt.LinearCosineScheduler(0.1, 10),
    "polynomial": lambda: opt.PolynomialScheduler(0.1, 10, cycle=True),
    "exponential": lambda: opt.ExponentialScheduler(0.1, 10, 0.9, staircase=True),
    "inverse time": lambda: opt.InverseTimeScheduler(0.1, 10, 0.5),
    "natural exp": lambda: opt.NaturalExpScheduler(0.1, 10, 0.5),
    "constant warmup": lambda: opt.CosineScheduler(0.1, 10, warmup=opt.warmup.constant(3, 0.1)),
    "linear warmup": lambda: opt.PiecewiseConstantScheduler([5], [0.1, 0.01], warmup=opt.warmup.linear(3, 0.1)),
}


def _train(optimizer, regularizers=(None, None)):
    """loss = (w - x - b)^2; ``optimizer()`` is called in the body (it may read the job's variables)."""
    def train(x):
        w = get_variable("w", shape=SHAPE, initializer=lambda s, d, r: np.ones(s, d), regularizer=regularizers[0])
        b = get_variable("b", shape=SHAPE, initializer=lambda s, d, r: np.zeros(s, d), regularizer=regularizers[1])
        loss = apply("toy_square", [apply("toy_sub", [apply("toy_sub", [w, x]), b])])
        optimizer().minimize(loss)
        return w

    return train


def _custom_rate():
    rate = get_variable("rate", shape=(1,), initializer=lambda s, d, r: np.full(s, 0.1, d), trainable=False)
    return opt.SGD(opt.CustomScheduler(rate), momentum=0.9)


def _define(define, toy, body, config=None):
    def job(x: toy.Array(SHAPE)) -> toy.Sync:
        return body(x)

    return define(job, config=config)


def _assert_plain_data(session, fn):
    traced, final = traced_and_passed(fn)
    fn(X)  # and it trains: the keys resolve when the plan is built
    return traced, final


@pytest.mark.parametrize("name", sorted(OPTIMIZERS))
def test_a_train_job_is_plain_data_with_every_optimizer(define, toy, session, name):
    fn = _define(define, toy, _train(OPTIMIZERS[name]))
    traced, final = _assert_plain_data(session, fn)
    (minimize,) = [i for i in traced.intents if i.kind == "minimize"]
    optimizer = fn.bindings[minimize.payload["optimizer"]]
    assert minimize.payload == {"optimizer": f"{type(optimizer).__name__}#0"}
    (rate,) = [n for n in final.nodes if n.op == "optim_learning_rate"]
    assert fn.bindings[rate.attrs["schedule"]] is optimizer.lr_scheduler


@pytest.mark.parametrize("name", sorted(SCHEDULES))
def test_a_train_job_is_plain_data_with_every_schedule_and_warmup(define, toy, session, name):
    schedule = SCHEDULES[name]()
    fn = _define(define, toy, _train(lambda: opt.Adam(schedule)))
    _, final = _assert_plain_data(session, fn)
    (rate,) = [n for n in final.nodes if n.op == "optim_learning_rate"]
    assert fn.bindings[rate.attrs["schedule"]] is schedule


@pytest.mark.parametrize("policy", [{"loss_scale_factor": 8.0},
                                    {"loss_scale_policy": opt.loss_scale.dynamic_loss_scale(2.0 ** 10, 2)}])
def test_regularizers_clipping_and_loss_scale_are_named_by_keys_too(define, toy, session, policy):
    optimizer = opt.SGD(PIECEWISE, momentum=0.9, grad_clipping=opt.grad_clipping.by_global_norm(1.0), **policy)
    fn = _define(define, toy, _train(lambda: optimizer, (l1_l2(0.01, 0.02), l2(0.1))))
    traced, final = _assert_plain_data(session, fn)
    keys = {name: traced.variables[name].regularizer for name in ("w", "b")}
    assert fn.bindings[keys["w"]] == l1_l2(0.01, 0.02) and fn.bindings[keys["b"]] == l2(0.1)
    assert {n.op for n in final.nodes} >= {"optim_clip_by_global_norm", "optim_momentum_update"}


def test_a_custom_schedule_and_a_version_01_config_keep_the_job_plain_data(define, toy, session):
    custom = _define(define, toy, _train(_custom_rate, (l1(0.01), None)))
    _, final = _assert_plain_data(session, custom)
    assert not [n for n in final.nodes if n.op == "optim_learning_rate"]  # the body computes the rate
    cfg = FunctionConfig()
    cfg.train.primary_lr(0.1)
    cfg.train.secondary_lr(0.2)
    cfg.train.model_update_conf({"momentum_conf": {"beta": 0.9}, "warmup_conf": {"linear_conf": {
        "warmup_batches": 2, "start_multiplier": 0.5}}, "clip_conf": {"clip_by_global_norm": {"clip_norm": 1.0}}})
    cfg.train.num_gradient_accumulation_steps(2)
    cfg.train.loss_scale_factor(4.0)
    cfg.train.bias_l2(0.01)

    def v01(x):
        w = get_variable("w", shape=SHAPE, initializer=lambda s, d, r: np.ones(s, d))
        bias = get_variable("bias", shape=SHAPE, initializer=lambda s, d, r: np.zeros(s, d))
        add_loss(apply("toy_square", [apply("toy_sub", [apply("toy_sub", [w, x]), bias])]))
        return w

    fn = _define(define, toy, v01, cfg)
    traced, final = _assert_plain_data(session, fn)
    assert traced.config.section("train").get("primary_lr") == 0.1 and not traced.intents
    rates = [fn.bindings[n.attrs["schedule"]] for n in final.nodes if n.op == "optim_learning_rate"]
    assert sorted(r.base_lr for r in rates) == [0.1, 0.2]  # primary and secondary rate
