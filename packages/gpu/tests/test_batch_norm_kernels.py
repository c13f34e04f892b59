"""The gpu backend's train-mode batch normalization (flowjob-kernels' cuda/batch_norm.cu).

Without a device: the builders' host side against a stand-in CuPy whose ``RawModule`` runs each entry point's
arithmetic in numpy, channel by channel, with the CUDA kernel's argument list (so the order of the arguments, the
flags, the (outer, channels, inner) view, the launch shape, the copies of strided inputs and the fallback to the
record's kernel are checked against the records' own numpy kernels). With a device (``gpu`` marker): the CUDA
kernels against the records' numpy kernels."""
from __future__ import annotations

import numpy as np
import pytest

from flowjob_core import BlobSpec, KernelContext
from flowjob_core.testing.modules import sibling
from flowjob_gpu import available_cupy, batch_norm_kernels
from flowjob_kernels import entry_points, source
from flowjob_ops.records.batch_norm_train import BATCH_NORM_TRAIN, BATCH_NORM_TRAIN_GRAD

Records = sibling(__file__, "record_registry").Records


def _view(outer, channels, inner, *arrays):
    shape = (int(outer), int(channels), int(inner))
    return [a.reshape(shape) for a in arrays]


def _forward(x, gamma, beta, y, mean, variance, outer, channels, inner, inv_n, epsilon, with_scale, with_offset,
             relu):
    t = x.dtype.type
    x3, y3 = _view(outer, channels, inner, x, y)
    for c in range(int(channels)):
        m = t(np.sum(x3[:, c], dtype=np.float64) * inv_n)
        centred = x3[:, c] - m
        var = t(np.sum(centred * centred, dtype=np.float64) * inv_n)
        mean[c], variance[c] = m, var
        scale = 1.0 / np.sqrt(np.float64(var) + epsilon)
        if with_scale:
            scale = scale * np.float64(gamma[c])
        v = centred * t(scale)
        if with_offset:
            v = v + beta[c]
        if relu:
            v = np.maximum(v, t(0))
        y3[:, c] = v


def _backward(x, mean, variance, gamma, y, dy, dx, dgamma, dbeta, outer, channels, inner, inv_n, epsilon,
              with_scale, with_offset, relu):
    t = x.dtype.type
    x3, y3, dy3, dx3 = _view(outer, channels, inner, x, y, dy, dx)
    for c in range(int(channels)):
        g = dy3[:, c] * (y3[:, c] > 0).astype(x.dtype) if relu else dy3[:, c]
        centred = x3[:, c] - mean[c]
        sum_dy, sum_dy_centred = np.sum(g, dtype=np.float64), np.sum(g * centred, dtype=np.float64)
        inv_sigma = 1.0 / np.sqrt(np.float64(variance[c]) + epsilon)
        if with_scale:
            dgamma[c] = t(sum_dy_centred * inv_sigma)
        if with_offset:
            dbeta[c] = t(sum_dy)
        gain = t(inv_sigma * np.float64(gamma[c]) if with_scale else inv_sigma)
        along = t(-inv_sigma * inv_sigma * sum_dy_centred * inv_n)
        dx3[:, c] = (centred * along + g - t(sum_dy * inv_n)) * gain


class _StandInCupy:
    """numpy behind the names the builders use; ``RawModule`` checks the symbol is an entry point of the source."""

    int32, int64, float64 = np.int32, np.int64, np.float64
    asarray = staticmethod(np.asarray)
    copyto = staticmethod(np.copyto)
    empty = staticmethod(np.empty)

    class cuda:  # noqa: N801 (CuPy's name)
        class Device:
            id = 0

    class RawModule:
        launches: list = []

        def __init__(self, code: str) -> None:
            self.entries = entry_points(code)

        def get_function(self, symbol: str):
            assert symbol in self.entries
            body = _backward if "backward" in symbol else _forward
            dtype = np.float32 if symbol.endswith("f32") else np.float64

            def launch(grid, block, args):
                per_block, threads = block
                assert grid[0] >= 1 and per_block * threads <= 1024 and threads & (threads - 1) == 0
                arrays = [a for a in args if isinstance(a, np.ndarray)]
                assert all(a.dtype == dtype and a.flags.c_contiguous for a in arrays)
                assert [type(a) for a in args[len(arrays):]] == [np.int64] * 3 + [np.float64] * 2 + [np.int32] * 3
                _StandInCupy.RawModule.launches.append((symbol, grid, block))
                with np.errstate(all="ignore"):
                    body(*args)

            return launch


