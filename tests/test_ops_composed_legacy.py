"""Legacy v0.4's flow.nn functions composed from existing ops: the lazy losses (L1Loss, MSELoss, BCELoss,
BCEWithLogitsLoss, MarginRankingLoss, TripletMarginLoss, KLDivLoss), GroupNorm / InstanceNorm1d-3d and
PixelShuffle / PixelShufflev2, against numpy.

Gradients come from a train job (``flow.watch_diff`` on the input) and are compared with float64 central
differences of the numpy reference, so a wrong composition shows in either values or gradients.
"""
from __future__ import annotations

from typing import Any, Callable

import numpy as np
import pytest

import oneflow as flow
import oneflow.typing as tp
from flowjob_core import FlowjobError
from flowjob_core.testing.modules import sibling

RNG = np.random.default_rng(4)

_helpers = sibling(__file__, "op_surface_helpers")
fresh_session, value, sgd = _helpers.fresh_session, _helpers.value, _helpers.sgd
job_of, run_job = _helpers.job_of, _helpers.run_job


def _f32(*shape: int, low: float = -1.0, high: float = 1.0) -> np.ndarray:
    return RNG.uniform(low, high, size=shape).astype(np.float32)


def grad_from_job(fn: Callable[..., Any], arrays: list[np.ndarray], wrt: int, w: np.ndarray
                  ) -> tuple[np.ndarray, np.ndarray]:
    """(value, d sum(fn(...) * w) / d arrays[wrt]) from a train job, read with flow.watch_diff."""
    flow.clear_default_session()
    seen: dict[str, np.ndarray] = {}

    def body(*blobs: Any) -> Any:
        *inputs, weight = blobs
        v = flow.get_variable("v", shape=inputs[wrt].shape, initializer=flow.zeros_initializer())
        inputs[wrt] = inputs[wrt] + v
        flow.watch_diff(inputs[wrt], lambda g: seen.__setitem__("grad", g))
        out = fn(*inputs)
        sgd(flow.math.reduce_sum(out * weight))
        return out

    feeds = [*arrays, w.astype(np.float32)]
    out = job_of(body, feeds, train=True)(*feeds)
    flow.sync_default_session()
    return out, seen["grad"]


def numeric_grad(ref: Callable[..., np.ndarray], arrays: list[np.ndarray], wrt: int, w: np.ndarray,
                 eps: float = 1e-6) -> np.ndarray:
    """float64 central differences of sum(ref(...) * w) with respect to arrays[wrt]."""
    xs = [a.astype(np.float64) for a in arrays]
    grad = np.zeros_like(xs[wrt])
    for i in np.ndindex(xs[wrt].shape):
        plus = [x.copy() for x in xs]
        minus = [x.copy() for x in xs]
        plus[wrt][i] += eps
        minus[wrt][i] -= eps
        grad[i] = (np.sum(ref(*plus) * w) - np.sum(ref(*minus) * w)) / (2 * eps)
    return grad


def check(fn: Callable[..., Any], ref: Callable[..., np.ndarray], arrays: list[np.ndarray], wrt: int = 0,
          rtol: float = 1e-4, atol: float = 1e-5) -> None:
    """fn's values against ref's, and its gradient with respect to arrays[wrt] against ref's central differences."""
    want = ref(*[a.astype(np.float64) for a in arrays])
    w = RNG.uniform(0.5, 1.5, size=want.shape).astype(np.float32)
    out, grad = grad_from_job(fn, arrays, wrt, w)
    assert out.shape == want.shape
    np.testing.assert_allclose(out, want, rtol=rtol, atol=atol)
    np.testing.assert_allclose(grad, numeric_grad(ref, arrays, wrt, w), rtol=1e-3, atol=1e-4)


def _reduced(loss: np.ndarray, reduction: str) -> np.ndarray:
    if reduction == "none":
        return loss
    return np.array([loss.mean() if reduction == "mean" else loss.sum()])


# elementwise losses ----------------------------------------------------------------------------
REDUCTIONS = ["none", "mean", "sum"]


@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_l1_and_mse_loss_values_and_gradients(reduction):
    x, t = _f32(3, 4), _f32(3, 4)
    check(lambda a, b: flow.nn.L1Loss(a, b, reduction=reduction),
          lambda a, b: _reduced(np.abs(b - a), reduction), [x, t])
    check(lambda a, b: flow.nn.MSELoss(a, b, reduction=reduction),
          lambda a, b: _reduced((b - a) ** 2, reduction), [x, t])


