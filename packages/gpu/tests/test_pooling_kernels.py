"""The gpu backend's 2-D max pooling (flowjob-kernels' cuda/pooling.cu).

Without a device: the builders' host side against a stand-in CuPy whose ``RawModule`` runs each entry point as a
line-by-line Python transcription of the CUDA kernel (one loop iteration per CUDA thread, the same argument list,
index arithmetic and scalar rounding), checked bit for bit against the records' own numpy kernels: layouts,
paddings, overlapping and gapped windows, ties, -inf, NaN and inf, the forward's taps found by the gradient node
through ``ctx.shared`` or recomputed from x and y, the fused ReLU gradient and the fallback to the record's kernel.
With a device (``gpu`` marker): the CUDA kernels against the records' numpy kernels, bit for bit too."""
from __future__ import annotations

import numpy as np
import pytest

from flowjob_core import BlobSpec, KernelContext
from flowjob_core.testing.modules import sibling
from flowjob_gpu import available_cupy, pooling_kernels
from flowjob_kernels import entry_points, source
from flowjob_ops.records.pool import MAX_POOL2D, MAX_POOL2D_GRAD, MAX_POOL2D_RELU_GRAD

Records = sibling(__file__, "record_registry").Records

RECORDS = {r.name: r for r in (MAX_POOL2D, MAX_POOL2D_GRAD, MAX_POOL2D_RELU_GRAD)}


def _split(o, channels, oh_size, ow_size, last):
    if last:
        o, c = divmod(o, channels)
        o, ow = divmod(o, ow_size)
        n, oh = divmod(o, oh_size)
    else:
        o, ow = divmod(o, ow_size)
        o, oh = divmod(o, oh_size)
        n, c = divmod(o, channels)
    return n, c, oh, ow


def _plane(n, c, channels, height, width, last):
    if last:
        return n * height * width * channels + c, width * channels, channels
    return (n * channels + c) * height * width, width, 1


def _tap(x, plane, h, w, height, width):
    base, row, col = plane
    return x[base + h * row + w * col] if 0 <= h < height and 0 <= w < width else x.dtype.type(-np.inf)


def _first_hit(x, plane, oh, ow, height, width, kw, sh, sw, ph, pw, target, limit):
    for t in range(limit):
        th, tw = divmod(t, kw)
        if _tap(x, plane, oh * sh - ph + th, ow * sw - pw + tw, height, width) == target:
            return t
    return -1


def _forward(x, y, argmax, save, batch, channels, height, width, oh_size, ow_size, kh, kw, sh, sw, ph, pw, last):
    x, y, argmax = x.reshape(-1), y.reshape(-1), argmax.reshape(-1)
    for o in range(int(batch * channels * oh_size * ow_size)):
        n, c, oh, ow = _split(o, channels, oh_size, ow_size, last)
        plane = _plane(n, c, channels, height, width, last)
        h0, w0 = oh * sh - ph, ow * sw - pw
        best = _tap(x, plane, h0, w0, height, width)
        for t in range(1, kh * kw):
            th, tw = divmod(t, kw)
            v = _tap(x, plane, h0 + th, w0 + tw, height, width)
            best = best if (best > v or best != best) else v  # numpy's maximum
        y[o] = best
        if save:
            argmax[o] = _first_hit(x, plane, oh, ow, height, width, kw, sh, sw, ph, pw, best, kh * kw)


def _backward(x, y, dy, argmax, dx, saved, relu, overwrite, batch, channels, height, width, oh_size, ow_size, kh,
              kw, sh, sw, ph, pw, last):
    x, y, dy, argmax, dx = x.reshape(-1), y.reshape(-1), dy.reshape(-1), argmax.reshape(-1), dx.reshape(-1)
    t_ = x.dtype.type
    for i in range(int(batch * channels * height * width)):
        n, c, h, w = _split(i, channels, height, width, last)
        plane = _plane(n, c, channels, height, width, last)
        value = t_(0) if saved else x[i]
        acc = t_(0)
        for th in range(kh):
            hh = h + ph - th
            if hh < 0:
                break
            if hh % sh:
                continue
            oh = hh // sh
            if oh >= oh_size:
                continue
            for tw in range(kw):
                ww = w + pw - tw
                if ww < 0:
                    break
                if ww % sw:
                    continue
                ow = ww // sw
                if ow >= ow_size:
                    continue
                o = ((n * oh_size + oh) * ow_size + ow) * channels + c if last else \
                    ((n * channels + c) * oh_size + oh) * ow_size + ow
                t = th * kw + tw
                if saved:
                    hit = argmax[o] == t
                else:
                    hit = value == y[o] and _first_hit(x, plane, oh, ow, height, width, kw, sh, sw, ph, pw, y[o],
                                                       t) < 0
                g = dy[o]
                if relu:
                    g = g * t_(y[o] > 0)
                share = g * t_(hit)
                acc = share if overwrite else acc + share
        dx[i] = acc