def _attrs(axis=1, with_scale=True, with_offset=True, relu=False, epsilon=1e-3):
    return {"axis": axis, "epsilon": epsilon, "with_scale": with_scale, "with_offset": with_offset,
            "activation": "relu" if relu else None}


def _case(shape, dtype, attrs, seed=0):
    """Arrays of a forward and its gradient: x, the parameters the attributes ask for, dy."""
    rng = np.random.default_rng(seed)
    axis = attrs["axis"] % len(shape)
    x = (rng.normal(size=shape) * 3 + 5).astype(dtype)  # a mean large against the spread
    params = [(rng.normal(size=shape[axis]) + 1).astype(dtype) for flag in ("with_scale", "with_offset")
              if attrs[flag]]
    dy = rng.normal(size=shape).astype(dtype)
    return x, params, dy


def _contexts(xp, x, params, attrs, ops=None):
    specs = [BlobSpec(x.shape, np.dtype(x.dtype))] + [BlobSpec(p.shape, np.dtype(p.dtype)) for p in params]
    outs = BATCH_NORM_TRAIN.infer(specs, attrs)
    forward = KernelContext(xp, None, "batch_norm_train", "bn", attrs, tuple(specs), tuple(outs), job_type="train",
                            ops=ops)
    relu = attrs["activation"] == "relu"
    grad_specs = [specs[0], outs[1], outs[2]] + specs[1:2] * bool(attrs["with_scale"]) + [specs[0]] * (1 + relu)
    grad_attrs = {**attrs, "forward": "bn"}
    backward = KernelContext(xp, None, "batch_norm_train_grad", "bn_grad", grad_attrs, tuple(grad_specs),
                             tuple(BATCH_NORM_TRAIN_GRAD.infer(grad_specs, grad_attrs)), job_type="train", ops=ops)
    return forward, backward


def _as_tuple(result):
    return result if isinstance(result, tuple) else (result,)


def _run(forward_builder, backward_builder, xp, x, params, dy, attrs):
    """(forward outputs, gradient outputs) of the builders on ``xp``, as numpy arrays."""
    to_numpy = getattr(xp, "asnumpy", np.asarray)
    forward_ctx, backward_ctx = _contexts(xp, x, params, attrs)
    x_dev, params_dev, dy_dev = xp.asarray(x), [xp.asarray(p) for p in params], xp.asarray(dy)
    y, mean, variance = forward_builder(forward_ctx)(x_dev, *params_dev)
    saved = [x_dev, mean, variance] + params_dev[:1] * bool(attrs["with_scale"])
    if attrs["activation"] == "relu":
        saved.append(y)
    grads = _as_tuple(backward_builder(backward_ctx)(*saved, dy_dev))
    return [to_numpy(a).copy() for a in (y, mean, variance)], [to_numpy(g).copy() for g in grads]


def _reference(x, params, dy, attrs):
    with np.errstate(all="ignore"):
        return _run(BATCH_NORM_TRAIN.kernel, BATCH_NORM_TRAIN_GRAD.kernel, np, x, params, dy, attrs)


def _assert_close(got, want, dtype):
    tol = 2e-5 if dtype == np.float32 else 1e-12
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.shape == w.shape and g.dtype == w.dtype
        np.testing.assert_allclose(g, w, rtol=tol, atol=tol)


SHAPES = [((4, 3, 5, 6), 1), ((6, 5, 7), -1), ((10, 40), 1), ((2, 3, 4, 5), 2), ((3, 1, 2), 1)]
FLAGS = [(True, True, False), (False, False, False), (True, False, True), (False, True, True)]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape,axis", SHAPES)
@pytest.mark.parametrize("with_scale,with_offset,relu", FLAGS)
def test_the_host_side_matches_the_records_kernels(dtype, shape, axis, with_scale, with_offset, relu):
    attrs = _attrs(axis, with_scale, with_offset, relu)
    x, params, dy = _case(shape, dtype, attrs)
    got = _run(batch_norm_kernels.batch_norm_train_kernel, batch_norm_kernels.batch_norm_train_grad_kernel,
               _StandInCupy(), x, params, dy, attrs)
    want = _reference(x, params, dy, attrs)
    _assert_close(got[0], want[0], dtype)
    _assert_close(got[1], want[1], dtype)


