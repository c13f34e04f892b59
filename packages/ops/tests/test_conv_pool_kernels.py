"""Conv / pool / padding kernels against the nested-loop references in reference_loops.py.

Every kernel is checked in float64 (tight tolerance) and float32 (~1e-5
relative), and is called on other data first and then twice on the test data:
the results must match the reference, the second call must return the very
same array object (preallocated output) with identical values (no state leaks
between calls, no accumulation bugs).
"""

from __future__ import annotations

import itertools
import pathlib
import sys
import zlib
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Callable, Sequence

import numpy as np
import pytest
from flowjob_core.testing.modules import sibling

try:
    from flowjob_ops.kernels import window2d
    from flowjob_ops.kernels.conv2d_forward import Conv2dForward
    from flowjob_ops.kernels.conv2d_geometry import ConvGeometry
    from flowjob_ops.kernels.conv2d_grad_data import Conv2dBackwardData
    from flowjob_ops.kernels.conv2d_grad_filter import Conv2dBackwardFilter
    from flowjob_ops.overrides.cpu import pool_plane_layout as pool
except ModuleNotFoundError:  # package not installed yet: use the source tree
    sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "src"))
    from flowjob_ops.kernels import window2d
    from flowjob_ops.kernels.conv2d_forward import Conv2dForward
    from flowjob_ops.kernels.conv2d_geometry import ConvGeometry
    from flowjob_ops.kernels.conv2d_grad_data import Conv2dBackwardData
    from flowjob_ops.kernels.conv2d_grad_filter import Conv2dBackwardFilter
    from flowjob_ops.overrides.cpu import pool_plane_layout as pool


ref = sibling(__file__, "reference_loops")

DTYPES = [np.float64, np.float32]


def _rng(key: str) -> np.random.Generator:
    return np.random.default_rng(zlib.crc32(key.encode()))


def _f32_exact(a: np.ndarray) -> np.ndarray:
    """float64 data that float32 represents exactly, so both dtypes share one reference."""
    return a.astype(np.float32).astype(np.float64)


def _assert_close(actual: np.ndarray, expected: np.ndarray, dtype: Any) -> None:
    assert actual.dtype == np.dtype(dtype)
    assert actual.shape == expected.shape
    tol = 1e-12 if np.dtype(dtype) == np.float64 else 1e-5
    finite = expected[np.isfinite(expected)]
    scale = max(1.0, float(np.abs(finite).max())) if finite.size else 1.0
    np.testing.assert_allclose(actual, expected, rtol=tol, atol=tol * scale)


def _call_checked(kernel: Callable[..., np.ndarray], args: Sequence[Any], other: Sequence[Any]) -> np.ndarray:
    """Call on ``other`` data, scribble over the result, then call twice on ``args``.

    Returns a copy of the result.  The scribbling checks that a kernel never
    relies on what its output buffer held (callers may modify it in place).
    """
    first = kernel(*other)
    first.fill(np.nan)
    out = kernel(*args)
    assert out is first, "kernel must return its preallocated output on every call"
    value = out.copy()
    again = kernel(*args)
    assert again is out
    np.testing.assert_array_equal(again, value)
    return value


def _other(arrays: Sequence[np.ndarray], dtype: Any) -> list[np.ndarray]:
    """Different data of the same shapes (to catch state leaking between calls)."""
    return [(np.asarray(a) * -1.5 + 0.25).astype(dtype) for a in arrays]


