"""2-D max / average pooling kernels (forward and backward) plane by plane: the cpu backend's base of
its 2-D pooling overrides (``flowjob_ops.overrides.cpu.pool_cache_blocked``), the same semantics as the rank-generic
reference (``flowjob_ops.kernels.pool``).

Pooling is per channel, so the kernels work directly in the tensor's own
layout (``data_format`` "NCHW" or "NHWC"); there is no transposition.  Each
kernel is built once per graph node, allocates its output and temporaries in
``__init__`` and returns the same output array on every call.

Implementation: a window of kh*kw taps is reduced as kh*kw strided slices of
the (padded) input, combined with ufuncs writing ``out=`` the output; one pass
per tap over the output.  This reads exactly what a window-view reduction
reads, but numpy's reduction over small trailing window axes of a strided view
measured 10-40x slower, so a window-view reduction is only used for a single
output pixel per plane (global pooling), where it reduces long contiguous rows.
Where windows do not overlap, a tap's gradient is written rather than added, and where
they tile the plane the gradient is not zeroed first.

Semantics (TF / legacy OneFlow):

* max pooling pads with -inf, so padded positions never win a window;
* max-pool gradient: each window's gradient goes to exactly one element, the
  *first* maximal one in row-major window order (tap (0, 0), (0, 1), ...);
  elements that are the argmax of several (overlapping) windows get the sum;
* average pooling excludes padded positions from the divisor (a window with
  no real element outputs 0).
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from flowjob_ops.kernels.window2d import Window2d, check_data_format, spatial_index


def _lowest(dtype: np.dtype) -> Any:
    """Padding value that never wins a max (-inf, or the minimum for ints)."""
    if np.issubdtype(dtype, np.floating):
        return -np.inf
    return np.iinfo(dtype).min


class _Pool2d:
    """Shared geometry and buffers of the pooling kernels: every class is built as
    ``Kernel(xp, x_shape, dtype, ksize, strides, pads="VALID", data_format="NCHW", **options)``, its own
    buffers made by ``_setup(**options)``."""

    def __init__(
        self,
        xp: Any,
        x_shape: Sequence[int],
        dtype: Any,
        ksize: Any,
        strides: Any,
        pads: Any = "VALID",
        data_format: str = "NCHW",
        **options: Any,
    ):
        self.xp = xp
        self.data_format = fmt = check_data_format(data_format)
        if len(x_shape) != 4:
            raise ValueError(f"pooling input must be 4-d ({fmt}), got shape {tuple(x_shape)}")
        self.x_shape = tuple(int(v) for v in x_shape)
        self.dtype = np.dtype(dtype)
        self._sp = (2, 3) if fmt == "NCHW" else (1, 2)
        hw = (self.x_shape[self._sp[0]], self.x_shape[self._sp[1]])
        self.window = win = Window2d.create(hw, ksize, strides, 1, pads, fmt)
        self.out_shape = self._with_hw(win.out_hw)
        self.padded_shape = self._with_hw(win.padded_hw)
        self._interior = spatial_index(fmt, *win.interior)
        self._tap_idx = [spatial_index(fmt, *win.tap(i, j)) for i, j in win.taps()]
        kh, kw = win.ksize
        # Global pooling (one output pixel per plane): reduce the window region
        # in one call instead of kh*kw passes.
        self._global = not win.has_padding and win.out_hw == (1, 1)
        self._region = spatial_index(fmt, slice(0, kh), slice(0, kw))
        self._setup(**options)

    def _setup(self) -> None:
        """The kernel's own buffers (a subclass's keyword options are its arguments)."""

    def _with_hw(self, hw: tuple[int, int]) -> tuple[int, int, int, int]:
        shape = list(self.x_shape)
        shape[self._sp[0]], shape[self._sp[1]] = hw
        return tuple(shape)  # type: ignore[return-value]

    def _check(self, name: str, a: Any, expected: tuple[int, ...]) -> None:
        if tuple(a.shape) != expected:
            raise ValueError(f"{name} has shape {tuple(a.shape)}, this kernel was built for {expected}")


class _PaddedInput:
    """A padded copy of x whose border (fill value) is written only once."""

    def __init__(self, pool: _Pool2d, fill: Any):
        self._pool = pool
        self._buf = None
        if pool.window.has_padding:
            self._buf = pool.xp.full(pool.padded_shape, fill, dtype=pool.dtype)
            self._inner = self._buf[pool._interior]

    def __call__(self, x: Any) -> Any:
        self._pool._check("pooling input x", x, self._pool.x_shape)
        if self._buf is None:
            return x
        self._inner[...] = x
        return self._buf


class PaddedGrad:
    """A zeroed, padded dx accumulator; ``finish`` returns dx without the border.

    ``order``: the memory order of the buffer (outermost axis first), NCHW / NHWC by default.
    """

    def __init__(self, pool: _Pool2d, order: tuple[int, ...] | None = None):
        xp = pool.xp
        self.order = order = tuple(order) if order is not None else tuple(range(4))
        mem = xp.zeros(tuple(pool.padded_shape[k] for k in order), dtype=pool.dtype)
        self.buf = mem.transpose(tuple(int(k) for k in np.argsort(order)))
        if pool.window.has_padding:
            self._dx = xp.empty(pool.x_shape, dtype=pool.dtype)
            self._inner = self.buf[pool._interior]
        else:
            self._dx = self.buf
            self._inner = None

    def finish(self) -> Any:
        if self._inner is not None:
            self._dx[...] = self._inner
        return self._dx


class MaxPool2d(_Pool2d):
    """y = max over each window (padding is -inf)."""

    def _setup(self) -> None:
        xp = self.xp
        self._src = _PaddedInput(self, _lowest(self.dtype))
        self._y = xp.empty(self.out_shape, dtype=self.dtype)

    def __call__(self, x: Any) -> Any:
        """Return y (the kernel's own buffer, overwritten by the next call)."""
        xp, y = self.xp, self._y
        src = self._src(x)
        if self._global:
            src[self._region].max(axis=self._sp, keepdims=True, out=y)
            return y
        taps = [src[idx] for idx in self._tap_idx]
        if len(taps) == 1:
            xp.copyto(y, taps[0])
            return y
        xp.maximum(taps[0], taps[1], out=y)
        for t in taps[2:]:
            xp.maximum(y, t, out=y)
        return y


class MaxPool2dBackward(_Pool2d):
    """dx of max pooling: each window's dy goes to its first maximal element.

    "First" is row-major window order, so ties (e.g. ReLU zeros) route each
    window's gradient to exactly one element.  ``y`` must be the forward
    output for ``x`` (bitwise: the argmax is found by comparing x with y).

    ``relu=True`` computes ``relu_grad(x, dx)`` (the fused ``max_pool2d_relu_grad``) as the
    gradient of ``dy * (y > 0)``: exact, since an element only receives dy from windows whose
    first maximum it is, where x == y and so x > 0 iff y > 0.

    dx is contiguous in ``data_format``.
    """

    def _setup(self, *, relu: bool = False) -> None:
        xp = self.xp
        self.relu = bool(relu)
        self._src = _PaddedInput(self, _lowest(self.dtype))
        self._grad = PaddedGrad(self)
        self._hit = xp.empty(self.out_shape, dtype=bool)  # this tap is the window's argmax
        self._free = xp.empty(self.out_shape, dtype=bool)  # window's argmax not found yet
        self._tmp = xp.empty(self.out_shape, dtype=self.dtype)
        self._dst = [self._grad.buf[idx] for idx in self._tap_idx]
        if self.relu:
            self._mask = xp.empty(self.out_shape, dtype=bool)
            self._masked = xp.empty(self.out_shape, dtype=self.dtype)

    def __call__(self, x: Any, y: Any, dy: Any) -> Any:
        """Return dx (the kernel's own buffer, overwritten by the next call)."""
        self._check("max-pool output y", y, self.out_shape)
        self._check("max-pool output gradient dy", dy, self.out_shape)
        return self._tap_by_tap(self._src(x), y, dy)

    def _tap_by_tap(self, src: Any, y: Any, dy: Any) -> Any:
        """dx from the padded input ``src``: one pass over the output per window tap."""
        xp = self.xp
        if self.relu:
            xp.greater(y, 0, out=self._mask)
            xp.multiply(dy, self._mask, out=self._masked)
            dy = self._masked
        hit, free, tmp = self._hit, self._free, self._tmp
        # windows that tile the plane write every element: no zero fill
        if not self.window.tiles:
            self._grad.buf.fill(0)
        self._route(src, y, dy, self._dst, hit, free, tmp)
        return self._grad.finish()

    def _route(self, src: Any, y: Any, dy: Any, dsts: Sequence[Any], hit: Any, free: Any, tmp: Any) -> None:
        """Each window's dy to its first maximal tap of ``src``: written to, or added into (windows that
        overlap), ``dsts`` (the taps' views of the padded gradient, zeroed where windows leave gaps)."""
        xp = self.xp
        # windows that do not overlap never share an input element: each tap's gradient is written
        overwrite = self.window.non_overlapping
        last = len(self._tap_idx) - 1
        for k, (idx, dst) in enumerate(zip(self._tap_idx, dsts)):
            xp.equal(src[idx], y, out=hit)
            if k == 0:
                if last:
                    xp.logical_not(hit, out=free)
            else:
                xp.logical_and(hit, free, out=hit)
                if k < last:
                    xp.logical_xor(free, hit, out=free)  # free &= ~hit (hit is a subset)
            if overwrite:
                xp.multiply(dy, hit, out=dst)
            else:
                xp.multiply(dy, hit, out=tmp)
                xp.add(dst, tmp, out=dst)


def _inverse_counts(pool: _Pool2d) -> Any:
    """1 / (number of real, unpadded elements) per output pixel, broadcastable to y.

    A scalar when nothing is padded; 0 for windows that lie entirely in padding.
    """
    win = pool.window
    kh, kw = win.ksize
    if not win.has_padding:
        return 1.0 / (kh * kw)

    def counts(n_out: int, size: int, k: int, s: int, before: int) -> np.ndarray:
        start = np.arange(n_out) * s - before
        return np.clip(np.minimum(start + k, size) - np.maximum(start, 0), 0, None)

    (oh, ow), (sh, sw), ((t, _), (l, _)) = win.out_hw, win.strides, win.pads
    n = np.outer(counts(oh, win.in_hw[0], kh, sh, t), counts(ow, win.in_hw[1], kw, sw, l))
    inv = np.where(n > 0, 1.0 / np.maximum(n, 1), 0.0).astype(pool.dtype)
    if pool.data_format == "NHWC":
        inv = inv[:, :, None]
    return pool.xp.asarray(inv)


class AvgPool2d(_Pool2d):
    """y = mean over each window's real (unpadded) elements."""

    def _setup(self) -> None:
        xp = self.xp
        self._src = _PaddedInput(self, 0)
        self._inv = _inverse_counts(self)
        self._y = xp.empty(self.out_shape, dtype=self.dtype)

    def __call__(self, x: Any) -> Any:
        """Return y (the kernel's own buffer, overwritten by the next call)."""
        xp, y = self.xp, self._y
        src = self._src(x)
        if self._global:
            src[self._region].mean(axis=self._sp, keepdims=True, out=y)
            return y
        taps = [src[idx] for idx in self._tap_idx]
        if len(taps) == 1:
            xp.multiply(taps[0], self._inv, out=y)
            return y
        xp.add(taps[0], taps[1], out=y)
        for t in taps[2:]:
            xp.add(y, t, out=y)
        xp.multiply(y, self._inv, out=y)
        return y


class AvgPool2dBackward(_Pool2d):
    """dx of average pooling: dy / count spread over each window's real elements.

    Called as ``kernel(dy)``: the gradient needs neither x nor y.
    """

    def _setup(self) -> None:
        xp = self.xp
        self._inv = _inverse_counts(self)
        self._grad = PaddedGrad(self)
        self._g = xp.empty(self.out_shape, dtype=self.dtype)
        self._dst = [self._grad.buf[idx] for idx in self._tap_idx]

    def __call__(self, dy: Any) -> Any:
        """Return dx (the kernel's own buffer, overwritten by the next call)."""
        xp = self.xp
        self._check("avg-pool output gradient dy", dy, self.out_shape)
        g = self._g
        xp.multiply(dy, self._inv, out=g)
        # Write instead of accumulate / skip the fill as in MaxPool2dBackward.
        overwrite = self.window.non_overlapping
        if not self.window.tiles:
            self._grad.buf.fill(0)
        for dst in self._dst:
            if overwrite:
                xp.copyto(dst, g)
            else:
                xp.add(dst, g, out=dst)
        return self._grad.finish()
