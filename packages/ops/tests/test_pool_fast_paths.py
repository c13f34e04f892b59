"""The cpu backend's tiled, cache-blocked max pooling against the reference kernels, bit for bit.

When the windows tile the (padded) plane (ksize == strides, e.g. LeNet's 2x2 / stride 2
pooling), ``TiledMaxPool2d`` and ``TiledMaxPool2dBackward`` (``flowjob_ops.overrides.cpu.pool_cache_blocked``, the cpu
overrides of max_pool2d / max_pool2d_grad / max_pool2d_relu_grad) take a blocked path; everywhere
else they run the plane-layout tap-by-tap path of ``flowjob_ops.overrides.cpu.pool_plane_layout``.  Each fast result
is compared with the reference kernel's (and a few with the nested-loop references).  Equality
is bitwise: the same NaN payloads, signs of zero and infinities, including ties (small-integer
data), NaN in x or dy, negative values under the ReLU mask, float64, integer dtypes, NHWC, many
or few blocks, and inputs in the strided memory layouts
of the conv kernels' outputs ((C, N, H, W) and (H, W, N, C) behind an NCHW shape)."""

from __future__ import annotations

import pathlib
import sys
import threading
import zlib
from typing import Any

import numpy as np
import pytest
from flowjob_core.backends.host_threads import HostThreads
from flowjob_core.testing.modules import sibling

try:
    from flowjob_ops.overrides.cpu import pool_cache_blocked as tiled
except ModuleNotFoundError:  # package not installed yet: use the source tree
    sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "src"))
    from flowjob_ops.overrides.cpu import pool_cache_blocked as tiled
from flowjob_ops.overrides.cpu import pool_plane_layout as reference

ref = sibling(__file__, "reference_loops")

# (ksize, strides, padding, H, W): windows tiling the plane, without and with padding
TILED = [
    ((2, 2), (2, 2), "SAME", 8, 6),
    ((2, 2), (2, 2), "VALID", 6, 8),
    ((2, 2), (2, 2), "SAME", 7, 5),  # padded to 8x6
    ((2, 2), (2, 2), "SAME_LOWER", 5, 7),
    ((3, 3), (3, 3), "VALID", 6, 9),
    ((2, 3), (2, 3), "SAME", 5, 7),
    ((3, 2), (3, 2), ((1, 0), (0, 1)), 5, 5),
    ((3, 2), (3, 2), "VALID", 6, 4),
    ((1, 2), (1, 2), "VALID", 3, 6),
    ((2, 1), (2, 1), "VALID", 6, 3),
]
# generic path: overlapping windows, gaps between windows, windows that miss the last rows
GENERIC = [
    ((3, 3), (2, 2), "SAME", 7, 8),
    ((2, 2), (1, 1), "VALID", 5, 6),
    ((2, 2), (3, 3), "VALID", 8, 8),
    ((2, 2), (2, 2), "VALID", 7, 5),
    ((1, 1), (1, 1), "VALID", 3, 4),
    ((4, 5), (1, 1), "VALID", 4, 5),  # global pooling
]
KINDS = ["ties", "normal", "relu", "special", "zeros"]
DTYPES = [np.float32, np.float64, np.int32, np.int64]


def _rng(*key: Any) -> np.random.Generator:
    return np.random.default_rng(zlib.crc32(repr(key).encode()))


def _nan(dtype: Any, payload: int) -> Any:
    """A NaN with a chosen payload (numpy keeps payloads through copies and max)."""
    if np.dtype(dtype) == np.float32:
        return np.array([0x7FC00000 | payload], np.uint32).view(np.float32)[0]
    return np.array([0x7FF8000000000000 | payload], np.uint64).view(np.float64)[0]


