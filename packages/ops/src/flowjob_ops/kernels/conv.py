"""Convolution over any number of spatial axes (1, 2 or 3): the reference kernels of every convolution op
and its gradients, im2col + one batched GEMM over the groups, for numpy and cupy alike.

Layouts (legacy OneFlow; here for 3 spatial axes, the others alike):

* channels first (``NCDHW``): x (N, C, D, H, W), w (F, C/groups, kd, kh, kw), y (N, F, OD, OH, OW);
* channels last (``NDHWC``): x (N, D, H, W, C), w (F, kd, kh, kw, C/groups), y (N, OD, OH, OW, F).

Every kernel works channels first inside: x is copied into the interior of a zero-bordered
(N, C, *padded) buffer whose border is written once, a strided window view of that buffer
(N, groups, C/groups, *ksize, *out) is copied in one call into the column matrix
(groups, C/groups * taps, N * out), and ``w @ cols`` gives every output at once. The data gradient
is the GEMM ``w.T @ dy`` followed by one strided add per kernel tap (col2im), the filter gradient
``dy @ cols.T``. No Python loop runs over output elements; the only loop is over the kernel's taps.

Each kernel is built once per graph node from the static shapes, takes its temporaries from ``alloc`` (the
plan's scratch pool: valid while the kernel runs) except the zero-bordered buffers and a column matrix kept
for the filter gradient, writes into the ``out`` array it was given and returns it. The cpu backend
overrides the 2-D ones (``flowjob_ops.overrides.cpu.conv``: im2col into strided outputs, Winograd, 1x1
products), which the conformance suite checks against these.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable, Sequence

import numpy as np

from .window import Window, as_strided, channels_last, check_format

Alloc = Callable[[tuple[int, ...], Any], Any]
"""(shape, dtype) -> an array: ``KernelContext.scratch``, or ``numpy.empty``-like."""


@dataclass(frozen=True)
class ConvGeometry:
    """The validated shapes of one convolution."""

    channels_last: bool
    N: int
    C: int
    F: int
    groups: int
    window: Window

    @classmethod
    def create(cls, x_shape: Sequence[int], w_shape: Sequence[int], strides: Any, padding: Any, dilations: Any,
               groups: Any, data_format: str) -> "ConvGeometry":
        if len(x_shape) not in (3, 4, 5):
            raise ValueError(f"the input must be 3-d, 4-d or 5-d (N, C and 1 to 3 spatial axes), got shape "
                             f"{tuple(x_shape)}")
        fmt = check_format(data_format, len(x_shape) - 2)
        last = channels_last(fmt)
        if len(w_shape) != len(fmt):
            raise ValueError(f"the filters must be {len(fmt)}-d, got shape {tuple(w_shape)}")
        if isinstance(groups, bool) or not isinstance(groups, (int, np.integer)) or groups < 1:
            raise ValueError(f"groups must be a positive int, got {groups!r}")
        n, c = int(x_shape[0]), int(x_shape[-1] if last else x_shape[1])
        spatial = tuple(x_shape[1:-1] if last else x_shape[2:])
        f = int(w_shape[0])
        cg, ksize = (int(w_shape[-1]), tuple(w_shape[1:-1])) if last else (int(w_shape[1]), tuple(w_shape[2:]))
        if c % groups or f % groups:
            raise ValueError(f"groups={groups} must divide both the input channels ({c}) and the number of filters "
                             f"({f})")
        if cg != c // groups:
            taps = ", ".join("k" + a for a in fmt.lower() if a not in "nc")
            layout = f"(F, {taps}, C/groups)" if last else f"(F, C/groups, {taps})"
            raise ValueError(f"weight shape {tuple(w_shape)} ({fmt}) has {cg} input channels per filter, expected "
                             f"C/groups = {c}/{groups} = {c // groups} (filters are {layout})")
        window = Window.create(spatial, ksize, strides, dilations, padding, fmt)
        return cls(last, n, c, f, int(groups), window)

    @property
    def ndim(self) -> int:
        return len(self.window.in_size)

    @property
    def x_shape(self) -> tuple[int, ...]:
        return self._shape(self.C, self.window.in_size)

    @property
    def y_shape(self) -> tuple[int, ...]:
        return self._shape(self.F, self.window.out_size)

    @property
    def w_shape(self) -> tuple[int, ...]:
        cg, k = self.C // self.groups, self.window.ksize
        return (self.F, *k, cg) if self.channels_last else (self.F, cg, *k)

    def _shape(self, channels: int, spatial: tuple[int, ...]) -> tuple[int, ...]:
        return (self.N, *spatial, channels) if self.channels_last else (self.N, channels, *spatial)

    def first(self, a: Any) -> Any:
        """A channels-last array seen channels first (a view); channels-first arrays as they are."""
        if not self.channels_last:
            return a
        n = a.ndim
        return a.transpose(0, n - 1, *range(1, n - 1))

    def from_first(self, a: Any) -> Any:
        """A channels-first array seen in this geometry's layout (a view)."""
        if not self.channels_last:
            return a
        n = a.ndim
        return a.transpose(0, *range(2, n), 1)

    @property
    def taps(self) -> int:
        return math.prod(self.window.ksize)

    @property
    def positions(self) -> int:
        """Output positions of the GEMM: N times the output's spatial size."""
        return self.N * math.prod(self.window.out_size)