def test_reduced_losses_have_legacy_shape_and_node_names():
    names = {}

    def fn(a, b):
        mean = flow.nn.MSELoss(a, b, name="mse")
        total = flow.nn.L1Loss(a, b, reduction="sum")
        names["mean"], names["sum"] = mean.op_name, total.op_name
        return mean + total

    out = run_job(fn, _f32(2, 3), _f32(2, 3))
    assert out.shape == (1,)  # legacy's reduce ops gave (1,) for a full reduction, never 0-d
    assert names["mean"] == "mse_reduce_mean"
    assert names["sum"].startswith("L1Loss_") and names["sum"].endswith("_reduce_sum")


def _bce(x, t, w=None):
    loss = -(t * np.log(x) + (1 - t) * np.log(1 - x))
    return loss if w is None else w * loss


@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_bce_loss_with_and_without_weight(reduction):
    x, t, w = _f32(2, 5, low=0.1, high=0.9), _f32(2, 5, low=0.0, high=1.0), _f32(2, 5, low=0.5, high=2.0)
    check(lambda a, b: flow.nn.BCELoss(a, b, reduction=reduction), lambda a, b: _reduced(_bce(a, b), reduction),
          [x, t])
    check(lambda a, b, c: flow.nn.BCELoss(a, b, weight=c, reduction=reduction),
          lambda a, b, c: _reduced(_bce(a, b, c), reduction), [x, t, w])


def _bce_logits(x, t, w=None, pw=None):
    log_sig, log_one_minus = -np.logaddexp(0, -x), -np.logaddexp(0, x)  # log sigmoid(x), log(1 - sigmoid(x))
    pos = t * log_sig if pw is None else pw * t * log_sig
    loss = -(pos + (1 - t) * log_one_minus)
    return loss if w is None else w * loss


@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_bce_with_logits_loss_is_stable_for_large_logits(reduction):
    x = np.array([[-80.0, -3.0, 0.5, 4.0], [60.0, 0.0, -0.7, 2.0]], np.float32)
    t = _f32(2, 4, low=0.0, high=1.0)
    check(lambda a, b: flow.nn.BCEWithLogitsLoss(a, b, reduction=reduction),
          lambda a, b: _reduced(_bce_logits(a, b), reduction), [x, t])


def test_bce_with_logits_loss_weight_and_pos_weight():
    x, t = _f32(3, 4, low=-3, high=3), _f32(3, 4, low=0.0, high=1.0)
    w, pw = _f32(3, 4, low=0.5, high=2.0), _f32(4, low=0.5, high=3.0)
    check(lambda a, b, c, d: flow.nn.BCEWithLogitsLoss(a, b, weight=c, pos_weight=d, reduction="none"),
          lambda a, b, c, d: _bce_logits(a, b, c, d), [x, t, w, pw])


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("margin", [0.0, 0.3])
def test_margin_ranking_loss_with_a_broadcast_target(margin, reduction):
    x1, x2 = _f32(4, 3), _f32(4, 3)
    sign = np.array([[1.0], [-1.0], [1.0], [-1.0]], np.float32)

    def ref(a, b, s):
        return np.maximum(margin - s * (a - b), 0.0)

    check(lambda a, b, s: flow.nn.MarginRankingLoss(a, b, s, margin=margin, reduction=reduction),
          lambda a, b, s: _reduced(ref(a, b, s), reduction), [x1, x2, sign])
    check(lambda a, b, s: flow.nn.MarginRankingLoss(a, b, s, margin=margin, reduction=reduction),
          lambda a, b, s: _reduced(ref(a, b, s), reduction), [x1, x2, sign], wrt=1)


def _triplet(a, p, n, margin=1.0, deg=2.0, eps=1e-6, swap=False):
    def dist(u, v):
        return np.sum(np.abs(u - v + eps) ** deg, axis=1) ** (1.0 / deg)

    d_neg = dist(a, n)
    if swap:
        d_neg = np.minimum(d_neg, dist(p, n))
    return np.maximum(margin + dist(a, p) - d_neg, 0.0)


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("deg, swap", [(2.0, False), (3.0, False), (1.5, True), (2.0, True)])
def test_triplet_margin_loss_values_and_gradients(deg, swap, reduction):
    a, p, n = _f32(5, 3), _f32(5, 3), _f32(5, 3)
    def loss(x, y, z):
        return flow.nn.TripletMarginLoss(x, y, z, margin=1.5, p=deg, swap=swap, reduction=reduction)

    def ref(x, y, z):
        return _reduced(_triplet(x, y, z, 1.5, deg, swap=swap), reduction)

    check(loss, ref, [a, p, n])
    check(loss, ref, [a, p, n], wrt=2)


