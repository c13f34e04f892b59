"""Rank-generic window ops: the one window geometry (``kernels.window``), the reference convolution and pooling
kernels of every rank against loops over output positions, and a pooling variant defined as one record
family and one reference kernel, run for 1-D (as 2-D on a height of 1), 2-D and 3-D through the one public
implementation (``api._windows.pool_nodes``)."""
from __future__ import annotations

import sys
from typing import Any

import numpy as np
import pytest

import flowjob_core as fc
import flowjob_ops.plugin
import flowjob_typing as tp
import flowjob_typing.plugin
from flowjob_core.testing import check_grads, run_op
from flowjob_core.testing.modules import sibling
from flowjob_ops.api._windows import pool_nodes
from flowjob_ops.api.array import concat, reshape
from flowjob_ops.kernels import conv, window2d, pool, window
from flowjob_ops.records.pool import PoolVariant, pool_records

loops = sibling(__file__, "cases_conv3d")
RNG = np.random.default_rng(24)
FIRST = {1: "NCW", 2: "NCHW", 3: "NCDHW"}
LAST = {1: "NWC", 2: "NHWC", 3: "NDHWC"}


def _layout(shape_first: tuple[int, ...], fmt: str) -> tuple[int, ...]:
    n, c, *spatial = shape_first
    return (n, *spatial, c) if fmt.endswith("C") else shape_first


def _spatial_pads(padding: Any, fmt: str, rank: int) -> Any:
    """The pads the loop references read: explicit per-dimension pairs reduced to the spatial ones."""
    if isinstance(padding, str) or len(padding) == rank:
        return padding
    return [padding[a] for a in window.spatial_axes(fmt)]


# the geometry ------------------------------------------------------------------------------------
@pytest.mark.parametrize("rank", [1, 2, 3])
def test_one_geometry_reads_every_ranks_formats_and_paddings(rank: int) -> None:
    size = (7, 6, 5)[:rank]
    per_dim = [[0, 0], [0, 0]] + [[1, 2]] * rank  # channels first: N, C, then the spatial axes
    assert window.Window.create(size, 3, 2, 1, per_dim, FIRST[rank]).pads == ((1, 2),) * rank
    last = [[0, 0]] + [[1, 2]] * rank + [[0, 0]]
    assert window.Window.create(size, 3, 2, 1, last, LAST[rank]).pads == ((1, 2),) * rank
    assert window.Window.create(size, 3, 2, 1, 1).pads == ((1, 1),) * rank  # an int pads every side
    same = window.Window.create(size, 2, 1, 1, "SAME")
    assert same.pads == ((1, 0),) * rank and same.out_size == size  # "SAME" is legacy's SAME_LOWER
    assert window.check_format("channels_last", rank) == LAST[rank]
    with pytest.raises(ValueError, match=f"data_format must be '{FIRST[rank]}' or '{LAST[rank]}'"):
        window.check_format("NCHWD", rank)
    with pytest.raises(ValueError, match=r"pads the C dimension"):
        window.Window.create(size, 3, 1, 1, [[0, 0], [1, 1]] + [[0, 0]] * rank, FIRST[rank])
    with pytest.raises(ValueError, match=r"output would be empty"):
        window.Window.create(size, 9, 1, 1, "VALID")


def test_the_2d_face_is_the_same_geometry() -> None:
    for pads in ("SAME", "SAME_UPPER", "VALID", 1, (1, 2), ((0, 1), (2, 0)), [[0, 0], [0, 0], [1, 1], [0, 2]]):
        face = window2d.Window2d.create((9, 8), (3, 2), (2, 1), (1, 2), pads, "NCHW")
        same = window.Window.create((9, 8), (3, 2), (2, 1), (1, 2), pads, "NCHW")
        assert (face.pads, face.out_size, face.tiles, face.non_overlapping) == (
            same.pads, same.out_size, same.tiles, same.non_overlapping)
        assert window2d.resolve_padding(pads, (9, 8), (3, 2), (2, 1), (1, 2)) == (same.pads, same.out_size)


# the reference kernels of every rank ---------------------------------------------------------------
CONV_CASES = [
    # rank, x shape (channels first), filters, ksize, strides, padding, dilations, groups
    (1, (2, 4, 9), 6, (3,), 2, "SAME", 1, 2),
    (1, (1, 3, 7), 2, (2,), 1, [(2, 1)], 2, 1),
    (2, (2, 4, 7, 6), 4, (3, 2), (2, 1), "SAME_UPPER", 1, 1),
    (2, (1, 2, 6, 6), 4, (2, 3), 1, "per-dim", (2, 1), 2),
    (3, (1, 2, 5, 4, 4), 2, (2, 2, 3), (1, 2, 1), "VALID", 1, 1),
]