def allocator(xp: Any, alloc: Alloc | None) -> Alloc:
    """``alloc``, or fresh memory of ``xp``."""
    if alloc is not None:
        return alloc
    return lambda shape, dtype: xp.empty(shape, dtype=dtype)


class _Columns:
    """The im2col matrix (groups, C/groups * taps, N * out) of an input, in a buffer from ``alloc``."""

    def __init__(self, xp: Any, geom: ConvGeometry, dtype: Any, alloc: Alloc) -> None:
        self.xp, self.geom, self.dtype = xp, geom, np.dtype(dtype)
        win, g = geom.window, geom.groups
        self.pad = xp.zeros((geom.N, geom.C, *win.padded_size), dtype=np.dtype(dtype))
        self._interior = self.pad[(slice(None), slice(None), *win.interior)]
        cg = geom.C // g
        self.cols = alloc((g, cg, *win.ksize, geom.N, *win.out_size), np.dtype(dtype))
        sn, sc, *ss = self.pad.strides
        shape = (geom.N, g, cg, *win.ksize, *win.out_size)
        strides = (sn, cg * sc, sc, *(s * d for s, d in zip(ss, win.dilations)),
                   *(s * st for s, st in zip(ss, win.strides)))
        n = geom.ndim
        self._view = as_strided(xp, self.pad, shape, strides).transpose(1, 2, *range(3, 3 + n), 0,
                                                                        *range(3 + n, 3 + 2 * n))
        self.matrix = self.cols.reshape(g, cg * geom.taps, geom.positions)

    def __call__(self, x: Any) -> Any:
        xp = self.xp
        xp.copyto(self._interior, self.geom.first(x))
        xp.copyto(self.cols, self._view)
        return self.matrix


