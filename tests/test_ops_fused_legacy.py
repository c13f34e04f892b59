"""Legacy v0.4's fused functions (BERT's) against their unfused graphs and numpy: nn.fused_bias_add_gelu,
nn.fused_bias_add_dropout, math.fused_scale_tril_softmax_dropout and
nn.fused_self_attention_query_mul_key_and_value."""
from __future__ import annotations

import math

import numpy as np
import pytest

import oneflow as flow
import oneflow.typing as tp
from flowjob_core import FlowjobError
from flowjob_core.testing.modules import sibling

RNG = np.random.default_rng(5)

_helpers = sibling(__file__, "op_surface_helpers")
fresh_session, train_grad = _helpers.fresh_session, _helpers.train_grad


def test_fused_bias_add_gelu_and_dropout():
    x = RNG.normal(size=(2, 3, 4)).astype(np.float32)
    b = RNG.normal(size=(4,)).astype(np.float32)

    @flow.global_function()
    def job(x: tp.Numpy.Placeholder((2, 3, 4)), b: tp.Numpy.Placeholder((4,))) -> tuple[tp.Numpy, tp.Numpy]:
        g = flow.nn.fused_bias_add_gelu(x, b, data_format="N...C", name="BG")
        assert g.op_name == "BG"
        # predict jobs only add the bias, whatever the rate (legacy)
        return g, flow.nn.fused_bias_add_dropout(x, b, data_format="N...C", rate=0.5)

    gelu, plain = job(x, b)
    z = x + b
    erf = np.vectorize(math.erf)
    np.testing.assert_allclose(gelu, z * 0.5 * (1 + erf(z / np.sqrt(2))), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(plain, z, rtol=1e-6)


def test_fused_bias_add_dropout_in_a_train_job_zeroes_and_scales():
    x = np.ones((50, 40), np.float32)
    b = np.full((40,), 1.0, np.float32)
    y, dx = train_grad((50, 40), lambda v, b: flow.nn.fused_bias_add_dropout(v, b, data_format="N...C", rate=0.25,
                                                                              seed=3), x, b)
    kept = y != 0
    np.testing.assert_allclose(y[kept], 2.0 / 0.75, rtol=1e-6)
    assert 0.15 < 1 - kept.mean() < 0.35
    np.testing.assert_allclose(dx, kept / 0.75, rtol=1e-6)  # the same mask in the gradient


def test_fused_scale_tril_softmax_dropout():
    assert flow.nn.fused_scale_tril_softmax_dropout is flow.math.fused_scale_tril_softmax_dropout
    x = RNG.normal(size=(2, 4, 4)).astype(np.float32)

    @flow.global_function()
    def job(x: tp.Numpy.Placeholder((2, 4, 4))) -> tuple[tp.Numpy, tp.Numpy]:
        full = flow.math.fused_scale_tril_softmax_dropout(x, diagonal=0, fill_value=-1e4, scale=0.5)
        dropped = flow.nn.fused_scale_tril_softmax_dropout(x, fill_value=-1e4, scale=0.5, rate=0.5, seed=1)
        return full, dropped

    full, dropped = job(x)
    z = np.where(np.tril(np.ones((4, 4))) > 0, 0.5 * x, -1e4)
    want = np.exp(z - z.max(-1, keepdims=True))
    want /= want.sum(-1, keepdims=True)
    np.testing.assert_allclose(full, want, rtol=1e-5, atol=1e-7)
    # legacy draws the mask in predict jobs too: each element is 0 or twice the softmax
    assert np.all(np.isclose(dropped, 0) | np.isclose(dropped, 2 * want, rtol=1e-5, atol=1e-7))
    assert (dropped == 0).any()


def test_fused_dropouts_refuse_a_noise_shape():
    @flow.global_function()
    def job(x: tp.Numpy.Placeholder((2, 2))) -> tp.Numpy:
        return flow.math.fused_scale_tril_softmax_dropout(x, rate=0.1, noise_shape=[2, 1])

    with pytest.raises(FlowjobError, match="noise_shape must be None"):
        job(np.zeros((2, 2), np.float32))


def test_fused_self_attention_matches_legacy_unfused_graph():
    seq, batch, heads, size = 3, 2, 2, 4
    h = RNG.random((seq, batch, heads * 3 * size)).astype(np.float32)

    @flow.global_function()
    def job(h: tp.Numpy.Placeholder((seq, batch, heads * 3 * size))) -> tuple[tp.Numpy, tp.Numpy]:
        return flow.nn.fused_self_attention_query_mul_key_and_value(h, head_size=size, alpha=0.5)

    qmk, v = job(h)
    # legacy's test: reshape to (seq, batch, heads, 3 * size), slice q/k/v, transpose to (batch, heads, seq, size)
    parts = h.reshape(seq, batch, heads, 3 * size)
    q, k, vv = (parts[..., i * size:(i + 1) * size].transpose(1, 2, 0, 3) for i in range(3))
    np.testing.assert_allclose(qmk, 0.5 * q @ k.transpose(0, 1, 3, 2), rtol=1e-5)
    np.testing.assert_array_equal(v, vv)