# ---------------------------------------------------------------------------
# padding
# ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "pad, in_hw, k, s, d, pads, out",
    [
        ("SAME", (28, 28), 5, 1, 1, ((2, 2), (2, 2)), (28, 28)),
        ("same", (28, 28), 2, 2, 1, ((0, 0), (0, 0)), (14, 14)),
        # legacy "SAME" is "SAME_LOWER": an odd total's extra pixel goes before
        ("SAME", (7, 7), 2, 2, 1, ((1, 0), (1, 0)), (4, 4)),
        ("SAME_UPPER", (7, 7), 2, 2, 1, ((0, 1), (0, 1)), (4, 4)),
        ("SAME_UPPER", (7, 8), 3, 2, 1, ((1, 1), (0, 1)), (4, 4)),
        ("same_lower", (7, 8), 3, 2, 1, ((1, 1), (1, 0)), (4, 4)),
        ("SAME", (10, 10), 3, 2, 2, ((2, 1), (2, 1)), (5, 5)),
        ("SAME_UPPER", (10, 10), 3, 2, 2, ((1, 2), (1, 2)), (5, 5)),
        ("SAME", (5, 5), 1, 3, 1, ((0, 0), (0, 0)), (2, 2)),
        ("VALID", (11, 9), 3, 2, 1, ((0, 0), (0, 0)), (5, 4)),
        ("valid", (11, 9), 3, 1, 2, ((0, 0), (0, 0)), (7, 5)),
        (1, (5, 6), 3, 1, 1, ((1, 1), (1, 1)), (5, 6)),
        ((1, 2), (5, 6), 3, 1, 1, ((1, 1), (2, 2)), (5, 8)),
        (((1, 0), (0, 2)), (5, 6), 3, 1, 1, ((1, 0), (0, 2)), (4, 6)),
        ([[0, 0], [0, 0], [1, 1], [2, 0]], (5, 6), 3, 1, 1, ((1, 1), (2, 0)), (5, 6)),
    ],
)
def test_resolve_padding_values(pad, in_hw, k, s, d, pads, out):
    assert window2d.resolve_padding(pad, in_hw, k, s, d) == (pads, out)


def test_resolve_padding_four_pairs_follow_data_format():
    nhwc = [[0, 0], [1, 2], [3, 0], [0, 0]]
    assert window2d.resolve_padding(nhwc, (5, 5), 3, 1, 1, "NHWC")[0] == ((1, 2), (3, 0))
    nchw = np.array([[0, 0], [0, 0], [1, 2], [3, 0]])
    assert window2d.resolve_padding(nchw, (5, 5), 3, 1, 1, "NCHW")[0] == ((1, 2), (3, 0))


@pytest.mark.parametrize(
    "kwargs, pattern",
    [
        (dict(padding="FULL"), r"padding .*'FULL'"),
        (dict(padding="SAMEE"), r"padding .*'SAMEE'"),
        (dict(padding=-1), r"padding must be non-negative, got -1"),
        (dict(padding=(1, -2)), r"padding must be non-negative, got -2"),
        (dict(padding=1.5), r"padding .*1\.5"),
        (dict(padding=[1, 2, 3]), r"padding .*\[1, 2, 3\]"),
        (dict(padding=[[0, 1], [0, 0], [1, 1], [1, 1]]), r"pads the N dimension"),
        (dict(padding=[[0, 0], [0, 0], [1, 1], [1, 1]], data_format="NHWC"), r"pads the C dimension"),
        (dict(strides=0), r"strides must be >= 1 .*got 0"),
        (dict(strides=(1, -2)), r"strides must be >= 1 .*\(1, -2\)"),
        (dict(strides=True), r"strides must be an int or a pair"),
        (dict(ksize=0), r"ksize must be >= 1 .*got 0"),
        (dict(ksize=(3, 3, 3)), r"ksize must be an int or a pair .*\(3, 3, 3\)"),
        (dict(ksize="3"), r"ksize must be an int or a pair .*'3'"),
        (dict(dilation=0), r"dilation must be >= 1 .*got 0"),
        (
            dict(padding="VALID", ksize=9),
            r"output would be empty: padding 'VALID' gives a 5x5 padded input .*"
            r"kernel extent 9x9 \(ksize 9x9, dilation 1x1\)",
        ),
        (
            dict(padding="VALID", ksize=3, dilation=3),
            r"output would be empty: .*kernel extent 7x7 \(ksize 3x3, dilation 3x3\)",
        ),
        (dict(data_format="NCWH", padding=[[0, 0]] * 4), r"data_format must be 'NCHW' or 'NHWC'.*'NCWH'"),
    ],
)
def test_resolve_padding_errors(kwargs, pattern):
    args = dict(padding="SAME", in_hw=(5, 5), ksize=3, strides=1, dilation=1, data_format="NCHW")
    args.update(kwargs)
    with pytest.raises(ValueError, match=pattern):
        window2d.resolve_padding(**args)