def _kl(x, t, log_target):
    if log_target:
        return np.exp(t) * (t - x)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(t > 0, t * (np.log(np.where(t > 0, t, 1.0)) - x), 0.0)


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("log_target", [False, True])
def test_kl_div_loss_masks_non_positive_targets(log_target, reduction):
    x = _f32(3, 4, low=-2.0, high=0.0)
    t = _f32(3, 4, low=0.05, high=1.0)
    t[0, :2] = [0.0, -2.0]  # legacy's rint(t + 0.5) kept -2; the loss there is 0, with no nan anywhere
    check(lambda a, b: flow.nn.KLDivLoss(a, b, log_target=log_target, reduction=reduction),
          lambda a, b: _reduced(_kl(a, b, log_target), reduction), [x, t])


def test_kl_div_loss_target_gradient_is_finite_where_masked():
    x, t = _f32(2, 3, low=-2.0, high=0.0), _f32(2, 3, low=0.1, high=1.0)
    t[1, 1] = -0.5
    out, grad = grad_from_job(lambda a, b: flow.nn.KLDivLoss(a, b, reduction="sum"), [x, t], 1, np.ones(1))
    assert np.isfinite(grad).all() and grad[1, 1] == 0.0
    np.testing.assert_allclose(out, [_kl(x, t, False).sum()], rtol=1e-5)


# normalization ----------------------------------------------------------------------------------
def _group_norm(x, groups, eps):
    g = x.reshape(x.shape[0], groups, -1).astype(np.float64)
    y = (g - g.mean(2, keepdims=True)) / np.sqrt(g.var(2, keepdims=True) + eps)
    return y.reshape(x.shape)


@pytest.mark.parametrize("groups, affine", [(1, True), (2, False), (6, True)])
def test_group_norm_values_and_input_gradient(groups, affine):
    x = _f32(2, 6, 3, 2, low=-2, high=2)
    check(lambda a: flow.nn.GroupNorm(a, num_groups=groups, eps=1e-3, affine=affine),
          lambda a: _group_norm(a, groups, 1e-3), [x], rtol=1e-4, atol=1e-4)


def test_group_norm_affine_variables_train():
    x, dy = _f32(2, 4, 3, low=-2, high=2), _f32(2, 4, 3)

    @flow.global_function(type="train")
    def job(x: tp.Numpy.Placeholder((2, 4, 3)), dy: tp.Numpy.Placeholder((2, 4, 3))) -> tp.Numpy:
        y = flow.nn.GroupNorm(x, num_groups=2, name="gn")
        sgd(flow.math.reduce_sum(y * dy))
        return y

    job(x, dy)
    xhat = _group_norm(x, 2, 1e-5)
    np.testing.assert_allclose(value("gn_gamma"), 1 - 0.1 * (xhat * dy).sum((0, 2)).reshape(1, 4, 1), rtol=1e-4,
                               atol=1e-5)
    np.testing.assert_allclose(value("gn_beta"), -0.1 * dy.sum((0, 2)).reshape(1, 4, 1), rtol=1e-5, atol=1e-6)


def _instance_norm(x, eps):
    f = x.reshape(x.shape[0], x.shape[1], -1).astype(np.float64)
    return ((f - f.mean(2, keepdims=True)) / np.sqrt(f.var(2, keepdims=True) + eps)).reshape(x.shape)


@pytest.mark.parametrize("fn, shape", [("InstanceNorm1d", (2, 3, 5)), ("InstanceNorm2d", (2, 3, 2, 3)),
                                       ("InstanceNorm3d", (1, 2, 2, 2, 3))])
@pytest.mark.parametrize("affine", [True, False])
def test_instance_norms(fn, shape, affine):
    x = _f32(*shape, low=-2, high=2)
    check(lambda a: getattr(flow.nn, fn)(a, eps=1e-4, affine=affine), lambda a: _instance_norm(a, 1e-4), [x],
          rtol=1e-4, atol=1e-4)


def test_instance_norm_names_its_variables():
    @flow.global_function()
    def job(x: tp.Numpy.Placeholder((2, 3, 2, 2))) -> tp.Numpy:
        return flow.nn.InstanceNorm2d(x, name="inorm")

    job(_f32(2, 3, 2, 2))
    assert value("inorm_gamma").shape == (1, 3, 1) and (value("inorm_gamma") == 1).all()
    assert value("inorm_beta").shape == (1, 3, 1) and (value("inorm_beta") == 0).all()