class _StandInCupy:
    """numpy behind the names the builders use; ``RawModule`` checks the symbol is an entry point of the source,
    the launches are recorded (symbol, whether the backward got the forward's taps, and relu)."""

    int32, int64 = np.int32, np.int64
    asarray = staticmethod(np.asarray)
    copyto = staticmethod(np.copyto)
    empty = staticmethod(np.empty)
    launches: list = []

    class cuda:  # noqa: N801 (CuPy's name)
        class Device:
            id = 0

    class RawModule:
        def __init__(self, code: str) -> None:
            self.entries = entry_points(code)

        def get_function(self, symbol: str):
            assert symbol in self.entries
            backward = "backward" in symbol
            dtype = np.float32 if symbol.endswith("f32") else np.float64

            def launch(grid, block, args):
                assert grid[0] >= 1 and block == (pooling_kernels.BLOCK,)
                arrays = 5 if backward else 3
                assert all(a.flags.c_contiguous for a in args[:arrays])
                assert [a.dtype for a in args[:arrays]] == (
                    [dtype] * 3 + [np.int32, dtype] if backward else [dtype, dtype, np.int32])
                flags = 3 if backward else 1
                assert [type(a) for a in args[arrays:]] == [np.int32] * flags + [np.int64] * 6 + [np.int32] * 7
                scalars = [int(a) for a in args[arrays:]]
                _StandInCupy.launches.append((symbol, *scalars[:flags]))
                with np.errstate(all="ignore"):
                    (_backward if backward else _forward)(*args[:arrays], *scalars)

            return launch


def _contexts(xp, shape, dtype, attrs, shared, job="train", ops=None, grad_op="max_pool2d_grad"):
    x = BlobSpec(shape, np.dtype(dtype))
    (y,) = MAX_POOL2D.infer([x], attrs)
    forward = KernelContext(xp, None, "max_pool2d", "pool", attrs, (x,), (y,), job_type=job, shared=shared, ops=ops)
    backward = KernelContext(xp, None, grad_op, "pool_grad", attrs, (x, y, y), (x,), job_type=job, shared=shared,
                             ops=ops)
    return forward, backward


def _reference(x, dy, attrs, relu=False):
    """The records' numpy kernels: y and dx."""
    forward, backward = _contexts(np, x.shape, x.dtype, attrs, {},
                                  grad_op="max_pool2d_relu_grad" if relu else "max_pool2d_grad")
    with np.errstate(all="ignore"):
        y = MAX_POOL2D.kernel(forward)(x).copy()
        dx = RECORDS[backward.op].kernel(backward)(x, y, dy).copy()
    return y, dx