def test_normalize_pair():
    assert window2d.normalize_pair(3, "ksize") == (3, 3)
    assert window2d.normalize_pair([2, 5], "ksize") == (2, 5)
    assert window2d.normalize_pair((np.int64(2), 1), "strides") == (2, 1)
    assert window2d.normalize_pair(0, "pad", minimum=0) == (0, 0)
    with pytest.raises(ValueError, match=r"strides must be >= 1 in every dimension, got \[1, 0\]"):
        window2d.normalize_pair([1, 0], "strides")
    with pytest.raises(ValueError, match=r"dilation must contain ints, got 1\.0"):
        window2d.normalize_pair((1.0, 1), "dilation")


# ---------------------------------------------------------------------------
# convolution
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class ConvCase:
    fmt: str
    batch: int
    ksize: tuple[int, int]
    strides: tuple[int, int]
    dilation: tuple[int, int]
    groups: int
    padding: Any  # "SAME" / "VALID" / "explicit" (4 pairs in fmt order) / explicit pads
    C: int = 4
    H: int = 11
    W: int = 9
    F: int = 6

    def __str__(self) -> str:
        return (
            f"{self.fmt}-n{self.batch}-k{self.ksize[0]}x{self.ksize[1]}-s{self.strides[0]}x{self.strides[1]}"
            f"-d{self.dilation[0]}x{self.dilation[1]}-g{self.groups}-{self.padding}"
        ).replace(" ", "")

    @property
    def pad_arg(self) -> Any:
        if self.padding != "explicit":
            return self.padding
        # Asymmetric legacy-style pads, one pair per dim in data_format order.
        spatial = [[1, 2], [2, 0]]
        return [[0, 0], [0, 0], *spatial] if self.fmt == "NCHW" else [[0, 0], *spatial, [0, 0]]

    @property
    def pads(self) -> window2d.Pads:
        return window2d.resolve_padding(
            self.pad_arg, (self.H, self.W), self.ksize, self.strides, self.dilation, self.fmt
        )[0]

    @property
    def x_shape(self) -> tuple[int, ...]:
        n, c, h, w = self.batch, self.C, self.H, self.W
        return (n, c, h, w) if self.fmt == "NCHW" else (n, h, w, c)

    @property
    def w_shape(self) -> tuple[int, ...]:
        (kh, kw), cg = self.ksize, self.C // self.groups
        return (self.F, cg, kh, kw) if self.fmt == "NCHW" else (self.F, kh, kw, cg)

    def args(self) -> tuple[Any, ...]:
        """Positional kernel arguments after (xp, x_shape, w_shape, dtype)."""
        return (self.strides, self.pad_arg, self.dilation, self.groups, self.fmt)

    def ref_args(self) -> tuple[Any, ...]:
        return (self.strides, self.pads, self.dilation, self.groups, self.fmt)


def _conv_grid() -> list[ConvCase]:
    cases = []
    grid = itertools.product(
        ("NCHW", "NHWC"), (1, 2, 3), (1, 2), (1, 2), ("SAME", "VALID", "explicit"), (1, 3, 5)
    )
    for index, (fmt, s, d, g, pad, k) in enumerate(grid):
        batch = (1, 3)[index % 2]
        cases.append(ConvCase(fmt, batch, (k, k), (s, s), (d, d), g, pad))
    # Non-square kernels / strides / dilations / pads (catch H-W mixups), C=1, groups=C.
    for fmt in ("NCHW", "NHWC"):
        cases += [
            ConvCase(fmt, 2, (3, 5), (2, 1), (1, 2), 1, "SAME"),
            ConvCase(fmt, 2, (2, 3), (1, 3), (2, 1), 2, ((0, 2), (1, 0))),
            ConvCase(fmt, 3, (5, 5), (1, 1), (1, 1), 1, "SAME", C=1, F=4),
            ConvCase(fmt, 2, (3, 3), (1, 1), (1, 1), 4, "SAME_LOWER", F=8),
            ConvCase(fmt, 2, (4, 2), (2, 2), (1, 1), 1, "SAME_UPPER", H=8, W=10),
        ]
    return cases