# pixel shuffle -------------------------------------------------------------------------------------
def _pixel_shuffle(x, h, w):
    n, c, hh, ww = x.shape
    out = np.empty((n, c // (h * w), hh * h, ww * w), x.dtype)
    for ci, yi, xi in np.ndindex(out.shape[1:]):  # output (c, y, x) reads channel c*h*w + (y%h)*w + x%w
        out[:, ci, yi, xi] = x[:, ci * h * w + (yi % h) * w + xi % w, yi // h, xi // w]
    return out


@pytest.mark.parametrize("h, w", [(2, 2), (1, 3), (3, 2)])
def test_pixel_shuffle_v2_moves_channels_into_space(h, w):
    x = _f32(2, 2 * h * w, 2, 3)
    check(lambda a: flow.nn.PixelShufflev2(a, h, w), lambda a: _pixel_shuffle(a, h, w), [x])


def test_pixel_shuffle_uses_one_factor():
    x = _f32(1, 8, 2, 2)
    np.testing.assert_array_equal(run_job(lambda a: flow.nn.PixelShuffle(a, 2), x), _pixel_shuffle(x, 2, 2))


# bad arguments: a clear error, and the session stays usable ------------------------------------------
@pytest.mark.parametrize("fn, shapes, message", [
    (lambda a, b: flow.nn.MSELoss(a, b), [(2, 3), (3, 2)], r"flow.nn.MSELoss at .*target must have the shape of "
                                                           r"input \(2, 3\), got \(3, 2\)"),
    (lambda a, b: flow.nn.L1Loss(a, b, reduction="avg"), [(2,), (2,)], "L1Loss at .*reduction must be one of"),
    (lambda a, b: flow.nn.BCELoss(a, b, weight=b, reduction="max"), [(2,), (2,)], "reduction must be one of"),
    (lambda a, b: flow.nn.BCEWithLogitsLoss(a, a, pos_weight=b), [(2, 3), (2,)],
     r"pos_weight must be 1-D with one entry per class \(input's last axis, 3\)"),
    (lambda a, b: flow.nn.MarginRankingLoss(a, b, a), [(2, 3), (2, 2)], "input2 must have the shape of input1"),
    (lambda a, b: flow.nn.TripletMarginLoss(a, a, b), [(2, 3), (2, 4)], "negative must have the shape of anchor"),
    (lambda a, b: flow.nn.TripletMarginLoss(a, a, a), [(2, 3, 1), (1,)], r"anchor must be a 2-D \(N, D\) blob"),
    (lambda a, b: flow.nn.TripletMarginLoss(a, a, a, p=0), [(2, 3), (1,)], "p must be positive"),
    (lambda a, b: flow.nn.KLDivLoss(a, b, log_target=1), [(2,), (2,)], "log_target must be a bool"),
    (lambda a, b: flow.nn.GroupNorm(a, num_groups=4), [(2, 6, 3), (1,)], "num_groups 4 must divide the 6 channels"),
    (lambda a, b: flow.nn.GroupNorm(a), [(2, 32), (1,)], r"x must have rank >= 3"),
    (lambda a, b: flow.nn.InstanceNorm2d(a), [(2, 3, 4), (1,)], r"InstanceNorm2d at .*x must be a 4-D"),
    (lambda a, b: flow.nn.InstanceNorm1d(a, eps=-1.0), [(2, 3, 4), (1,)], "eps must not be negative"),
    (lambda a, b: flow.nn.PixelShufflev2(a, 2, 2), [(1, 6, 2, 2), (1,)],
     "the 6 channels of input must be a multiple of h_upscale_factor \\* w_upscale_factor = 4"),
    (lambda a, b: flow.nn.PixelShuffle(a, 0), [(1, 4, 2, 2), (1,)], "upscale_factor must be a positive int"),
])
def test_bad_arguments_name_the_function_and_argument(fn, shapes, message):
    with pytest.raises(FlowjobError, match=message):
        run_job(fn, *[np.zeros(s, np.float32) for s in shapes])
    np.testing.assert_allclose(run_job(lambda a: flow.nn.MSELoss(a, a * 2.0), np.ones(3, np.float32)), [1.0])


def test_a_non_blob_argument_is_a_type_error():
    with pytest.raises(TypeError, match="flow.nn.L1Loss: target must be a blob of this job, got ndarray"):
        run_job(lambda a: flow.nn.L1Loss(a, np.ones(2)), np.ones(2, np.float32))