@pytest.mark.parametrize("shape,axis,block", [((4, 3, 5, 6), 1, (1, 512)), ((6, 5, 7), -1, (8, 64)),
                                              ((10, 40), 1, (32, 16)), ((3, 1, 2), 1, (1, 512)),
                                              ((7, 1), 1, (1, 512))])
def test_channels_last_gets_a_warp_across_channels(shape, axis, block):
    _StandInCupy.RawModule.launches.clear()
    attrs = _attrs(axis)
    x, params, dy = _case(shape, np.float32, attrs)
    _run(batch_norm_kernels.batch_norm_train_kernel, batch_norm_kernels.batch_norm_train_grad_kernel,
         _StandInCupy(), x, params, dy, attrs)
    channels = shape[axis]
    grid = (-(-channels // block[0]),)
    assert _StandInCupy.RawModule.launches == [("batch_norm_forward_f32", grid, block),
                                               ("batch_norm_backward_f32", grid, block)]


def test_strided_inputs_are_copied_into_one_buffer_made_on_first_use():
    attrs = _attrs(1, relu=True)
    x, params, dy = _case((5, 4, 3), np.float64, attrs)
    want = _reference(x, params, dy, attrs)
    cp = _StandInCupy()
    forward_ctx, backward_ctx = _contexts(cp, x, params, attrs)
    made = []
    workspace = forward_ctx.workspace
    forward_ctx.workspace = lambda shape, dtype: made.append(shape) or workspace(shape, dtype)
    forward = batch_norm_kernels.batch_norm_train_kernel(forward_ctx)
    strided = np.asfortranarray(x)
    for _ in range(3):
        y, mean, variance = forward(strided, *params)
    assert made == [x.shape]  # once, for x only
    _assert_close([y, mean, variance], want[0], np.float64)
    backward = batch_norm_kernels.batch_norm_train_grad_kernel(backward_ctx)
    grads = backward(strided, mean, variance, params[0], np.asfortranarray(y), np.asfortranarray(dy))
    _assert_close(list(grads), want[1], np.float64)


def test_a_dtype_without_an_entry_point_runs_the_records_own_kernel():
    ran = []

    def record_kernel(ctx):
        ran.append(ctx.op)
        return "the record's kernel"

    attrs = _attrs()
    x, params, _ = _case((4, 3, 2), np.float16, attrs)
    forward_ctx, backward_ctx = _contexts(_StandInCupy(), x, params, attrs, ops=Records(record_kernel))
    assert batch_norm_kernels.batch_norm_train_kernel(forward_ctx) == "the record's kernel"
    assert batch_norm_kernels.batch_norm_train_grad_kernel(backward_ctx) == "the record's kernel"
    assert ran == ["batch_norm_train", "batch_norm_train_grad"]


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape,axis", SHAPES + [((32, 64, 28, 28), 1), ((64, 14, 14, 256), 3), ((3, 70000), 1)])
@pytest.mark.parametrize("with_scale,with_offset,relu", FLAGS)
def test_the_cuda_kernels_match_the_records_numpy_kernels(dtype, shape, axis, with_scale, with_offset, relu):
    cp = available_cupy()
    attrs = _attrs(axis, with_scale, with_offset, relu)
    x, params, dy = _case(shape, dtype, attrs, seed=1)
    got = _run(batch_norm_kernels.batch_norm_train_kernel, batch_norm_kernels.batch_norm_train_grad_kernel, cp,
               x, params, dy, attrs)
    want = _reference(x, params, dy, attrs)
    _assert_close(got[0], want[0], dtype)
    _assert_close(got[1], want[1], dtype)


def test_the_module_lists_its_overrides_for_the_records_ops():
    declared = entry_points(source(batch_norm_kernels.FAMILY))
    assert set(batch_norm_kernels.OVERRIDES) == set(batch_norm_kernels.KERNEL_BUILDERS) == {
        BATCH_NORM_TRAIN.name, BATCH_NORM_TRAIN_GRAD.name}
    for family, symbols in batch_norm_kernels.OVERRIDES.values():
        assert family == batch_norm_kernels.FAMILY and set(symbols.values()) <= set(declared)