CONV_CASES = _conv_grid()


@lru_cache(maxsize=None)
def _conv_data(case: ConvCase) -> dict[str, np.ndarray]:
    """Inputs and loop-reference outputs (float64) of one case, shared by all tests."""
    rng = _rng(str(case))
    x = _f32_exact(rng.standard_normal(case.x_shape))
    w = _f32_exact(rng.standard_normal(case.w_shape))
    y = ref.conv2d_ref(x, w, *case.ref_args())
    dy = _f32_exact(rng.standard_normal(y.shape))
    dx, dw = ref.conv2d_grads_ref(x, w, dy, *case.ref_args())
    return dict(x=x, w=w, y=y, dy=dy, dx=dx, dw=dw)


@pytest.mark.parametrize("strategy", ["rows", "cols"])
@pytest.mark.parametrize("dtype", DTYPES, ids=["f64", "f32"])
@pytest.mark.parametrize("case", CONV_CASES, ids=str)
def test_conv_forward(case: ConvCase, dtype: Any, strategy: str) -> None:
    d = _conv_data(case)
    kernel = Conv2dForward(np, ConvGeometry.create(case.x_shape, case.w_shape, *case.args()), dtype, strategy=strategy)
    assert kernel.out_shape == d["y"].shape
    args = [d["x"].astype(dtype), d["w"].astype(dtype)]
    _assert_close(_call_checked(kernel, args, _other(args, dtype)), d["y"], dtype)


@pytest.mark.parametrize("strategy", ["rows", "cols"])
@pytest.mark.parametrize("dtype", DTYPES, ids=["f64", "f32"])
@pytest.mark.parametrize("case", CONV_CASES, ids=str)
def test_conv_backward_filter(case: ConvCase, dtype: Any, strategy: str) -> None:
    d = _conv_data(case)
    kernel = Conv2dBackwardFilter(np, ConvGeometry.create(case.x_shape, case.w_shape, *case.args()),
                                  dtype, strategy=strategy)
    assert kernel.out_shape == d["w"].shape
    args = [d["x"].astype(dtype), d["dy"].astype(dtype)]
    _assert_close(_call_checked(kernel, args, _other(args, dtype)), d["dw"], dtype)


@pytest.mark.parametrize("strategy", ["rows", "cols"])
@pytest.mark.parametrize("dtype", DTYPES, ids=["f64", "f32"])
@pytest.mark.parametrize("case", CONV_CASES, ids=str)
def test_conv_backward_data(case: ConvCase, dtype: Any, strategy: str) -> None:
    d = _conv_data(case)
    kernel = Conv2dBackwardData(np, ConvGeometry.create(case.x_shape, case.w_shape, *case.args()),
                                dtype, strategy=strategy)
    assert kernel.out_shape == d["x"].shape
    args = [d["dy"].astype(dtype), d["w"].astype(dtype)]
    _assert_close(_call_checked(kernel, args, _other(args, dtype)), d["dx"], dtype)


@pytest.mark.parametrize("case", CONV_CASES[::9], ids=str)
def test_conv_taps_reference_matches_loops(case: ConvCase) -> None:
    """The vectorized reference used for the large LeNet shapes is itself checked."""
    d = _conv_data(case)
    y, dx, dw = ref.conv2d_taps_ref(d["x"], d["w"], d["dy"], *case.ref_args())
    for got, want in ((y, d["y"]), (dx, d["dx"]), (dw, d["dw"])):
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("case", CONV_CASES[::17], ids=str)
def test_conv_non_contiguous_inputs(case: ConvCase) -> None:
    d = _conv_data(case)

    def strided(a: np.ndarray) -> np.ndarray:
        return np.asfortranarray(a)  # same values, non C-contiguous

    for strategy in ("rows", "cols"):
        fwd = Conv2dForward(np, ConvGeometry.create(case.x_shape, case.w_shape, *case.args()),
                            np.float64, strategy=strategy)
        _assert_close(fwd(strided(d["x"]), strided(d["w"])), d["y"], np.float64)
        bwf = Conv2dBackwardFilter(np, ConvGeometry.create(case.x_shape, case.w_shape, *case.args()),
                                   np.float64, strategy=strategy)
        _assert_close(bwf(strided(d["x"]), strided(d["dy"])), d["dw"], np.float64)
    for strategy in ("rows", "cols"):
        bwd = Conv2dBackwardData(np, ConvGeometry.create(case.x_shape, case.w_shape, *case.args()),
                                 np.float64, strategy=strategy)
        _assert_close(bwd(strided(d["dy"]), strided(d["w"])), d["dx"], np.float64)


