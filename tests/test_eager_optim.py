"""``flow.optim`` (legacy v0.4's eager optimizers) and ``flow.optim.lr_scheduler``: each update against its formula
in numpy (legacy's own tests' references, with its argument grids), parameter groups, ``zero_grad``, the state,
and bad arguments named."""
from __future__ import annotations

import itertools
import math
from typing import Any, Callable

import numpy as np
import pytest

import oneflow as flow
import oneflow.experimental
from flowjob_core import errors as flow_errors
from flowjob_core.imperative import tensor_update

SHAPE = (10,)
ITERS = 10


@pytest.fixture(autouse=True)
def fresh_session():
    flow.clear_default_session()
    yield
    flow.clear_default_session()


def parameter(value: Any) -> flow.nn.Parameter:
    return flow.nn.Parameter(flow.Tensor(np.asarray(value, np.float32)))


def draws(seed: int) -> tuple[np.ndarray, list[np.ndarray]]:
    rng = np.random.default_rng(seed)
    init = rng.uniform(size=SHAPE).astype(np.float32)
    return init, [rng.uniform(size=SHAPE).astype(np.float32) for _ in range(ITERS)]


def train(make: Callable[[list], Any], init: np.ndarray, grads: list[np.ndarray]) -> np.ndarray:
    """Legacy's loop: ``loss = sum(x * grad)`` (so x's gradient is ``grad``), backward, step, zero_grad."""
    x = parameter(init)
    optimizer = make([x])
    for grad in grads:
        (x * flow.Tensor(grad)).sum().backward()
        optimizer.step()
        optimizer.zero_grad()
    return x.numpy()


def grid(**axes: list) -> list[dict]:
    return [dict(zip(axes, values)) for values in itertools.product(*axes.values())]