def _data(kind: str, shape: tuple[int, ...], dtype: Any, rng: np.random.Generator) -> np.ndarray:
    dt = np.dtype(dtype)
    if kind == "ties" or dt.kind == "i":
        return rng.integers(-2, 3, size=shape).astype(dt)  # many equal maxima in a window
    if kind == "zeros":  # +0 and -0 only, and a few ones: ties of signed zeros
        x = np.where(rng.random(shape) < 0.5, -0.0, 0.0).astype(dt)
        x[rng.random(shape) < 0.1] = 1
        return x
    x = rng.standard_normal(shape).astype(dt)
    if kind == "relu":
        return np.maximum(x, 0)  # a ReLU output: all-zero windows
    if kind == "special":
        u = rng.random(shape)
        x[u < 0.08] = np.inf
        x[(u >= 0.08) & (u < 0.16)] = -np.inf
        x[(u >= 0.16) & (u < 0.2)] = -0.0
        for k, flat in enumerate(np.flatnonzero(u >= 0.93)):
            x.flat[flat] = _nan(dt, 1 + k % 7)  # NaNs with different payloads
    return x


def _dy(kind: str, shape: tuple[int, ...], dtype: Any, rng: np.random.Generator) -> np.ndarray:
    dt = np.dtype(dtype)
    if dt.kind == "i":
        return rng.integers(-5, 6, size=shape).astype(dt)
    dy = rng.standard_normal(shape).astype(dt)
    if kind == "special":
        u = rng.random(shape)
        dy[u < 0.05] = np.nan
        dy[(u >= 0.05) & (u < 0.1)] = -np.inf
        dy[(u >= 0.1) & (u < 0.15)] = -0.0
    return dy


def _shape(fmt: str, n: int, c: int, h: int, w: int) -> tuple[int, int, int, int]:
    return (n, c, h, w) if fmt == "NCHW" else (n, h, w, c)


def _bits(a: np.ndarray) -> np.ndarray:
    a = np.ascontiguousarray(a)
    return a.view(np.dtype(f"u{a.dtype.itemsize}")) if a.dtype.kind == "f" else a


def _assert_same(got: np.ndarray, want: np.ndarray, *, nan_alike: bool = False) -> None:
    """Bit for bit; with ``nan_alike`` every NaN counts as the same NaN (the sign numpy gives a NaN
    made by inf * 0 depends on whether its loop ran contiguous or strided, in numpy 1.26)."""
    assert got.dtype == want.dtype and got.shape == want.shape
    if nan_alike and got.dtype.kind == "f":
        got, want = np.where(np.isnan(got), np.nan, got), np.where(np.isnan(want), np.nan, want)
    np.testing.assert_array_equal(_bits(got), _bits(want))


def _tiling(kernel: Any) -> Any:
    """The tiling a kernel used (it has met one input layout)."""
    (layout,) = kernel._layouts.values()
    return layout


# the cpu override of each reference kernel class
TILED_OF = {reference.MaxPool2d: tiled.TiledMaxPool2d, reference.MaxPool2dBackward: tiled.TiledMaxPool2dBackward}


def _kernels(cls: type, *args: Any, block_bytes: int | None = tiled.BLOCK_BYTES, planes: dict | None = None,
             **kwargs: Any) -> tuple[Any, Any]:
    """(the cpu override's kernel, the reference kernel) of reference class ``cls``; ``planes``: the
    override's ``plane_block_bytes`` and ``parallel``."""
    return TILED_OF[cls](np, *args, block_bytes=block_bytes, **(planes or {}), **kwargs), cls(np, *args, **kwargs)


@pytest.fixture(params=[tiled.BLOCK_BYTES, 1], ids=["one-block", "small-blocks"])
def block_bytes(request: pytest.FixtureRequest) -> int:
    """Run the tiled path in one block (the default size, for these small arrays), or in one block
    per index of the outermost axis."""
    return request.param