@pytest.mark.parametrize("case", CONV_CASES[::23], ids=str)
def test_conv_backward_filter_shares_forward_cols(case: ConvCase) -> None:
    d = _conv_data(case)
    fwd = Conv2dForward(np, ConvGeometry.create(case.x_shape, case.w_shape, *case.args()), np.float64)
    bwf = Conv2dBackwardFilter(np, ConvGeometry.create(case.x_shape, case.w_shape, *case.args()),
                               np.float64, im2col=fwd.im2col)
    assert bwf.im2col is fwd.im2col
    fwd(d["x"], d["w"])
    _assert_close(bwf(d["x"], d["dy"], reuse_cols=True), d["dw"], np.float64)


def test_conv_geometry_errors() -> None:
    with pytest.raises(ValueError, match=r"groups=3 must divide both the input channels \(4\)"):
        Conv2dForward(np, ConvGeometry.create((1, 4, 5, 5), (6, 1, 3, 3), groups=3), np.float32)
    with pytest.raises(ValueError, match=r"has 4 input channels per filter, expected C/groups = 4/2 = 2"):
        Conv2dForward(np, ConvGeometry.create((1, 4, 5, 5), (6, 4, 3, 3), groups=2), np.float32)
    with pytest.raises(ValueError, match=r"conv2d input must be 4-d"):
        Conv2dForward(np, ConvGeometry.create((4, 5, 5), (6, 4, 3, 3)), np.float32)
    with pytest.raises(ValueError, match=r"output would be empty"):
        Conv2dBackwardData(np, ConvGeometry.create((1, 4, 5, 5), (6, 4, 7, 7), pads="VALID"), np.float32)
    with pytest.raises(ValueError, match=r"strategy must be 'rows' or 'cols', got 'fast'"):
        Conv2dForward(np, ConvGeometry.create((1, 4, 5, 5), (6, 4, 3, 3)), np.float32, strategy="fast")
    with pytest.raises(ValueError, match=r"strategy must be 'rows' or 'cols', got 'fast'"):
        Conv2dBackwardData(np, ConvGeometry.create((1, 4, 5, 5), (6, 4, 3, 3)), np.float32, strategy="fast")
    kernel = Conv2dForward(np, ConvGeometry.create((1, 4, 5, 5), (6, 4, 3, 3)), np.float32)
    message = r"conv2d input has shape \(2, 4, 5, 5\), this kernel was built for \(1, 4, 5, 5\)"
    with pytest.raises(ValueError, match=message):
        kernel(np.zeros((2, 4, 5, 5), np.float32), np.zeros((6, 4, 3, 3), np.float32))


# ---------------------------------------------------------------------------
# pooling
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class PoolCase:
    fmt: str
    batch: int
    ksize: tuple[int, int]
    strides: tuple[int, int]
    padding: Any  # "SAME" / "VALID" / explicit pads
    C: int = 3
    H: int = 7
    W: int = 8

    def __str__(self) -> str:
        return (
            f"{self.fmt}-n{self.batch}-k{self.ksize[0]}x{self.ksize[1]}"
            f"-s{self.strides[0]}x{self.strides[1]}-{self.padding}"
        ).replace(" ", "")

    @property
    def pads(self) -> window2d.Pads:
        return window2d.resolve_padding(self.padding, (self.H, self.W), self.ksize, self.strides, 1, self.fmt)[0]

    @property
    def x_shape(self) -> tuple[int, ...]:
        n, c, h, w = self.batch, self.C, self.H, self.W
        return (n, c, h, w) if self.fmt == "NCHW" else (n, h, w, c)

    def args(self) -> tuple[Any, ...]:
        return (self.ksize, self.strides, self.padding, self.fmt)

    def ref_args(self) -> tuple[Any, ...]:
        return (self.ksize, self.strides, self.pads, self.fmt)