def _x(shape, dtype, rng, special=False):
    """Values with ties (few distinct values), and with ``special`` some -inf and NaN."""
    x = rng.integers(-3, 4, size=shape).astype(dtype)
    if special:
        flat = x.reshape(-1)
        flat[rng.choice(flat.size, flat.size // 5, replace=False)] = -np.inf
        flat[rng.choice(flat.size, 2, replace=False)] = np.nan
        flat[rng.choice(flat.size, 3, replace=False)] = -0.0
    return x


def _dy(shape, dtype, rng, special=False):
    dy = rng.normal(size=shape).astype(dtype)
    if special:
        dy.reshape(-1)[0] = np.inf
    return dy


# (shape, attrs): overlapping, tiling, gapped windows; every padding form; both layouts
CASES = [
    ((2, 3, 7, 8), {"ksize": 3, "strides": 2, "padding": "SAME", "data_format": "NCHW"}),
    ((2, 7, 8, 3), {"ksize": 3, "strides": 2, "padding": "SAME_UPPER", "data_format": "NHWC"}),
    ((1, 2, 6, 6), {"ksize": 2, "strides": 2, "padding": "VALID"}),
    ((2, 5, 7, 2), {"ksize": [2, 3], "strides": [3, 2], "padding": "valid", "data_format": "channels_last"}),
    ((1, 2, 5, 6), {"ksize": [3, 2], "strides": 1, "padding": [[1, 2], [0, 1]], "data_format": "channels_first"}),
    ((1, 4, 4, 2), {"ksize": 2, "strides": 1, "padding": [[0, 0], [3, 1], [2, 2], [0, 0]], "data_format": "NHWC"}),
    ((2, 1, 5, 5), {"ksize": 5, "strides": 5, "padding": 0}),
    ((1, 2, 3, 3), {"ksize": 2, "strides": 2, "padding": 2}),  # windows of padding only
]


def _cuda_run(xp, x, dy, attrs, relu=False, shared=None):
    """y and dx of the builders on ``xp`` (as numpy), the forward run first as in a train plan."""
    to_numpy = getattr(xp, "asnumpy", np.asarray)
    forward_ctx, backward_ctx = _contexts(xp, x.shape, x.dtype, attrs, {} if shared is None else shared,
                                          grad_op="max_pool2d_relu_grad" if relu else "max_pool2d_grad")
    forward = pooling_kernels.max_pool2d_kernel(forward_ctx)
    backward = pooling_kernels.max_pool2d_grad_kernel(backward_ctx)
    x_dev = xp.asarray(x)
    y = forward(x_dev)
    dx = backward(x_dev, y, xp.asarray(dy))
    return to_numpy(y).copy(), to_numpy(dx).copy()


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape,attrs", CASES)
@pytest.mark.parametrize("special", [False, True])
def test_the_host_side_matches_the_records_kernels_bit_for_bit(dtype, shape, attrs, special):
    rng = np.random.default_rng(0)
    x = _x(shape, dtype, rng, special)
    (y_spec,) = MAX_POOL2D.infer([BlobSpec(shape, np.dtype(dtype))], attrs)
    dy = _dy(y_spec.shape, dtype, rng, special)
    _StandInCupy.launches.clear()
    got = _cuda_run(_StandInCupy(), x, dy, attrs)
    forward, backward = _StandInCupy.launches
    assert forward == (pooling_kernels.FORWARD[np.dtype(dtype).name], 1)
    assert backward[:3] == (pooling_kernels.BACKWARD[np.dtype(dtype).name], 1, 0)  # the forward's taps, no relu
    want = _reference(x, dy, attrs)
    for g, w in zip(got, want):
        assert g.dtype == w.dtype and g.shape == w.shape
        np.testing.assert_array_equal(g.view(f"u{g.itemsize}"), w.view(f"u{w.itemsize}"))  # the bits, -0 and NaN


@pytest.mark.parametrize("shape,attrs", CASES[:2] + CASES[4:6])
@pytest.mark.parametrize("relu", [False, True])
def test_a_gradient_without_the_forwards_taps_finds_the_first_maximum_itself(shape, attrs, relu):
    rng = np.random.default_rng(1)
    x = _x(shape, np.float32, rng, special=True)
    shared: dict = {}
    forward_ctx, backward_ctx = _contexts(_StandInCupy(), shape, np.float32, attrs, shared,
                                          grad_op="max_pool2d_relu_grad" if relu else "max_pool2d_grad")
    forward = pooling_kernels.max_pool2d_kernel(forward_ctx)
    backward = pooling_kernels.max_pool2d_grad_kernel(backward_ctx)
    y = forward(x)
    dy = _dy(y.shape, np.float32, rng)
    want_y, want_dx = _reference(x, dy, attrs, relu)
    _StandInCupy.launches.clear()
    x_elsewhere, y_elsewhere = x.copy(), y.copy()
    for args in [(x_elsewhere, y, dy), (x, y_elsewhere, dy), (x, y, dy)]:
        np.testing.assert_array_equal(backward(*args), want_dx)
    assert [launch[1:3] for launch in _StandInCupy.launches] == [(0, relu), (0, relu), (1, relu)]
    # another forward node writing the same buffer later: its taps, not this node's, belong to that y
    other_ctx, _ = _contexts(_StandInCupy(), shape, np.float32, attrs, shared)
    other_ctx.node_name = "other_pool"
    other_ctx._out_buffer = lambda index: y
    pooling_kernels.max_pool2d_kernel(other_ctx)(x)
    _StandInCupy.launches.clear()
    backward(x, y, dy)
    assert _StandInCupy.launches[-1][1] == 1  # the other node ran on the same x: its taps are as good
    pooling_kernels.max_pool2d_kernel(other_ctx)(x_elsewhere)
    backward(x, y, dy)
    assert _StandInCupy.launches[-1][1] == 0


def test_an_eval_job_saves_no_taps_and_its_gradient_finds_them():
    attrs = CASES[0][1]
    rng = np.random.default_rng(2)
    x = _x(CASES[0][0], np.float64, rng)
    shared: dict = {}
    forward_ctx, backward_ctx = _contexts(_StandInCupy(), x.shape, x.dtype, attrs, shared, job="predict")
    _StandInCupy.launches.clear()
    y = pooling_kernels.max_pool2d_kernel(forward_ctx)(x)
    dy = _dy(y.shape, np.float64, rng)
    dx = pooling_kernels.max_pool2d_grad_kernel(backward_ctx)(x, y, dy)
    assert [launch[1] for launch in _StandInCupy.launches] == [0, 0]
    assert not any(key[0] == pooling_kernels.SHARED for key in shared if isinstance(key, tuple))
    want_y, want_dx = _reference(x, dy, attrs)
    np.testing.assert_array_equal(y, want_y)
    np.testing.assert_array_equal(dx, want_dx)


def test_strided_inputs_are_copied_into_one_buffer_made_on_first_use():
    shape, attrs = CASES[1]
    rng = np.random.default_rng(3)
    x = _x(shape, np.float32, rng)
    forward_ctx, backward_ctx = _contexts(_StandInCupy(), shape, np.float32, attrs, {})
    made = []
    workspace = forward_ctx.workspace
    forward_ctx.workspace = lambda shape, dtype: made.append((shape, np.dtype(dtype))) or workspace(shape, dtype)
    forward = pooling_kernels.max_pool2d_kernel(forward_ctx)
    strided = np.asfortranarray(x)
    for _ in range(3):
        y = forward(strided)
    want_y, _ = _reference(x, np.zeros_like(y), attrs)
    np.testing.assert_array_equal(y, want_y)
    assert made == [(y.shape, np.dtype(np.int32)), (shape, np.dtype(np.float32))]  # the taps, then x once
    dy = _dy(y.shape, np.float32, rng)
    dx = pooling_kernels.max_pool2d_grad_kernel(backward_ctx)(strided, y, np.asfortranarray(dy))
    np.testing.assert_array_equal(dx, _reference(x, dy, attrs)[1])


def test_a_dtype_without_an_entry_point_runs_the_records_own_kernel():
    ran = []

    def record_kernel(ctx):
        ran.append(ctx.op)
        return "the record's kernel"

    forward_ctx, backward_ctx = _contexts(_StandInCupy(), (1, 2, 4, 4), np.float16, CASES[2][1], {},
                                          ops=Records(record_kernel))
    assert pooling_kernels.max_pool2d_kernel(forward_ctx) == "the record's kernel"
    assert pooling_kernels.max_pool2d_grad_kernel(backward_ctx) == "the record's kernel"
    assert ran == ["max_pool2d", "max_pool2d_grad"]


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape,attrs", CASES + [
    ((8, 64, 56, 56), {"ksize": 3, "strides": 2, "padding": "SAME", "data_format": "NCHW"}),
    ((8, 56, 56, 64), {"ksize": 3, "strides": 2, "padding": [[1, 1], [1, 1]], "data_format": "NHWC"}),
    ((4, 16, 7, 7), {"ksize": 7, "strides": 1, "padding": "VALID"})])
