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


def _channel_values(a, outer, channels, inner, c):
    """Channel c's values in the kernels' order: value v is (o, j) = (v // inner, v % inner)."""
    return a.reshape(int(outer), int(channels), int(inner))[:, c, :].reshape(-1)


def _slices(n, per_slice, splits):
    return [slice(s * per_slice, min(n, (s + 1) * per_slice)) for s in range(splits)]


def _total(partial, splits, channels, c):
    """A channel's partials added in slice order, in double, as slices_total does."""
    total = 0.0
    for s in range(splits):
        total += float(partial[s * channels + c])
    return total


def _split_moment(splits, x, partial, sums, outer, channels, inner, per_slice, inv_n, moment):
    t, n = x.dtype.type, int(outer) * int(inner)
    for c in range(int(channels)):
        values = _channel_values(x, outer, channels, inner, c)
        m = t(_total(sums, splits, int(channels), c) * inv_n) if moment else None
        for s, part in enumerate(_slices(n, int(per_slice), splits)):
            v = values[part]
            partial[s * int(channels) + c] = np.sum((v - m) * (v - m) if moment else v, dtype=np.float64)


def _split_normalize(splits, x, gamma, beta, y, mean, variance, sums, squares, outer, channels, inner, per_slice,
                     inv_n, epsilon, with_scale, with_offset, relu):
    t, C = x.dtype.type, int(channels)
    y3 = y.reshape(int(outer), C, int(inner))
    x3 = x.reshape(int(outer), C, int(inner))
    for c in range(C):
        m, var = t(_total(sums, splits, C, c) * inv_n), t(_total(squares, splits, C, c) * inv_n)
        mean[c], variance[c] = m, var
        scale = 1.0 / np.sqrt(np.float64(var) + epsilon)
        if with_scale:
            scale = scale * np.float64(gamma[c])
        v = (x3[:, c] - m) * t(scale)
        if with_offset:
            v = v + beta[c]
        y3[:, c] = np.maximum(v, t(0)) if relu else v


def _split_grad_sums(splits, x, mean, y, dy, partial, outer, channels, inner, per_slice, relu):
    n, C = int(outer) * int(inner), int(channels)
    for c in range(C):
        g = _channel_values(dy, outer, channels, inner, c)
        if relu:
            g = g * (_channel_values(y, outer, channels, inner, c) > 0).astype(x.dtype)
        centred = _channel_values(x, outer, channels, inner, c) - mean[c]
        for s, part in enumerate(_slices(n, int(per_slice), splits)):
            partial[s * C + c] = np.sum(g[part], dtype=np.float64)
            partial[(splits + s) * C + c] = np.sum(g[part] * centred[part], dtype=np.float64)


def _split_grad_apply(splits, x, mean, variance, gamma, y, dy, dx, dgamma, dbeta, partial, outer, channels, inner,
                      per_slice, inv_n, epsilon, with_scale, with_offset, relu):
    t, C = x.dtype.type, int(channels)
    x3, y3, dy3, dx3 = _view(outer, channels, inner, x, y, dy, dx)
    for c in range(C):
        sum_dy = _total(partial, splits, C, c)
        sum_dy_centred = _total(partial[splits * C:], splits, C, c)
        g = dy3[:, c] * (y3[:, c] > 0).astype(x.dtype) if relu else dy3[:, c]
        inv_sigma = 1.0 / np.sqrt(np.float64(variance[c]) + epsilon)
        if with_scale:
            dgamma[c] = t(sum_dy_centred * inv_sigma)
        if with_offset:
            dbeta[c] = t(sum_dy)
        gain = t(inv_sigma * np.float64(gamma[c]) if with_scale else inv_sigma)
        along = t(-inv_sigma * inv_sigma * sum_dy_centred * inv_n)
        dx3[:, c] = ((x3[:, c] - mean[c]) * along + g - t(sum_dy * inv_n)) * gain


SPLIT_BODIES = {"moment": _split_moment, "normalize": _split_normalize, "grad_sums": _split_grad_sums,
                "grad_apply": _split_grad_apply}


class _StandInCupy:
    """numpy behind the names the builders use; ``RawModule`` checks the symbol is an entry point of the source."""

    int32, int64, float64 = np.int32, np.int64, np.float64
    asarray = staticmethod(np.asarray)
    copyto = staticmethod(np.copyto)
    empty = staticmethod(np.empty)

    class cuda:  # noqa: N801 (CuPy's name)
        class Device:
            id = 0

        class runtime:  # noqa: N801
            multiprocessors = 132

            @classmethod
            def getDeviceProperties(cls, device):  # noqa: N802 (CuPy's name)
                return {"multiProcessorCount": cls.multiprocessors}

    class RawModule:
        launches: list = []

        def __init__(self, code: str) -> None:
            self.entries = entry_points(code)

        def get_function(self, symbol: str):
            assert symbol in self.entries
            dtype = np.float32 if symbol.endswith("f32") else np.float64
            if symbol.startswith("batch_norm_split_"):
                return self.split_launch(symbol, SPLIT_BODIES[symbol[len("batch_norm_split_"):-4]], dtype)
            body = _backward if "backward" in symbol else _forward

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

        @staticmethod
        def split_launch(symbol, body, dtype):
            def launch(grid, block, args):
                groups, splits = grid
                per_block, threads = block
                assert per_block * threads <= 1024 and threads & (threads - 1) == 0 and splits > 1
                arrays = [a for a in args if isinstance(a, np.ndarray)]
                assert all(a.flags.c_contiguous and a.dtype in (dtype, np.float64) for a in arrays)
                assert any(a.ndim == 1 and a.dtype == np.float64 and a.size % splits == 0 for a in arrays)  # partials
                _StandInCupy.RawModule.launches.append((symbol, grid, block))
                with np.errstate(all="ignore"):
                    body(splits, *args)

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