def _pool_grid() -> list[PoolCase]:
    cases = []
    grid = itertools.product(
        ("NCHW", "NHWC"), ((1, 1), (2, 2), (3, 3), (2, 3)), ((1, 1), (2, 2), (3, 3), (1, 2)),
        ("SAME", "VALID", ((1, 0), (0, 1))),
    )
    for index, (fmt, k, s, pad) in enumerate(grid):
        cases.append(PoolCase(fmt, (1, 3)[index % 2], k, s, pad))
    for fmt in ("NCHW", "NHWC"):
        cases += [
            PoolCase(fmt, 2, (7, 8), (1, 1), "VALID"),  # global pooling path
            PoolCase(fmt, 2, (6, 6), (4, 4), "VALID"),  # single window, not the whole plane
            PoolCase(fmt, 2, (3, 3), (2, 2), "SAME_LOWER"),
            PoolCase(fmt, 2, (2, 2), (1, 1), ((2, 2), (0, 3))),  # windows entirely in padding
        ]
    return cases


POOL_CASES = _pool_grid()


@lru_cache(maxsize=None)
def _pool_data(case: PoolCase) -> dict[str, np.ndarray]:
    rng = _rng(str(case))
    # Small integers: lots of ties inside windows, to pin down the max-pool tie rule.
    x = rng.integers(-2, 3, size=case.x_shape).astype(np.float64)
    xs = _f32_exact(rng.standard_normal(case.x_shape))
    ymax = ref.max_pool_ref(x, *case.ref_args())
    yavg = ref.avg_pool_ref(xs, *case.ref_args())
    dy = _f32_exact(rng.standard_normal(ymax.shape))
    return dict(
        x=x, xs=xs, ymax=ymax, yavg=yavg, dy=dy,
        dxmax=ref.max_pool_grad_ref(x, dy, *case.ref_args()),
        dxavg=ref.avg_pool_grad_ref(case.x_shape, dy, *case.ref_args()),
    )


@pytest.mark.parametrize("dtype", DTYPES, ids=["f64", "f32"])
@pytest.mark.parametrize("case", POOL_CASES, ids=str)
def test_max_pool_forward(case: PoolCase, dtype: Any) -> None:
    d = _pool_data(case)
    kernel = pool.MaxPool2d(np, case.x_shape, dtype, *case.args())
    assert kernel.out_shape == d["ymax"].shape
    args = [d["x"].astype(dtype)]
    _assert_close(_call_checked(kernel, args, _other(args, dtype)), d["ymax"], dtype)


@pytest.mark.parametrize("dtype", DTYPES, ids=["f64", "f32"])
@pytest.mark.parametrize("case", POOL_CASES, ids=str)
def test_max_pool_backward(case: PoolCase, dtype: Any) -> None:
    d = _pool_data(case)
    x = d["x"].astype(dtype)
    y = pool.MaxPool2d(np, case.x_shape, dtype, *case.args())(x).copy()
    kernel = pool.MaxPool2dBackward(np, case.x_shape, dtype, *case.args())
    args = [x, y, d["dy"].astype(dtype)]
    _assert_close(_call_checked(kernel, args, _other(args, dtype)), d["dxmax"], dtype)


def test_max_pool_backward_routes_ties_to_first_element() -> None:
    x = np.array([[[[1.0, 3.0, 3.0, 0.0], [3.0, 2.0, 0.0, 0.0]]]])  # (1, 1, 2, 4)
    y = pool.MaxPool2d(np, x.shape, np.float64, 2, 2)(x).copy()
    dx = pool.MaxPool2dBackward(np, x.shape, np.float64, 2, 2)(x, y, np.array([[[[10.0, 20.0]]]]))
    np.testing.assert_array_equal(dx, [[[[0, 10, 20, 0], [0, 0, 0, 0]]]])