def _check_all(geometry: tuple, fmt: str, dtype: Any, kind: str, *, tiled_path: bool,
               block_bytes: int = tiled.BLOCK_BYTES, planes: dict | None = None) -> None:
    ksize, strides, padding, h, w = geometry
    rng = _rng(geometry, fmt, np.dtype(dtype).name, kind)
    shape = _shape(fmt, 3, 2, h, w)
    args = (shape, dtype, ksize, strides, padding, fmt)
    x = _data(kind, shape, dtype, rng)

    fast, slow = _kernels(reference.MaxPool2d, *args, block_bytes=block_bytes, planes=planes)
    assert fast._tiled == tiled_path
    y = fast(x).copy()
    _assert_same(y, slow(x))
    dy = _dy(kind, y.shape, dtype, rng)

    fast, slow = _kernels(reference.MaxPool2dBackward, *args, block_bytes=block_bytes, planes=planes)
    assert fast._tiled == tiled_path
    # blocks of single planes run numpy's loops on other strides than the whole array
    nan_alike = bool(planes)
    with np.errstate(invalid="ignore"):
        _assert_same(fast(x, y, dy), slow(x, y, dy), nan_alike=nan_alike)
        # again: the zeroed accumulator, the padding border
        _assert_same(fast(x, y, dy), slow(x, y, dy), nan_alike=nan_alike)

    fast, slow = _kernels(reference.MaxPool2dBackward, *args, relu=True, block_bytes=block_bytes, planes=planes)
    plain = reference.MaxPool2dBackward(np, *args)
    with np.errstate(invalid="ignore"):
        got = fast(x, y, dy).copy()
        _assert_same(got, slow(x, y, dy), nan_alike=nan_alike)
        # what max_pool2d_relu_grad computed before the kernel took the mask itself
        _assert_same(got, plain(x, y, dy * (y > 0)), nan_alike=nan_alike)
        # and the op's definition: relu_grad(x, max_pool2d_grad(x, y, dy))
        want = plain(x, y, dy) * (x > 0)
    np.testing.assert_array_equal(got, want)


# integer data is always small integers: one kind
DATA = [(dtype, kind) for dtype in DTYPES for kind in (KINDS if np.dtype(dtype).kind == "f" else ["ties"])]


@pytest.mark.parametrize("dtype, kind", DATA, ids=lambda v: v if isinstance(v, str) else np.dtype(v).name)
@pytest.mark.parametrize("fmt", ["NCHW", "NHWC"])
@pytest.mark.parametrize("geometry", TILED, ids=str)
def test_tiled_path_matches_the_reference(geometry: tuple, fmt: str, dtype: Any, kind: str, block_bytes: int) -> None:
    _check_all(geometry, fmt, dtype, kind, tiled_path=True, block_bytes=block_bytes)


def _thread_per_block(body: Any, count: int) -> None:
    """A ``Backend.parallel`` that runs every block on a thread of its own, all at once, under the caller's
    numpy error state (as ``HostThreads`` does: it is per thread)."""
    errors: list[BaseException] = []
    state = np.geterr()

    def run(i: int) -> None:
        try:
            with np.errstate(**state):
                body(i, i + 1)
        except BaseException as exc:  # re-raised below
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if errors:
        raise errors[0]


@pytest.mark.parametrize("dtype, kind", [(np.float32, "ties"), (np.float32, "special"), (np.float64, "ties")],
                         ids=str)
@pytest.mark.parametrize("fmt", ["NCHW", "NHWC"])
@pytest.mark.parametrize("geometry", TILED, ids=str)
def test_tiled_blocks_on_threads_match_the_reference(geometry: tuple, fmt: str, dtype: Any, kind: str) -> None:
    # one block per index of the outermost axis, each on its own thread with its own scratch
    _check_all(geometry, fmt, dtype, kind, tiled_path=True, block_bytes=1, planes={"parallel": _thread_per_block})


def _reversed_split(body: Any, count: int) -> None:
    """A ``Backend.parallel`` that runs the blocks one at a time, last first."""
    for i in reversed(range(count)):
        body(i, i + 1)