@pytest.mark.parametrize("channels_last", [False, True])
@pytest.mark.parametrize("case", CONV_CASES, ids=str)
def test_reference_convolution_of_every_rank_matches_the_loops(case: tuple, channels_last: bool) -> None:
    rank, x_first, filters, ksize, strides, pads, dilations, groups = case
    fmt = (LAST if channels_last else FIRST)[rank]
    if pads == "per-dim":
        pads = [[0, 0]] * (rank + 2)
        for a in window.spatial_axes(fmt):
            pads[a] = [1, 1]
    x = RNG.normal(size=_layout(x_first, fmt))
    w = RNG.normal(size=_layout((filters, x_first[1] // groups, *ksize), fmt))
    geom = conv.ConvGeometry.create(x.shape, w.shape, strides, pads, dilations, groups, fmt)
    y_ref, dx_ref, dw_ref = loops.conv_loops(x, w, None, strides, _spatial_pads(pads, fmt, rank), fmt, dilations,
                                             groups)
    dy = RNG.normal(size=y_ref.shape)
    _, dx_ref, dw_ref = loops.conv_loops(x, w, dy, strides, _spatial_pads(pads, fmt, rank), fmt, dilations, groups)
    y = conv.ConvForward(np, geom, np.float64, np.empty(geom.y_shape))(x, w)
    np.testing.assert_allclose(y, y_ref, rtol=1e-12, atol=1e-12)
    dx = conv.ConvBackwardData(np, geom, np.float64, np.empty(geom.x_shape))(dy, w)
    np.testing.assert_allclose(dx, dx_ref, rtol=1e-12, atol=1e-12)
    dw = conv.ConvBackwardFilter(np, geom, np.float64, np.empty(geom.w_shape))(x, dy)
    np.testing.assert_allclose(dw, dw_ref, rtol=1e-12, atol=1e-12)


POOL_CASES = [
    (1, (2, 3, 9), (3,), 2, "SAME"),
    (1, (1, 2, 8), 2, 2, "VALID"),
    (2, (2, 3, 7, 6), (3, 2), (2, 1), "SAME_UPPER"),
    (2, (1, 2, 6, 6), 2, 2, [(0, 1), (1, 0)]),
    (3, (1, 2, 5, 4, 4), (2, 2, 3), (1, 2, 1), "SAME"),
]


@pytest.mark.parametrize("channels_last", [False, True])
@pytest.mark.parametrize("case", POOL_CASES, ids=str)
def test_reference_pooling_of_every_rank_matches_the_loops(case: tuple, channels_last: bool) -> None:
    rank, x_first, ksize, strides, pads = case
    fmt = (LAST if channels_last else FIRST)[rank]
    x = RNG.permutation(int(np.prod(x_first))).reshape(_layout(x_first, fmt)).astype(np.float64)  # no ties
    geom = pool.PoolGeometry(x.shape, ksize, strides, pads, fmt)
    dy = RNG.normal(size=geom.y_shape)
    for kind, forward, backward in (("max", pool.MaxPool, pool.MaxPoolBackward),
                                    ("avg", pool.AvgPool, pool.AvgPoolBackward)):
        y_ref, dx_ref = loops.pool_loops(x, dy, kind, ksize, strides, pads, fmt)
        y = forward(np, geom, np.float64, np.empty(geom.y_shape))(x)
        np.testing.assert_allclose(y, y_ref, rtol=1e-12, atol=1e-12, err_msg=kind)
        grad = backward(np, geom, np.float64, np.empty(geom.x_shape))
        dx = grad(x, y, dy) if kind == "max" else grad(dy)
        np.testing.assert_allclose(dx, dx_ref, rtol=1e-12, atol=1e-12, err_msg=kind)


def test_the_relu_gradient_of_max_pooling_masks_at_the_pooled_size() -> None:
    x = RNG.normal(size=(2, 3, 6, 5))
    geom = pool.PoolGeometry(x.shape, 2, 1, "SAME", "NCHW")
    y = pool.MaxPool(np, geom, np.float64, np.empty(geom.y_shape))(x)
    dy = RNG.normal(size=y.shape)
    dx = pool.MaxPoolBackward(np, geom, np.float64, np.empty(x.shape))(x, y, dy)
    fused = pool.MaxPoolBackward(np, geom, np.float64, np.empty(x.shape), relu=True)(x, y, dy)
    np.testing.assert_array_equal(fused, dx * (x > 0))


# a new pooling variant: one PoolVariant with its reference kernels --------------------------------
class MinPool:
    """y = min over each window (the test variant's reference kernel: max pooling of -x)."""

    def __init__(self, xp: Any, geom: pool.PoolGeometry, dtype: Any, out: Any) -> None:
        self.xp, self.negated = xp, xp.empty(geom.x_shape, dtype=dtype)
        self.max = pool.MaxPool(xp, geom, dtype, out)

    def __call__(self, x: Any) -> Any:
        y = self.max(self.xp.negative(x, out=self.negated))
        return self.xp.negative(y, out=y)


class MinPoolBackward:
    def __init__(self, xp: Any, geom: pool.PoolGeometry, dtype: Any, out: Any) -> None:
        self.xp = xp
        self.negated = (xp.empty(geom.x_shape, dtype=dtype), xp.empty(geom.y_shape, dtype=dtype))
        self.max = pool.MaxPoolBackward(xp, geom, dtype, out)

    def __call__(self, x: Any, y: Any, dy: Any) -> Any:
        nx, ny = self.negated
        return self.max(self.xp.negative(x, out=nx), self.xp.negative(y, out=ny), dy)


MIN = PoolVariant("min", MinPool, MinPoolBackward, True, "clear", "min", "inputs (x, y, dy): each window's dy to "
                  "its first minimal element")


@fc.hookimpl
def flowjob_add_ops(registry: Any) -> None:
    """(This module as a plugin) the min-pooling records for 2-D and 3-D."""
    for rank in (2, 3):
        for record in pool_records(MIN, rank):
            registry.add(record)


@pytest.fixture
def session() -> Any:
    plugins = [flowjob_ops.plugin, flowjob_typing.plugin, sys.modules[__name__]]
    session = fc.Session(fc.make_plugin_manager(plugins=plugins, autoload=False))
    yield session
    session.close()


@pytest.mark.parametrize("rank", [2, 3])
def test_a_new_pooling_variant_is_one_record_family_and_one_reference_kernel(session: Any, rank: int) -> None:
    x = RNG.permutation(2 * 3 * 5 ** rank).reshape((2, 3) + (5,) * rank).astype(np.float64)
    attrs = {"ksize": 2, "strides": 2, "padding": "SAME", "data_format": FIRST[rank]}
    (y,) = run_op(f"min_pool{rank}d", [x], attrs, session=session)
    np.testing.assert_array_equal(y, -loops.pool_loops(-x, None, "max", 2, 2, "SAME", FIRST[rank])[0])
    assert session.registries.ops[f"min_pool{rank}d"].legacy.name_prefix == f"MinPool{rank}D"
    check_grads(f"min_pool{rank}d", [x], attrs, session=session)


SHAPES = {1: (2, 7, 3), 2: (2, 3, 6, 6), 3: (1, 2, 4, 4, 4)}


def test_the_public_implementation_runs_a_new_variant_for_every_rank(session: Any) -> None:
    x1, x2, x3 = (RNG.normal(size=SHAPES[rank]) for rank in (1, 2, 3))

    def job(a: tp.Numpy.Placeholder(SHAPES[1], dtype=np.float64), b: tp.Numpy.Placeholder(SHAPES[2], dtype=np.float64),
            c: tp.Numpy.Placeholder(SHAPES[3], dtype=np.float64)) -> tp.Numpy:
        y1 = pool_nodes("min", 1, a, 2, 2, "VALID", "NWC", False, "m1")  # the 2-D record on a height of 1
        assert y1.lbn == "m1_reshape_out/out_0"
        y2 = pool_nodes("min", 2, b, 2, 2, "VALID", "NCHW", False, None)
        assert y2.lbn.startswith("MinPool2D_")  # the record's own prefix
        y3 = pool_nodes("min", 3, c, 2, 2, "VALID", "NCDHW", True, "m3")
        return concat([reshape(y, (-1,)) for y in (y1, y2, y3)], axis=0)

    got = fc.JobFunction(job, "predict", None, session)(x1, x2, x3)
    want = [-loops.pool_loops(-x, None, "max", 2, 2, pads, fmt)[0].reshape(-1)
            for x, fmt, pads in ((x1, "NWC", "VALID"), (x2, "NCHW", "VALID"), (x3, "NCDHW", [(0, 0)] * 3))]
    np.testing.assert_array_equal(got, np.concatenate(want))