@pytest.mark.parametrize("dtype", DTYPES, ids=["f64", "f32"])
@pytest.mark.parametrize("case", POOL_CASES, ids=str)
def test_avg_pool_forward(case: PoolCase, dtype: Any) -> None:
    d = _pool_data(case)
    kernel = pool.AvgPool2d(np, case.x_shape, dtype, *case.args())
    assert kernel.out_shape == d["yavg"].shape
    args = [d["xs"].astype(dtype)]
    _assert_close(_call_checked(kernel, args, _other(args, dtype)), d["yavg"], dtype)


@pytest.mark.parametrize("dtype", DTYPES, ids=["f64", "f32"])
@pytest.mark.parametrize("case", POOL_CASES, ids=str)
def test_avg_pool_backward(case: PoolCase, dtype: Any) -> None:
    d = _pool_data(case)
    kernel = pool.AvgPool2dBackward(np, case.x_shape, dtype, *case.args())
    args = [d["dy"].astype(dtype)]
    _assert_close(_call_checked(kernel, args, _other(args, dtype)), d["dxavg"], dtype)


def test_avg_pool_excludes_padding_from_divisor() -> None:
    x = np.ones((1, 1, 3, 3))
    y = pool.AvgPool2d(np, x.shape, np.float64, 3, 1, "SAME")(x)
    np.testing.assert_array_equal(y, np.ones((1, 1, 3, 3)))


def test_pool_errors() -> None:
    with pytest.raises(ValueError, match=r"ksize must be >= 1"):
        pool.MaxPool2d(np, (1, 1, 4, 4), np.float32, 0, 1)
    with pytest.raises(ValueError, match=r"output would be empty"):
        pool.AvgPool2d(np, (1, 1, 4, 4), np.float32, 5, 1, "VALID")
    kernel = pool.MaxPool2dBackward(np, (1, 1, 4, 4), np.float32, 2, 2)
    x = np.zeros((1, 1, 4, 4), np.float32)
    with pytest.raises(ValueError, match=r"max-pool output gradient dy has shape \(1, 1, 3, 3\)"):
        kernel(x, np.zeros((1, 1, 2, 2), np.float32), np.zeros((1, 1, 3, 3), np.float32))


# ---------------------------------------------------------------------------
# LeNet shapes (batch 100, float32), checked against the vectorized reference
# ---------------------------------------------------------------------------

LENET_CONV = [
    # (x_shape, w_shape, expected strategy)
    ((100, 1, 28, 28), (32, 1, 5, 5), "cols"),
    ((100, 32, 14, 14), (64, 32, 5, 5), "rows"),
]


@pytest.mark.parametrize("x_shape, w_shape, strategy", LENET_CONV, ids=["conv1", "conv2"])
def test_lenet_conv(x_shape: tuple[int, ...], w_shape: tuple[int, ...], strategy: str) -> None:
    rng = _rng(f"lenet{x_shape}")
    x = rng.standard_normal(x_shape).astype(np.float32)
    w = (rng.standard_normal(w_shape) * 0.1).astype(np.float32)
    geo = (1, "SAME", 1, 1, "NCHW")
    fwd = Conv2dForward(np, ConvGeometry.create(x_shape, w_shape, *geo), np.float32)
    assert fwd.strategy == strategy and fwd.out_shape == (x_shape[0], w_shape[0], *x_shape[2:])
    y = fwd(x, w)
    dy = rng.standard_normal(y.shape).astype(np.float32)
    pads = ((2, 2), (2, 2))
    y_ref, dx_ref, dw_ref = ref.conv2d_taps_ref(x, w, dy, (1, 1), pads, (1, 1), 1, "NCHW")
    _assert_close(y, y_ref, np.float32)
    assert fwd(x, w) is y
    bwf = Conv2dBackwardFilter(np, ConvGeometry.create(x_shape, w_shape, *geo), np.float32, im2col=fwd.im2col)
    _assert_close(bwf(x, dy), dw_ref, np.float32)
    _assert_close(bwf(x, dy, reuse_cols=True), dw_ref, np.float32)
    bwd = Conv2dBackwardData(np, ConvGeometry.create(x_shape, w_shape, *geo), np.float32)
    assert bwd.strategy == strategy
    dx = bwd(dy, w)
    _assert_close(dx, dx_ref, np.float32)
    assert bwd(dy, w) is dx