# the tap-by-tap path's blocks of planes: one block; one plane (NCHW) or image (NHWC) per block, in
# reverse order; and on two host threads
PLANES = {"one-block": {}, "per-plane-reversed": {"plane_block_bytes": 1, "parallel": _reversed_split},
          "per-plane-threads": {"plane_block_bytes": 1, "parallel": HostThreads().split}}


@pytest.mark.parametrize("planes", PLANES.values(), ids=PLANES.keys())
@pytest.mark.parametrize("kind", ["ties", "special"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("fmt", ["NCHW", "NHWC"])
@pytest.mark.parametrize("geometry", GENERIC, ids=str)
def test_shapes_without_tiling_match_the_reference_in_blocks_of_planes(geometry: tuple, fmt: str, dtype: Any,
                                                                      kind: str, planes: dict) -> None:
    _check_all(geometry, fmt, dtype, kind, tiled_path=False, planes=planes)
    if planes:
        kernel = tiled.TiledMaxPool2dBackward(np, _shape(fmt, 3, 2, *geometry[3:]), dtype, *geometry[:3], fmt,
                                              **planes)
        assert len(kernel._planes.blocks) == (6 if fmt == "NCHW" else 3)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("fmt", ["NCHW", "NHWC"])
@pytest.mark.parametrize("geometry", TILED[:4] + TILED[5:6], ids=str)
def test_tiled_path_matches_the_loop_reference(geometry: tuple, fmt: str, dtype: Any, block_bytes: int) -> None:
    ksize, strides, padding, h, w = geometry
    rng = _rng("loops", geometry, fmt)
    shape = _shape(fmt, 2, 3, h, w)
    x = rng.integers(-2, 3, size=shape).astype(np.float64)
    pads = tiled.TiledMaxPool2d(np, shape, dtype, ksize, strides, padding, fmt).window.pads
    y = ref.max_pool_ref(x, ksize, strides, pads, fmt)
    dy = rng.standard_normal(y.shape).astype(dtype).astype(np.float64)
    dx = ref.max_pool_grad_ref(x, dy, ksize, strides, pads, fmt)
    forward = tiled.TiledMaxPool2d(np, shape, dtype, ksize, strides, padding, fmt, block_bytes=block_bytes)
    backward = tiled.TiledMaxPool2dBackward(np, shape, dtype, ksize, strides, padding, fmt, block_bytes=block_bytes)
    relu_backward = tiled.TiledMaxPool2dBackward(np, shape, dtype, ksize, strides, padding, fmt, relu=True,
                                                 block_bytes=block_bytes)
    assert forward._tiled and backward._tiled
    xs, ys, dys = x.astype(dtype), y.astype(dtype), dy.astype(dtype)
    np.testing.assert_array_equal(forward(xs), ys)
    np.testing.assert_array_equal(backward(xs, ys, dys), dx.astype(dtype))
    np.testing.assert_array_equal(relu_backward(xs, ys, dys), (dx * (x > 0)).astype(dtype))


@pytest.mark.parametrize("fmt", ["NCHW", "NHWC"])
def test_first_maximum_gets_the_gradient_in_every_block(fmt: str) -> None:
    """Ties only in some blocks (two images per block: a short last one); each window's dy goes to
    its first maximum."""
    two_images = 2 * (2 * 6 * 8 * 4)  # of float32
    rng = _rng("blocks", fmt)
    shape = _shape(fmt, 3, 2, 6, 8)
    x = rng.standard_normal(shape).astype(np.float32) + 10  # positive, no ties ...
    xn = x if fmt == "NCHW" else x.transpose(0, 3, 1, 2)
    xn[1, 0, 2:4, 4:6] = 20.0  # ... but for one window with four equal maxima
    xn[2, 1, 0, 0:2] = 30.0  # and one with two, in its first row
    xn[2, 1, 1, 2], xn[2, 1, 0, 3] = 40.0, 40.0  # and one with (0, 1) and (1, 0) tied
    fwd = tiled.TiledMaxPool2d(np, shape, np.float32, 2, 2, "VALID", fmt)
    y = fwd(x).copy()
    dy = np.ones(y.shape, np.float32)
    for relu in (False, True):
        kernel = tiled.TiledMaxPool2dBackward(np, shape, np.float32, 2, 2, "VALID", fmt, relu=relu,
                                              block_bytes=two_images)
        dx = kernel(x, y, dy)
        t = _tiling(kernel)
        assert [t.block_shape(b)[0] for b in t.blocks] == [2, 1]
        dxn = dx if fmt == "NCHW" else dx.transpose(0, 3, 1, 2)
        assert dxn.sum() == y.size  # one element per window
        np.testing.assert_array_equal(dxn[1, 0, 2:4, 4:6], [[1, 0], [0, 0]])
        np.testing.assert_array_equal(dxn[2, 1, 0:2, 0:2], [[1, 0], [0, 0]])
        np.testing.assert_array_equal(dxn[2, 1, 0:2, 2:4], [[0, 1], [0, 0]])
        _assert_same(dx, reference.MaxPool2dBackward(np, shape, np.float32, 2, 2, "VALID", fmt, relu=relu)(x, y, dy))


@pytest.mark.parametrize("fmt", ["NCHW", "NHWC"])
def test_non_contiguous_inputs(fmt: str) -> None:
    """x, y and dy given as strided views: x goes the reference way, y and dy are read as they are."""
    rng = _rng("strided", fmt)
    shape = _shape(fmt, 2, 3, 8, 6)
    big = rng.integers(-2, 3, size=(2,) + shape).astype(np.float32)
    x = big[1, :, ::-1] if fmt == "NCHW" else big[1, :, :, :, ::-1]
    x_c = np.ascontiguousarray(x)
    fwd = tiled.TiledMaxPool2d(np, shape, np.float32, 2, 2, "SAME", fmt)
    y = fwd(x).copy()
    _assert_same(y, fwd(x_c))
    y_strided = np.asfortranarray(y)
    dy = np.asfortranarray(rng.standard_normal(y.shape).astype(np.float32))
    for relu in (False, True):
        kernel = tiled.TiledMaxPool2dBackward(np, shape, np.float32, 2, 2, "SAME", fmt, relu=relu)
        want = reference.MaxPool2dBackward(np, shape, np.float32, 2, 2, "SAME", fmt, relu=relu)(x_c, y, dy)
        _assert_same(kernel(x, y_strided, dy), want)
        _assert_same(kernel(x_c, y_strided, dy), want)


@pytest.mark.parametrize("relu", [False, True])
def test_kernels_reuse_their_buffers(relu: bool) -> None:
    rng = _rng("reuse", relu)
    shape = (2, 4, 8, 8)
    fwd = tiled.TiledMaxPool2d(np, shape, np.float32, 2, 2, "SAME")
    bwd = tiled.TiledMaxPool2dBackward(np, shape, np.float32, 2, 2, "SAME", relu=relu)
    results = []
    for _ in range(2):
        x = np.maximum(rng.standard_normal(shape).astype(np.float32), 0)
        y = fwd(x)
        dy = rng.standard_normal(y.shape).astype(np.float32)
        dx = bwd(x, y, dy)
        results.append((y, dx, x, y.copy(), dy))
        dx[...] = np.nan  # callers may scribble over outputs
    (y0, dx0, *_), (y1, dx1, x, y, dy) = results
    assert y0 is y1 and dx0 is dx1
    _assert_same(dx1, bwd(x, y, dy))
    _assert_same(dx1, reference.MaxPool2dBackward(np, shape, np.float32, 2, 2, "SAME", relu=relu)(x, y, dy))


@pytest.mark.parametrize("shape", [(3, 32, 28, 28), (3, 64, 14, 14)], ids=["pool1", "pool2"])
def test_lenet_shapes(shape: tuple[int, ...]) -> None:
    """LeNet's pools (SAME 2x2 / 2 that pads nothing) on a ReLU output take the tiled path."""
    rng = _rng("lenet", shape)
    x = np.maximum(rng.standard_normal(shape).astype(np.float32), 0)
    x[0, 0, :4, :4] = 1.5  # a positive tie
    fast, slow = _kernels(reference.MaxPool2d, shape, np.float32, 2, 2, "SAME")
    assert fast._tiled and not fast.window.has_padding
    y = fast(x).copy()
    _assert_same(y, slow(x))
    dy = rng.standard_normal(y.shape).astype(np.float32)
    for relu in (False, True):
        fast, slow = _kernels(reference.MaxPool2dBackward, shape, np.float32, 2, 2, "SAME", relu=relu)
        _assert_same(fast(x, y, dy), slow(x, y, dy))


@pytest.mark.parametrize("geometry", [g for g in TILED if g[0][1] == 2], ids=str)
@pytest.mark.parametrize("relu", [False, True])
def test_tie_check_only_flags_blocks_with_ties(geometry: tuple, relu: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    """The first-maximum pass runs exactly for the blocks holding a window with a tie."""
    ksize, strides, padding, h, w = geometry
    shape = (2, 3, h, w)
    kernel = reference.MaxPool2dBackward(np, shape, np.float32, ksize, strides, padding)
    an_image = 3 * int(np.prod(kernel.window.padded_hw)) * 4  # an image a block
    x = (_rng("tie check", geometry).permutation(np.prod(shape)).reshape(shape) + 1).astype(np.float32)  # no ties ...
    kernel = tiled.TiledMaxPool2dBackward(np, shape, np.float32, ksize, strides, padding, relu=relu,
                                          block_bytes=an_image)
    assert kernel._tiled
    fixed: list[int] = []
    first_hits = kernel._first_hits
    monkeypatch.setattr(kernel, "_first_hits", lambda *args: (fixed.append(1), first_hits(*args)))
    y = tiled.TiledMaxPool2d(np, shape, np.float32, ksize, strides, padding)(x).copy()
    dy = np.ones(y.shape, np.float32)
    kernel(x, y, dy)
    assert not fixed
    # windows lying entirely in the plane (top-left corners in the unpadded plane)
    (t, _), (l, _) = kernel.window.pads
    (kh, kw), (oh, ow) = kernel.window.ksize, kernel.window.out_hw
    full = [(a * kh - t, b * kw - l) for a in range(oh) for b in range(ow)
            if 0 <= a * kh - t and a * kh - t + kh <= h and 0 <= b * kw - l and b * kw - l + kw <= w]
    (r, c), (r1, c1) = full[0], full[-1]
    x[1, 2, r1 + kh - 1, c1] = x[1, 2, r1 + kh - 1, c1 + 1] = 1000.0  # ... but in a row of the last block
    x[0, 0, r, c + 1] = x[0, 0, r + kh - 1, c] = 1000.0  # and across the rows of a window of the first
    y = tiled.TiledMaxPool2d(np, shape, np.float32, ksize, strides, padding)(x).copy()
    dx = kernel(x, y, dy)
    assert len(_tiling(kernel).blocks) == 2
    assert len(fixed) == 2 and dx.sum() == y.size


def _laid_out(a: np.ndarray, layout: str, fmt: str) -> np.ndarray:
    """``a`` (in ``fmt``) with the same values in another memory layout (a strided view)."""
    nchw = a if fmt == "NCHW" else a.transpose(0, 3, 1, 2)
    if layout == "contiguous":
        return a
    if layout == "FNHW":  # (C, N, H, W) memory, as an im2col conv output
        out = np.ascontiguousarray(nchw.transpose(1, 0, 2, 3)).transpose(1, 0, 2, 3)
    elif layout == "HWNC":  # (H, W', N, C) memory with W' > W, as a Winograd conv output
        n, c, h, w = nchw.shape
        buf = np.full((h, w + 3, n, c), 7, dtype=a.dtype)
        buf[:, :w] = nchw.transpose(2, 3, 0, 1)
        out = buf[:, :w].transpose(2, 3, 0, 1)
    elif layout == "reversed":  # negative strides
        out = np.ascontiguousarray(nchw[:, ::-1, :, ::-1])[:, ::-1, :, ::-1]
    else:
        raise ValueError(layout)
    return out if fmt == "NCHW" else out.transpose(0, 2, 3, 1)


LAYOUTS = ["contiguous", "FNHW", "HWNC", "reversed"]


@pytest.mark.parametrize("grad_layout", ["data_format", "input", "auto"])
@pytest.mark.parametrize("relu", [False, True])
@pytest.mark.parametrize("dy_layout", ["contiguous", "HWNC"])
@pytest.mark.parametrize("x_layout", LAYOUTS)
@pytest.mark.parametrize("fmt", ["NCHW", "NHWC"])
@pytest.mark.parametrize("geometry", [TILED[0], TILED[2], TILED[5]], ids=str)
def test_strided_layouts(geometry: tuple, fmt: str, x_layout: str, dy_layout: str, relu: bool, grad_layout: str,
                         block_bytes: int) -> None:
    """Inputs in conv-output memory layouts; with grad_layout="input" dx follows x's layout (when
    nothing is padded), with "auto" only where x's rows do not run along dx's innermost axis, else it is
    contiguous."""
    ksize, strides, padding, h, w = geometry
    rng = _rng("layouts", geometry, fmt, x_layout, dy_layout, relu)
    shape = _shape(fmt, 3, 4, h, w)
    args = (shape, np.float32, ksize, strides, padding, fmt)
    x = _data("ties", shape, np.float32, rng)
    xs = _laid_out(x, x_layout, fmt)
    np.testing.assert_array_equal(xs, x)
    fast, slow = _kernels(reference.MaxPool2d, *args, block_bytes=block_bytes)
    y = fast(xs).copy()
    _assert_same(y, slow(x))
    assert fast._y.flags.c_contiguous  # the forward keeps its layout
    dy = _dy("special", y.shape, np.float32, rng)
    ys, dys = _laid_out(y, "FNHW", fmt), _laid_out(dy, dy_layout, fmt)
    fast = tiled.TiledMaxPool2dBackward(np, *args, relu=relu, grad_layout=grad_layout, block_bytes=block_bytes)
    slow = reference.MaxPool2dBackward(np, *args, relu=relu)
    with np.errstate(invalid="ignore"):
        want = slow(x, y, dy).copy()
        dx = fast(xs, ys, dys)
        _assert_same(dx, want)
        order = tiled.memory_order(xs, fast._sp)
        rows_across = order[-1] != 3  # x's innermost axis is not dx's (axis 3: NCHW's W, NHWC's C)
        follows = grad_layout == "input" or (grad_layout == "auto" and rows_across)
        if follows and not fast.window.has_padding:  # laid out as x
            assert dx.transpose(order).flags.c_contiguous
        else:
            assert dx.flags.c_contiguous
        # a later x in another layout: same dx array, same values
        again = fast(_laid_out(x, "HWNC" if x_layout != "HWNC" else "contiguous", fmt), y, dy)
        assert again is dx
        _assert_same(again, want)


def test_grad_layout_is_checked() -> None:
    with pytest.raises(ValueError, match="grad_layout must be 'data_format', 'input' or 'auto', got 'NHWC'"):
        tiled.TiledMaxPool2dBackward(np, (1, 1, 4, 4), np.float32, 2, 2, grad_layout="NHWC")


@pytest.mark.parametrize("fmt", ["NCHW", "NHWC"])
def test_memory_order(fmt: str) -> None:
    shape = _shape(fmt, 2, 3, 4, 6)
    x = np.zeros(shape, np.float32)
    sp = (2, 3) if fmt == "NCHW" else (1, 2)
    n, c = (0, 1) if fmt == "NCHW" else (0, 3)
    h, w = sp
    assert tiled.memory_order(x, sp) == tuple(range(4))
    assert tiled.memory_order(_laid_out(x, "FNHW", fmt), sp) == (c, n, h, w)
    assert tiled.memory_order(_laid_out(x, "HWNC", fmt), sp) == (h, w, n, c)
    assert tiled.memory_order(_laid_out(x, "reversed", fmt), sp) == (n, c, h, w)  # an NCHW buffer


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape", [(1, 2, 4, 1), (3, 4, 6, 1)])
def test_one_channel_nhwc_tiling(shape, dtype):
    # the innermost axis is 1 long: the uint16 / uint64 views must be taken of the flat buffer
    x = np.random.default_rng(0).standard_normal(shape).astype(dtype)
    y = tiled.TiledMaxPool2d(np, shape, dtype, 2, 2, "VALID", "NHWC")(x).copy()
    dy = np.random.default_rng(1).standard_normal(y.shape).astype(dtype)
    got = tiled.TiledMaxPool2dBackward(np, shape, dtype, 2, 2, "VALID", "NHWC")(x, y, dy)
    want = np.zeros_like(x)
    n, h, w, c = shape
    for i in range(n):
        for oh in range(h // 2):
            for ow in range(w // 2):
                window = x[i, 2 * oh:2 * oh + 2, 2 * ow:2 * ow + 2, 0].reshape(-1)
                k = int(np.argmax(window))
                want[i, 2 * oh + k // 2, 2 * ow + k % 2, 0] += dy[i, oh, ow, 0]
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("geometry", TILED[:3] + GENERIC[:2], ids=str)
@pytest.mark.parametrize("fmt", ["NCHW", "NHWC"])
def test_the_registered_overrides_match_the_records_kernels(geometry: tuple, fmt: str) -> None:
    """The builders ``flowjob_ops.overrides.cpu`` registers for the cpu tag against the op records' own kernels
    (the rank-generic reference), built from the same KernelContext: bit for bit, for the three max-pooling ops."""
    from flowjob_core import BlobSpec, KernelContext
    from flowjob_ops.overrides import cpu
    from flowjob_ops.records import pool as pool_records

    ksize, strides, padding, h, w = geometry
    rng = _rng("registered", geometry, fmt)
    shape = _shape(fmt, 3, 2, h, w)
    x = _data("ties", shape, np.float32, rng)
    attrs = {"ksize": ksize, "strides": strides, "padding": padding, "data_format": fmt}
    y_spec = pool_records.MAX_POOL2D.infer((BlobSpec(shape, np.float32),), attrs)[0]

    def built(builder: Any, op: Any, specs: tuple) -> Any:
        return builder(KernelContext(np, None, op.name, "pool", attrs, specs, tuple(op.infer(specs, attrs))))

    x_spec = BlobSpec(shape, np.float32)
    fast = built(cpu.KERNEL_BUILDERS["max_pool2d"], pool_records.MAX_POOL2D, (x_spec,))
    y = fast(x).copy()
    _assert_same(y, built(pool_records.MAX_POOL2D.kernel, pool_records.MAX_POOL2D, (x_spec,))(x))
    dy = _dy("normal", y.shape, np.float32, rng)
    for op in (pool_records.MAX_POOL2D_GRAD, pool_records.MAX_POOL2D_RELU_GRAD):
        specs = (x_spec, y_spec, y_spec)
        got = built(cpu.KERNEL_BUILDERS[op.name], op, specs)(x, y, dy).copy()
        _assert_same(got, built(op.kernel, op, specs)(x, y, dy))