SPLIT_SHAPES = [((6, 2, 20, 20), 1, 4), ((7, 2, 13, 13), 1, 2), ((64, 40), 1, 4), ((16, 9, 9, 3), -1, 10)]


@pytest.fixture
def few_multiprocessors(monkeypatch):
    """A device of 8 multiprocessors, and slices of at least one value a thread: small channels split."""
    monkeypatch.setattr(_StandInCupy.cuda.runtime, "multiprocessors", 8)
    monkeypatch.setattr(batch_norm_kernels, "MIN_SLICE_ROWS", 1)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape,axis,splits", SPLIT_SHAPES)
@pytest.mark.parametrize("with_scale,with_offset,relu", FLAGS)
def test_channels_split_over_blocks_match_the_records_kernels(few_multiprocessors, dtype, shape, axis, splits,
                                                              with_scale, with_offset, relu):
    _StandInCupy.RawModule.launches.clear()
    attrs = _attrs(axis, with_scale, with_offset, relu)
    x, params, dy = _case(shape, dtype, attrs)
    got = _run(batch_norm_kernels.batch_norm_train_kernel, batch_norm_kernels.batch_norm_train_grad_kernel,
               _StandInCupy(), x, params, dy, attrs)
    want = _reference(x, params, dy, attrs)
    _assert_close(got[0], want[0], dtype)
    _assert_close(got[1], want[1], dtype)
    suffix = "f32" if dtype == np.float32 else "f64"
    symbols = [symbol for symbol, _, _ in _StandInCupy.RawModule.launches]
    assert symbols == [f"batch_norm_split_{name}_{suffix}" for name in
                       ("moment", "moment", "normalize", "grad_sums", "grad_apply")]
    assert {grid[1] for _, grid, _ in _StandInCupy.RawModule.launches} == {splits}


def test_the_split_symbols_are_entry_points_of_the_source():
    declared = set(entry_points(source(batch_norm_kernels.FAMILY)))
    for table in (batch_norm_kernels.SPLIT_FORWARD, batch_norm_kernels.SPLIT_BACKWARD):
        for symbols in table.values():
            assert set(symbols.values()) <= declared


# ResNet-50's batch norms (channels, height = width) at 224x224 inputs, torchvision's layout (stride on the 3x3)
RESNET50_BN = [(64, 112), (64, 56), (256, 56), (128, 56), (128, 28), (512, 28), (256, 28), (256, 14), (1024, 14),
               (512, 14), (512, 7), (2048, 7)]


@pytest.mark.parametrize("batch", [16, 32])
@pytest.mark.parametrize("channels,size", RESNET50_BN)
def test_every_resnet50_batch_norm_fills_an_h200(batch, channels, size):
    sms = 132
    splits, per_slice = batch_norm_kernels.split(channels, batch * size * size, batch_norm_kernels.THREADS, sms)
    blocks = channels * splits
    assert blocks >= sms, (channels, size, splits)
    if channels < batch_norm_kernels.BLOCKS_PER_SM * sms and per_slice >= 2 * 8 * batch_norm_kernels.THREADS:
        assert blocks >= batch_norm_kernels.BLOCKS_PER_SM * sms  # long channels fill every multiprocessor
    assert splits * per_slice >= batch * size * size > (splits - 1) * per_slice  # the slices cover the values
    if channels == 64:
        assert splits > 1  # the stem's 64 channels are shared by blocks, not one block each


def test_a_split_channel_s_slices_are_nearly_equal_and_never_empty():
    for values in (1, 100, 4095, 4096, 4097, 401408):
        for groups in (1, 3, 64, 1000):
            splits, per_slice = batch_norm_kernels.split(groups, values, 512, 132)
            assert 1 <= splits <= batch_norm_kernels.MAX_SPLITS
            assert (splits - 1) * per_slice < values <= splits * per_slice


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape,axis", SHAPES + [((32, 64, 28, 28), 1), ((64, 14, 14, 256), 3), ((3, 70000), 1),
                                                 ((32, 64, 112, 112), 1), ((8, 128, 56, 56), 1)])
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