def test_lenet_pool() -> None:
    rng = _rng("lenet-pool")
    x_shape = (100, 32, 28, 28)
    x = np.maximum(rng.standard_normal(x_shape), 0).astype(np.float32)  # ReLU output: many ties at 0
    fwd = pool.MaxPool2d(np, x_shape, np.float32, 2, 2, "SAME")
    bwd = pool.MaxPool2dBackward(np, x_shape, np.float32, 2, 2, "SAME")
    y = fwd(x)
    assert y.shape == (100, 32, 14, 14)
    dy = rng.standard_normal(y.shape).astype(np.float32)
    dx = bwd(x, y, dy)
    # Pooling is per image, so the loop reference on two images checks the batch.
    args = ((2, 2), (2, 2), ((0, 0), (0, 0)), "NCHW")
    _assert_close(y[:2], ref.max_pool_ref(x[:2], *args), np.float32)
    _assert_close(dx[:2], ref.max_pool_grad_ref(x[:2], dy[:2], *args), np.float32)
    assert fwd(x) is y and bwd(x, y, dy) is dx


# ---------------------------------------------------------------------------
# cupy (runs only where cupy and a GPU are available)
# ---------------------------------------------------------------------------


def _cupy() -> Any:
    cp = pytest.importorskip("cupy", reason="no CUDA device: CuPy is not installed")
    try:
        cp.cuda.runtime.getDeviceCount()
    except Exception as exc:  # cupy installed but no usable device
        pytest.skip(f"no CUDA device: {exc}")
    return cp


@pytest.mark.parametrize("case", CONV_CASES[::29], ids=str)
def test_conv_cupy(case: ConvCase) -> None:
    cp = _cupy()
    d = _conv_data(case)
    for strategy in ("rows", "cols"):
        fwd = Conv2dForward(cp, ConvGeometry.create(case.x_shape, case.w_shape, *case.args()),
                            np.float64, strategy=strategy)
        _assert_close(cp.asnumpy(fwd(cp.asarray(d["x"]), cp.asarray(d["w"]))), d["y"], np.float64)
        bwf = Conv2dBackwardFilter(cp, ConvGeometry.create(case.x_shape, case.w_shape, *case.args()),
                                   np.float64, strategy=strategy)
        _assert_close(cp.asnumpy(bwf(cp.asarray(d["x"]), cp.asarray(d["dy"]))), d["dw"], np.float64)
        bwd = Conv2dBackwardData(cp, ConvGeometry.create(case.x_shape, case.w_shape, *case.args()),
                                 np.float64, strategy=strategy)
        _assert_close(cp.asnumpy(bwd(cp.asarray(d["dy"]), cp.asarray(d["w"]))), d["dx"], np.float64)


@pytest.mark.parametrize("case", POOL_CASES[::11], ids=str)
def test_pool_cupy(case: PoolCase) -> None:
    cp = _cupy()
    d = _pool_data(case)
    x, xs, dy = (cp.asarray(d[k]) for k in ("x", "xs", "dy"))
    y = pool.MaxPool2d(cp, case.x_shape, np.float64, *case.args())(x)
    _assert_close(cp.asnumpy(y), d["ymax"], np.float64)
    dx = pool.MaxPool2dBackward(cp, case.x_shape, np.float64, *case.args())(x, y.copy(), dy)
    _assert_close(cp.asnumpy(dx), d["dxmax"], np.float64)
    _assert_close(cp.asnumpy(pool.AvgPool2d(cp, case.x_shape, np.float64, *case.args())(xs)), d["yavg"], np.float64)
    dxa = pool.AvgPool2dBackward(cp, case.x_shape, np.float64, *case.args())(dy)
    _assert_close(cp.asnumpy(dxa), d["dxavg"], np.float64)
