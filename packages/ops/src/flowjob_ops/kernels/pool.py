"""Max and average pooling over any number of spatial axes (1, 2 or 3), forward and backward: the
reference kernels of every pooling op, for numpy and cupy alike.

Pooling is per channel, so the kernels work in the tensor's own layout (channels first or last). A
window of taps is reduced as one strided slice of the padded input per tap, combined with ufuncs
writing into the output: the only Python loop is over the kernel's taps.

Semantics (TF / legacy OneFlow):

* max pooling pads with -inf, so padding never wins; each window's gradient goes to its *first*
  maximal element in row-major tap order (an element that is the first maximum of several
  overlapping windows gets the sum);
* average pooling divides by the number of real (unpadded) elements of each window; a window of
  padding only gives 0.

Each kernel is built once per graph node, writes into the ``out`` array it was given and returns it.
The cpu backend overrides the 2-D ones with plane-blocked and tiled variants
(``flowjob_ops.overrides.cpu.pool_cache_blocked``), which the conformance suite checks against these.
"""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from .window import Window, channels_last, check_format, spatial_index, with_spatial


class PoolGeometry:
    """The validated window of one pooling and the index of every tap in the input's layout; the rank is
    the input's (``len(x_shape) - 2``)."""

    def __init__(self, x_shape: Sequence[int], ksize: Any, strides: Any, padding: Any, data_format: str) -> None:
        rank = len(x_shape) - 2
        if rank not in (1, 2, 3):
            raise ValueError(f"pooling needs a 3-d, 4-d or 5-d input (N, C and 1 to 3 spatial axes), got shape "
                             f"{tuple(x_shape)}")
        self.data_format = fmt = check_format(data_format, rank)
        self.channels_last = last = channels_last(fmt)
        self.x_shape = tuple(int(v) for v in x_shape)
        spatial = self.x_shape[1:-1] if last else self.x_shape[2:]
        self.window = win = Window.create(spatial, ksize, strides, 1, padding, fmt)
        self.y_shape = with_spatial(self.x_shape, last, win.out_size)
        self.padded_shape = with_spatial(self.x_shape, last, win.padded_size)
        self.interior = spatial_index(last, win.interior)
        self.taps = [spatial_index(last, win.tap(*t)) for t in win.taps()]

    def check(self, name: str, a: Any, shape: tuple[int, ...]) -> None:
        if tuple(a.shape) != shape:
            raise ValueError(f"{name} has shape {tuple(a.shape)}, this kernel was built for {shape}")


class _Padded:
    """A copy of x inside a border of ``fill``, written once; x itself when there is no padding."""

    def __init__(self, xp: Any, geom: PoolGeometry, dtype: Any, fill: Any) -> None:
        self.xp = xp
        self.buf = None
        if geom.window.has_padding:
            self.buf = xp.full(geom.padded_shape, fill, dtype=np.dtype(dtype))
            self._inner = self.buf[geom.interior]

    def __call__(self, x: Any) -> Any:
        if self.buf is None:
            return x
        self.xp.copyto(self._inner, x)
        return self.buf


class _GradAccumulator:
    """A padded dx, each tap's share written (windows that do not overlap never share an element) or added
    in; ``finish`` copies its interior into ``out``."""

    def __init__(self, xp: Any, geom: PoolGeometry, dtype: Any, out: Any) -> None:
        self.xp, self.out = xp, out
        self.buf = xp.zeros(geom.padded_shape, dtype=np.dtype(dtype))
        self.taps = [self.buf[t] for t in geom.taps]
        self._inner = self.buf[geom.interior]
        self.overwrite = geom.window.non_overlapping
        self._zero = not geom.window.tiles  # windows that tile the block write every element

    def start(self) -> None:
        if self._zero:
            self.buf.fill(0)

    def put(self, target: Any, share: Any) -> None:
        """A tap's ``share`` into its ``target`` view of the buffer."""
        if self.overwrite:
            self.xp.copyto(target, share)
        else:
            self.xp.add(target, share, out=target)

    def finish(self) -> Any:
        self.xp.copyto(self.out, self._inner)
        return self.out


def _inverse_counts(xp: Any, geom: PoolGeometry, dtype: Any) -> Any:
    """1 / (real elements of each window), 0 for a window of padding only, shaped to broadcast on y."""
    win = geom.window
    ones = np.zeros(win.padded_size)
    ones[win.interior] = 1.0
    counts = np.zeros(win.out_size)
    for t in win.taps():
        counts += ones[win.tap(*t)]
    inverse = np.divide(1.0, counts, out=np.zeros_like(counts), where=counts > 0).astype(np.dtype(dtype))
    shape = (1, *win.out_size, 1) if geom.channels_last else (1, 1, *win.out_size)
    return xp.asarray(inverse.reshape(shape))