@pytest.mark.parametrize("special", [False, True])
@pytest.mark.parametrize("relu", [False, True])
def test_the_cuda_kernels_match_the_records_numpy_kernels_bit_for_bit(dtype, shape, attrs, special, relu):
    cp = available_cupy()
    rng = np.random.default_rng(4)
    x = _x(shape, dtype, rng, special)
    (y_spec,) = MAX_POOL2D.infer([BlobSpec(shape, np.dtype(dtype))], attrs)
    dy = _dy(y_spec.shape, dtype, rng, special)
    want = _reference(x, dy, attrs, relu)
    got = _cuda_run(cp, x, dy, attrs, relu)  # the gradient reads the forward's taps
    _, alone = _contexts(cp, shape, dtype, attrs, {}, grad_op="max_pool2d_relu_grad" if relu else "max_pool2d_grad")
    found = cp.asnumpy(pooling_kernels.max_pool2d_grad_kernel(alone)(cp.asarray(x), cp.asarray(got[0]), cp.asarray(dy)))
    for g, w in zip(got + (found,), want + (want[1],)):
        assert g.dtype == w.dtype and g.shape == w.shape
        np.testing.assert_array_equal(g.view(f"u{g.itemsize}"), w.view(f"u{w.itemsize}"))


def test_the_module_lists_its_overrides_for_the_records_ops():
    declared = entry_points(source(pooling_kernels.FAMILY))
    assert set(pooling_kernels.OVERRIDES) == set(pooling_kernels.KERNEL_BUILDERS) == set(RECORDS)
    for family, symbols in pooling_kernels.OVERRIDES.values():
        assert family == pooling_kernels.FAMILY and set(symbols.values()) <= set(declared)