@pytest.mark.parametrize("case", grid(scale=[1.0, 0.9], momentum=[0.0, 0.9], lr=[1.0, 0.1]))
def test_sgd_matches_legacys_formula(case):
    init, grads = draws(1)
    got = train(lambda ps: flow.optim.SGD([{"params": ps, **case}]), init, grads)
    x, v = init.astype(np.float64), np.zeros(SHAPE)
    for g in grads:
        v = case["momentum"] * v + case["lr"] * case["scale"] * g
        x = x - v
    np.testing.assert_allclose(got, x, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("case", grid(scale=[1.0, 0.8], betas=[(0.99, 0.9), (0.8, 0.7)], weight_decay=[0.0, 0.1],
                                      eps=[1e-8, 1e-7]))
def test_adam_matches_legacys_formula(case):
    init, grads = draws(2)
    got = train(lambda ps: flow.optim.Adam([{"params": ps, "lr": 1.0, **case}]), init, grads)
    (b1, b2), x = case["betas"], init.astype(np.float64)
    m = v = np.zeros(SHAPE)
    for g in grads:
        g = g * case["scale"] + case["weight_decay"] * x  # weight_decay is an L2 penalty on the gradient
        m = b1 * m + (1 - b1) * g
        v = b2 * v + (1 - b2) * g * g
        x = x - 1.0 * m / (np.sqrt(v) + case["eps"])  # no bias correction in v0.4's eager Adam
    np.testing.assert_allclose(got, x, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("case", grid(scale=[1.0, 0.9], weight_decay=[1e-3, 0.0, 0.5]))
def test_adamw_matches_legacys_formula(case):
    init, grads = draws(3)
    got = train(lambda ps: flow.optim.AdamW([{"params": ps, "lr": 0.5, **case}]), init, grads)
    x, m, v = init.astype(np.float64), np.zeros(SHAPE), np.zeros(SHAPE)
    for g in grads:
        g = g * case["scale"]
        m = 0.9 * m + 0.1 * g
        v = 0.999 * v + 0.001 * g * g
        x = x - (0.5 / (np.sqrt(v) + 1e-8) * m + 0.5 * case["weight_decay"] * x)  # decoupled decay
    np.testing.assert_allclose(got, x, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("case", grid(scale=[1.0, 0.9], alpha=[0.9, 0.99], eps=[1e-8, 1e-5],
                                      centered=[False, True]))
def test_rmsprop_matches_legacys_formula(case):
    init, grads = draws(4)
    got = train(lambda ps: flow.optim.RMSprop([{"params": ps, "lr": 1.0, **case}]), init, grads)
    a, eps, x = case["alpha"], case["eps"], init.astype(np.float64)
    r = mg = np.zeros(SHAPE)
    for g in grads:
        g = g * case["scale"]
        r = a * r + (1 - a) * g * g
        if case["centered"]:
            mg = a * mg + (1 - a) * g
            x = x - 1.0 / np.sqrt(r - mg * mg + eps) * g
        else:
            x = x - 1.0 / np.sqrt(r + eps) * g
    np.testing.assert_allclose(got, x, rtol=1e-4, atol=1e-4)


def test_rmsprop_weight_decay_warns_and_changes_nothing_as_in_legacy():
    init, grads = draws(5)
    plain = train(lambda ps: flow.optim.RMSprop(ps, lr=0.1), init, grads)
    with pytest.warns(UserWarning, match=r"flow.optim.RMSprop \(parameter group 0\): weight_decay=0.5 does not "
                                         r"change the update"):
        decayed = train(lambda ps: flow.optim.RMSprop(ps, lr=0.1, weight_decay=0.5), init, grads)
    np.testing.assert_array_equal(decayed, plain)


def test_defaults_are_legacys():
    x = parameter([1.0])
    sgd, adam, adamw, rms = (flow.optim.SGD([x]), flow.optim.Adam([x]), flow.optim.AdamW([x]), flow.optim.RMSprop([x]))
    assert sgd._default_options == {"lr": 1e-3, "momentum": 0.0, "scale": 1.0}
    for opt in (adam, adamw):
        assert opt._default_options == {"lr": 1e-3, "eps": 1e-8, "betas": (0.9, 0.999), "weight_decay": 0.0,
                                        "amsgrad": False, "scale": 1.0}
    assert rms._default_options == {"lr": 1e-3, "alpha": 0.99, "eps": 1e-8, "weight_decay": 0.0, "momentum": 0.0,
                                    "centered": False, "scale": 1.0}
    assert oneflow.experimental.optim.SGD is flow.optim.SGD  # v0.4 programs: import oneflow.experimental as flow


class Linear(flow.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.weight = parameter(np.zeros((3, 1)))
        self.bias = parameter(np.zeros(1))

    def forward(self, x):
        return x.matmul(self.weight) + self.bias


def test_a_module_learns_with_each_optimizer():
    rng = np.random.default_rng(0)
    xs = rng.standard_normal((32, 3)).astype(np.float32)
    ys = xs @ np.array([[1.0], [-2.0], [0.5]], np.float32) + 0.3
    for make in (lambda p: flow.optim.SGD(p, lr=0.1, momentum=0.5), lambda p: flow.optim.Adam(p, lr=0.1),
                 lambda p: flow.optim.AdamW(p, lr=0.1, weight_decay=1e-4), lambda p: flow.optim.RMSprop(p, lr=0.05)):
        model = Linear()
        optimizer = make(model.parameters())  # a generator, as legacy programs pass it
        losses = []
        for _ in range(40):
            d = model(flow.Tensor(xs)) - flow.Tensor(ys)
            loss = (d * d).mean()
            losses.append(loss.item())
            loss.backward()
            optimizer.step()
            optimizer.zero_grad()
        assert losses[-1] < 0.05 * losses[0], (type(optimizer).__name__, losses[::8])


def test_param_groups_take_their_own_options_and_the_defaults():
    a, b = parameter([1.0, 1.0]), parameter([1.0, 1.0])
    sgd = flow.optim.SGD([{"params": [a], "lr": 0.5}, {"params": [b]}], lr=0.1, momentum=0.0)
    assert [g.options["lr"] for g in sgd._param_groups] == [0.5, 0.1]
    ((a + b) * 2.0).sum().backward()
    sgd.step()
    np.testing.assert_allclose(a.numpy(), [0.0, 0.0])
    np.testing.assert_allclose(b.numpy(), [0.8, 0.8])
    c = parameter([3.0])
    sgd.add_param_group({"params": [c], "lr": 1.0})
    (c * 2.0).sum().backward()
    sgd.step()
    np.testing.assert_allclose(c.numpy(), [1.0])
    assert sgd._state["step"] == 2


def test_a_parameter_without_gradient_is_left_alone_and_the_step_counts():
    a, b = parameter([1.0]), parameter([2.0])
    sgd = flow.optim.SGD([a, b], lr=1.0)
    (a * 3.0).sum().backward()
    sgd.step()
    assert a.numpy().tolist() == [-2.0] and b.numpy().tolist() == [2.0]


def test_the_update_is_built_once_and_rebuilt_when_an_option_changes(monkeypatch):
    built = []
    original = tensor_update.TensorUpdate.__init__

    def counting(self, op_type, *args, **kwargs):
        built.append(op_type)
        original(self, op_type, *args, **kwargs)

    monkeypatch.setattr(tensor_update.TensorUpdate, "__init__", counting)
    x = parameter([1.0, 2.0])
    sgd = flow.optim.SGD([x], lr=0.1, momentum=0.9)
    for _ in range(5):
        (x * 1.0).sum().backward()
        sgd.step()
        sgd.zero_grad()
    assert built == ["optim_momentum_update"]
    sgd._param_groups[0].options["lr"] = 0.01  # the learning rate is an operand: no new update
    sgd._param_groups[0].options["momentum"] = 0.0  # the rule changes: a new one
    (x * 1.0).sum().backward()
    sgd.step()
    assert built == ["optim_momentum_update", "optim_sgd_update"]


def test_a_tensor_update_checks_its_operands():
    w, g = parameter([1.0, 2.0]), flow.Tensor([0.5, 0.5])
    update = tensor_update.TensorUpdate("optim_sgd_update", (w, g, 0.1), {"weight_decay": 0.0}, "my update")
    assert update.writes == (0,)
    update(w, g, 2.0)
    assert w.numpy().tolist() == [0.0, 1.0]
    with pytest.raises(flow_errors.FlowjobError, match=r"my update: 2 operands given, the update was built for 3"):
        update(w, g)
    with pytest.raises(flow_errors.FlowjobError, match=r"my update: operand 1 is .*\(3,\).*built for .*\(2,\)"):
        update(w, flow.Tensor([1.0, 2.0, 3.0]), 0.1)
    with pytest.raises(TypeError, match=r"my update: operand 0 is written by the update and must be a flow.Tensor"):
        update(np.ones(2, np.float32), g, 0.1)
    with pytest.raises(TypeError, match=r"my update: operand 2 must be a flow.Tensor, an array or a number, got str"):
        update(w, g, "fast")
    with pytest.raises(flow_errors.FlowjobError, match=r"my update: op 'relu' writes none of its inputs"):
        tensor_update.TensorUpdate("relu", (w,), {}, "my update")


def test_values_handed_out_before_a_step_keep_their_value():
    x = parameter([1.0, 2.0])
    alias = x.detach()  # shares x's array
    y = x * 2.0  # keeps x's value for its gradient
    sgd = flow.optim.SGD([x], lr=1.0)
    (x * 1.0).sum().backward()
    sgd.step()
    assert x.numpy().tolist() == [0.0, 1.0]
    assert alias.numpy().tolist() == [1.0, 2.0]
    y.sum().backward()  # the gradient of the value y was computed from
    assert x.grad.numpy().tolist() == [3.0, 3.0]


def test_zero_grad_zeros_or_drops_and_warns_when_nothing_has_a_gradient():
    x = parameter([1.0])
    sgd = flow.optim.SGD([x])
    with pytest.warns(UserWarning, match=r"flow.optim.SGD.zero_grad: the parameters have no gradient"):
        sgd.zero_grad()
    (x * 5.0).sum().backward()
    sgd.zero_grad()
    assert x.grad.numpy().tolist() == [0.0]
    (x * 5.0).sum().backward()
    assert x.grad.numpy().tolist() == [5.0]
    sgd.zero_grad(set_to_none=True)
    assert x.grad is None


def test_step_returns_what_the_closure_returns():
    x = parameter([2.0])
    sgd = flow.optim.SGD([x], lr=0.25)

    def closure():
        loss = (x * x).sum()
        loss.backward()
        return loss

    loss = sgd.step(closure)
    assert loss.item() == 4.0 and x.numpy().tolist() == [1.0]


def test_state_dict_round_trip_continues_the_same_trajectory():
    init, grads = draws(6)
    whole = train(lambda ps: flow.optim.Adam(ps, lr=0.1), init, grads)
    x = parameter(init)
    first = flow.optim.Adam([x], lr=0.1)
    for g in grads[:5]:
        (x * flow.Tensor(g)).sum().backward()
        first.step()
        first.zero_grad()
    saved = first.state_dict()
    assert saved["step"] == 5 and set(saved["state"][0]) == {"exp_avg", "exp_avg_sq"}
    assert saved["param_groups"][0]["params"] == [0] and saved["param_groups"][0]["lr"] == 0.1
    y = parameter(x.numpy())
    second = flow.optim.Adam([y], lr=0.9)
    second.load_state_dict(saved)
    assert second._param_groups[0].options["lr"] == 0.1
    for g in grads[5:]:
        (y * flow.Tensor(g)).sum().backward()
        second.step()
        second.zero_grad()
    np.testing.assert_allclose(y.numpy(), whole, rtol=1e-6)
    with pytest.raises(ValueError, match=r"Adam.load_state_dict: the state_dict has 1 parameter group\(s\), this "
                                         r"optimizer 2"):
        flow.optim.Adam([{"params": [parameter([1.0])]}, {"params": [parameter([1.0])]}]).load_state_dict(saved)


# learning-rate schedulers: legacy's tests -----------------------------------------------------------------
def sgd_of(groups: int = 1, lr: float = 1.0) -> Any:
    return flow.optim.SGD([{"params": [parameter([1.0])]} for _ in range(groups)], lr=lr)


def test_cosine_scheduler():
    alpha, steps = 0.5, 10
    scheduler = flow.optim.lr_scheduler.CosineScheduler(sgd_of(), steps=steps, alpha=alpha)
    assert scheduler.get_last_lr() == [1.0]
    for i in range(1, 21):
        scheduler.step()
        factor = ((1 - alpha) * 0.5 * (1 + math.cos(math.pi * i / steps)) + alpha) if i < steps else alpha
        assert scheduler.get_last_lr()[0] == pytest.approx(factor)


def test_step_lr():
    optimizer = sgd_of()
    scheduler = flow.optim.lr_scheduler.StepLR(optimizer, step_size=5, gamma=0.1)
    for i in range(1, 21):
        scheduler.step()
        assert scheduler.get_last_lr()[0] == pytest.approx(0.1 ** (i // 5))
        assert optimizer._param_groups[0].options["lr"] == scheduler.get_last_lr()[0]


def test_lambda_lr_per_group_and_its_state():
    optimizer = sgd_of(groups=2)
    lambdas = [lambda step: step // 30, lambda step: 0.95 * step]
    scheduler = flow.optim.lr_scheduler.LambdaLR(optimizer, lr_lambda=lambdas)
    for i in range(1, 21):
        scheduler.step()
        assert scheduler.get_last_lr() == pytest.approx([1.0 * (i // 30), 0.95 * i])
    state = scheduler.state_dict()
    assert "_optimizer" not in state and state["lr_lambdas"] == [None, None] and state["last_step"] == 20


def test_a_scheduler_drives_the_update():
    x = parameter([0.0])
    sgd = flow.optim.SGD([x], lr=1.0)
    scheduler = flow.optim.lr_scheduler.StepLR(sgd, step_size=1, gamma=0.5)
    for _ in range(3):
        (x * 1.0).sum().backward()
        sgd.step()
        sgd.zero_grad()
        scheduler.step()
    assert x.numpy().tolist() == [-(1.0 + 0.5 + 0.25)]


def test_resuming_a_scheduler_needs_initial_lr():
    with pytest.raises(ValueError, match=r"StepLR: resuming at last_step=3 needs 'initial_lr' in the options of "
                                         r"parameter group 0"):
        flow.optim.lr_scheduler.StepLR(sgd_of(), step_size=2, last_step=3)
    optimizer = flow.optim.SGD([{"params": [parameter([1.0])], "initial_lr": 0.5}], lr=0.1)
    scheduler = flow.optim.lr_scheduler.StepLR(optimizer, step_size=2, last_step=3)
    assert scheduler.base_lrs == [0.5] and scheduler.last_step == 4


# bad arguments, each named ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("make, error, message", [
    (lambda p: flow.optim.SGD(p, lr=-0.1), ValueError, r"flow.optim.SGD: lr must be >= 0, got -0.1"),
    (lambda p: flow.optim.SGD(p, momentum=-1), ValueError, r"SGD: momentum must be >= 0"),
    (lambda p: flow.optim.SGD(p, lr="fast"), ValueError, r"SGD: lr must be a finite number, got 'fast'"),
    (lambda p: flow.optim.SGD([{"params": p, "lr": -1}]), ValueError,
     r"SGD \(parameter group 0\): lr must be >= 0, got -1"),
    (lambda p: flow.optim.SGD([{"params": p, "learning_rate": 1}]), ValueError,
     r"SGD: parameter group option\(s\) \['learning_rate'\] unknown"),
    (lambda p: flow.optim.Adam(p, betas=(0.9, 1.0)), ValueError, r"Adam: betas\[1\] must be >= 0 and < 1, got 1.0"),
    (lambda p: flow.optim.Adam(p, betas=0.9), ValueError, r"Adam: betas must be a pair of numbers"),
    (lambda p: flow.optim.AdamW(p, betas=(-0.1, 0.9)), ValueError, r"AdamW: betas\[0\] must be >= 0"),
    (lambda p: flow.optim.Adam(p, amsgrad=True), ValueError, r"Adam: amsgrad=True is not supported"),
    (lambda p: flow.optim.Adam(p, scale=0), ValueError, r"Adam: scale must be > 0, got 0.0"),
    (lambda p: flow.optim.Adam(p, eps=-1e-8), ValueError, r"Adam: eps must be >= 0"),
    (lambda p: flow.optim.RMSprop(p, momentum=0.9), ValueError, r"RMSprop: momentum must be 0"),
    (lambda p: flow.optim.RMSprop(p, centered=1), TypeError, r"RMSprop: centered must be a bool"),
    (lambda p: flow.optim.SGD([flow.Tensor([1.0])]), TypeError,
     r"SGD: parameters must be flow.nn.Parameter, item 0 is Tensor"),
    (lambda p: flow.optim.SGD([]), ValueError, r"SGD: parameters is empty"),
    (lambda p: flow.optim.SGD(3), TypeError, r"SGD: parameters must be an iterable"),
    (lambda p: flow.optim.SGD([{"params": p}, {"params": p}]), ValueError, r"more than one parameter group"),
    (lambda p: flow.optim.SGD([{"lr": 1}]), ValueError, r"a parameter group must be a dict with the key 'params'"),
    (lambda p: flow.optim.lr_scheduler.StepLR(object(), 2), TypeError,
     r"StepLR: optimizer must be a flow.optim optimizer, got object"),
    (lambda p: flow.optim.lr_scheduler.StepLR(flow.optim.SGD(p), 0), ValueError,
     r"StepLR: step_size must be an int > 0, got 0"),
    (lambda p: flow.optim.lr_scheduler.StepLR(flow.optim.SGD(p), 2, gamma=0), ValueError,
     r"StepLR: gamma must be > 0"),
    (lambda p: flow.optim.lr_scheduler.CosineScheduler(flow.optim.SGD(p), steps=0), ValueError,
     r"CosineScheduler: steps must be an int > 0"),
    (lambda p: flow.optim.lr_scheduler.LambdaLR(flow.optim.SGD(p), [abs, abs]), ValueError,
     r"LambdaLR: lr_lambda holds 2 function\(s\), the optimizer has 1 parameter group\(s\)"),
    (lambda p: flow.optim.lr_scheduler.LambdaLR(flow.optim.SGD(p), 0.5), TypeError,
     r"LambdaLR: lr_lambda must be callable, got float"),
])
def test_bad_arguments_are_named(make, error, message):
    with pytest.raises(error, match=message):
        make([parameter([1.0])])


def test_a_negative_lr_set_later_is_refused_at_the_step():
    x = parameter([1.0])
    sgd = flow.optim.SGD([x])
    sgd._param_groups[0].options["lr"] = -1.0
    (x * 1.0).sum().backward()
    with pytest.raises(ValueError, match=r"SGD: lr of parameter group 0 must be >= 0, got -1.0"):
        sgd.step()