def _combine_taps(xp: Any, geom: PoolGeometry, src: Any, ufunc: Any, out: Any) -> Any:
    """``out`` = ``ufunc`` folded over the taps of the padded input ``src``, in row-major tap order."""
    first, *rest = geom.taps
    xp.copyto(out, src[first])
    for tap in rest:
        ufunc(out, src[tap], out=out)
    return out


class MaxPool:
    """y = max over each window (padding is -inf)."""

    def __init__(self, xp: Any, geom: PoolGeometry, dtype: Any, out: Any) -> None:
        self.xp, self.geom, self.out = xp, geom, out
        self.padded = _Padded(xp, geom, dtype, -np.inf)

    def __call__(self, x: Any) -> Any:
        self.geom.check("pooling input x", x, self.geom.x_shape)
        return _combine_taps(self.xp, self.geom, self.padded(x), self.xp.maximum, self.out)


class MaxPoolBackward:
    """dx given (x, y, dy): each window's dy to its first maximal element. ``y`` must be the forward output
    for ``x`` (the maximum is found by equality).

    ``relu=True`` gives ``relu_grad(x, dx)`` (the fused ``max_pool2d_relu_grad``) as the gradient of
    ``dy * (y > 0)``: exact, since an element only receives dy from windows whose first maximum it is,
    where x == y and so x > 0 iff y > 0.
    """

    def __init__(self, xp: Any, geom: PoolGeometry, dtype: Any, out: Any, relu: bool = False) -> None:
        self.xp, self.geom, self.relu = xp, geom, relu
        self.padded = _Padded(xp, geom, dtype, -np.inf)
        self.grad = _GradAccumulator(xp, geom, dtype, out)
        self._open = xp.empty(geom.y_shape, dtype=bool)  # windows whose maximum is not found yet
        self._hit = xp.empty(geom.y_shape, dtype=bool)
        self._part = xp.empty(geom.y_shape, dtype=np.dtype(dtype))
        self._masked = xp.empty(geom.y_shape, dtype=np.dtype(dtype)) if relu else None

    def __call__(self, x: Any, y: Any, dy: Any) -> Any:
        xp, geom = self.xp, self.geom
        geom.check("max-pool input x", x, geom.x_shape)
        geom.check("max-pool output y", y, geom.y_shape)
        geom.check("max-pool output gradient dy", dy, geom.y_shape)
        if self._masked is not None:
            xp.greater(y, 0, out=self._hit)
            xp.multiply(dy, self._hit, out=self._masked)
            dy = self._masked
        src = self.padded(x)
        self.grad.start()
        self._open.fill(True)
        for tap, target in zip(geom.taps, self.grad.taps):
            xp.equal(src[tap], y, out=self._hit)
            xp.logical_and(self._hit, self._open, out=self._hit)
            xp.logical_xor(self._open, self._hit, out=self._open)
            if self.grad.overwrite:
                xp.multiply(dy, self._hit, out=target)
            else:
                xp.multiply(dy, self._hit, out=self._part)
                xp.add(target, self._part, out=target)
        return self.grad.finish()


class AvgPool:
    """y = mean over each window's real (unpadded) elements."""

    def __init__(self, xp: Any, geom: PoolGeometry, dtype: Any, out: Any) -> None:
        self.xp, self.geom, self.out = xp, geom, out
        self.padded = _Padded(xp, geom, dtype, 0)
        self.inverse = _inverse_counts(xp, geom, dtype)

    def __call__(self, x: Any) -> Any:
        xp = self.xp
        self.geom.check("pooling input x", x, self.geom.x_shape)
        out = _combine_taps(xp, self.geom, self.padded(x), xp.add, self.out)
        return xp.multiply(out, self.inverse, out=out)


class AvgPoolBackward:
    """dx given dy: each window's dy divided by its real elements, spread over them."""

    def __init__(self, xp: Any, geom: PoolGeometry, dtype: Any, out: Any) -> None:
        self.xp, self.geom = xp, geom
        self.grad = _GradAccumulator(xp, geom, dtype, out)
        self.inverse = _inverse_counts(xp, geom, dtype)
        self._share = xp.empty(geom.y_shape, dtype=np.dtype(dtype))

    def __call__(self, dy: Any) -> Any:
        xp = self.xp
        self.geom.check("avg-pool output gradient dy", dy, self.geom.y_shape)
        xp.multiply(dy, self.inverse, out=self._share)
        self.grad.start()
        # padded positions collect shares too; they are dropped with the border
        for target in self.grad.taps:
            self.grad.put(target, self._share)
        return self.grad.finish()