def _weight_matrix(geom: ConvGeometry, w: Any) -> Any:
    """The filters as (groups, F/groups, C/groups * taps)."""
    g = geom.groups
    wf = geom.first(w)  # (F, C/groups, *ksize)
    return wf.reshape(g, geom.F // g, (geom.C // g) * geom.taps)


class _OutputGradient:
    """dy (channels first) copied into a (groups, F/groups, N * out) buffer."""

    def __init__(self, xp: Any, geom: ConvGeometry, dtype: Any, alloc: Alloc) -> None:
        self.xp, self.geom = xp, geom
        self.buf = alloc((geom.F, geom.N, *geom.window.out_size), np.dtype(dtype))
        self.matrix = self.buf.reshape(geom.groups, geom.F // geom.groups, geom.positions)

    def __call__(self, dy: Any) -> Any:
        self.xp.copyto(self.buf, self.geom.first(dy).swapaxes(0, 1))
        return self.matrix


def _check(name: str, a: Any, shape: tuple[int, ...]) -> None:
    if tuple(a.shape) != shape:
        raise ValueError(f"{name} has shape {tuple(a.shape)}, this kernel was built for {shape}")


class ConvForward:
    """y = conv(x, w) into ``out``; ``keep_columns``: the column matrix in memory of its own, which the
    filter gradient may then reuse (``columns``)."""

    def __init__(self, xp: Any, geom: ConvGeometry, dtype: Any, out: Any, alloc: Alloc | None = None,
                 keep_columns: bool = False) -> None:
        self.xp, self.geom, self.out = xp, geom, out
        temporary = allocator(xp, alloc)
        self.columns = _Columns(xp, geom, dtype, allocator(xp, None) if keep_columns else temporary)
        g = geom.groups
        self._gemm = temporary((g, geom.F // g, geom.positions), np.dtype(dtype))
        # the GEMM result (F, N, *out) seen as y in channels-first order
        self._result = self._gemm.reshape(geom.F, geom.N, *geom.window.out_size).swapaxes(0, 1)
        self._out_first = geom.first(out)

    def __call__(self, x: Any, w: Any) -> Any:
        _check("convolution input x", x, self.geom.x_shape)
        _check("convolution filters", w, self.geom.w_shape)
        cols = self.columns(x)
        self.xp.matmul(_weight_matrix(self.geom, w), cols, out=self._gemm)
        self.xp.copyto(self._out_first, self._result)
        return self.out


class ConvBackwardData:
    """dx = d conv / d x, given dy and w, into ``out``."""

    def __init__(self, xp: Any, geom: ConvGeometry, dtype: Any, out: Any, alloc: Alloc | None = None) -> None:
        self.xp, self.geom, self.out = xp, geom, out
        win, g = geom.window, geom.groups
        cg = geom.C // g
        temporary = allocator(xp, alloc)
        self.dy = _OutputGradient(xp, geom, dtype, temporary)
        self._dcols = temporary((g, cg * geom.taps, geom.positions), np.dtype(dtype))
        # one (C, N, *out) block per tap, seen as (N, C, *out) to add into the padded dx
        blocks = self._dcols.reshape(g, cg, geom.taps, geom.N, *win.out_size)
        self._blocks = [blocks[:, :, t].reshape(geom.C, geom.N, *win.out_size).swapaxes(0, 1)
                        for t in range(geom.taps)]
        self._dpad = temporary((geom.N, geom.C, *win.padded_size), np.dtype(dtype))  # zeroed by every call
        whole = (slice(None), slice(None))
        self._tap_slices = [self._dpad[(*whole, *win.tap(*t))] for t in win.taps()]
        self._interior = self._dpad[(*whole, *win.interior)]
        self._out_first = geom.first(out)

    def __call__(self, dy: Any, w: Any) -> Any:
        xp = self.xp
        _check("convolution output gradient dy", dy, self.geom.y_shape)
        _check("convolution filters", w, self.geom.w_shape)
        xp.matmul(_weight_matrix(self.geom, w).swapaxes(1, 2), self.dy(dy), out=self._dcols)
        self._dpad.fill(0)
        # within one tap the output positions read distinct input elements, so each add is exact
        for target, block in zip(self._tap_slices, self._blocks):
            xp.add(target, block, out=target)
        xp.copyto(self._out_first, self._interior)
        return self.out


class ConvBackwardFilter:
    """dw = d conv / d w, given x and dy, into ``out``.

    ``columns``: the forward kernel's column builder (``ConvForward.columns``, kept) to share; a call with
    ``reuse_cols=True`` then takes its matrix as it is, which is right when the forward has just
    built it from this very x.
    """

    def __init__(self, xp: Any, geom: ConvGeometry, dtype: Any, out: Any, columns: Any = None,
                 alloc: Alloc | None = None) -> None:
        self.xp, self.geom, self.out = xp, geom, out
        g = geom.groups
        temporary = allocator(xp, alloc)
        self.columns = columns if columns is not None else _Columns(xp, geom, dtype, temporary)
        self.dy = _OutputGradient(xp, geom, dtype, temporary)
        self._gemm = temporary((g, geom.F // g, (geom.C // g) * geom.taps), np.dtype(dtype))
        self._result = self._gemm.reshape(geom.F, geom.C // g, *geom.window.ksize)
        self._out_first = geom.first(out)

    def __call__(self, x: Any, dy: Any, reuse_cols: bool = False) -> Any:
        _check("convolution input x", x, self.geom.x_shape)
        _check("convolution output gradient dy", dy, self.geom.y_shape)
        cols = self.columns.matrix if reuse_cols else self.columns(x)
        self.xp.matmul(self.dy(dy), cols.swapaxes(1, 2), out=self._gemm)
        self.xp.copyto(self._out_first, self._result)
        return self.out
