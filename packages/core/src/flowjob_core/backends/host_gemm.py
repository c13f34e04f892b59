"""A matrix product in parts over the host threads (``Backend.parallel``).

BLAS runs one thread per caller in a step (``blas_threads``): OpenBLAS's own worker threads spin for a while
after each call, and that spinning took the core a following split or lane needed (a LeNet step on two threads
was no faster than on one). A product large enough is cut instead into parts that the host threads run, each
part one BLAS call: the entries of a stacked product, or fixed blocks of a 2-D product's rows (or columns).
The blocks are fixed by the shapes, never by the thread count, so a plan gives the same bits on two threads as
on eight. Against one whole call BLAS may round a block's sums differently in the last bit (its kernels depend
on the sizes), and a one-thread step makes that whole call: a product cut here agrees with it to float32
rounding.
"""
from __future__ import annotations

from typing import Any, Callable, Sequence

GEMM_SPLIT_FLOPS = 8e6
"""A matrix product this small (multiply-adds, twice) is one BLAS call: handing parts to threads costs more."""
GEMM_PARTS = 8
"""Parts of a large 2-D product: enough for eight threads; fixed by the shapes, never by the thread count."""


def operand_shape(shape: Sequence[int], transposed: bool) -> tuple[int, ...]:
    """An operand's shape as the product reads it (its last two axes swapped when transposed)."""
    shape = tuple(shape)
    return shape[:-2] + (shape[-1], shape[-2]) if transposed and len(shape) >= 2 else shape


def matmul_parts(shape_a: Sequence[int], shape_b: Sequence[int]) -> tuple[str, int] | None:
    """How ``a @ b`` (numpy's matmul, stacked operands broadcast) splits: ("batch", entries) over the leading axis
    of a stacked product, ("rows", M) or ("cols", N) of a 2-D one; None where it is too small to split."""
    m, k, n = shape_a[-2], shape_a[-1], shape_b[-1]
    stack = 1
    for d in (shape_a[:-2] if len(shape_a) >= len(shape_b) else shape_b[:-2]):
        stack *= int(d)
    if 2.0 * stack * m * n * k < GEMM_SPLIT_FLOPS:
        return None
    stacked = shape_a if len(shape_a) >= len(shape_b) else shape_b
    if len(stacked) > 2 and stacked[0] > 1:  # the entries of a stacked product (the other operand broadcast)
        return ("batch", int(stacked[0]))
    if len(shape_a) == 2 and len(shape_b) == 2:  # cut the longer side: each part's product stays large
        if max(m, n) >= 4 * GEMM_PARTS:
            return ("rows", m) if m >= n else ("cols", n)
    return None


def _entries(x: Any, s: slice, ndim: int) -> Any:
    """Entries ``s`` of x's leading stack axis, where x has that axis (as many axes as the product, more than one
    entry); else x whole (broadcast)."""
    return x[s] if x.ndim == ndim and x.shape[0] > 1 else x


def gemm_split(backend: Any) -> Callable[..., None] | None:
    """The backend's ``parallel`` where a plan holds BLAS to one thread on several host threads (its products are
    then cut here), else None (BLAS threads them itself, or there is one thread)."""
    host = getattr(backend, "lanes", None)
    if host is None or not getattr(backend, "host_arrays", False) or host.threads <= 1 or host.blas_wide:
        return None
    return getattr(backend, "parallel", None)


class SplitMatmul:
    """``out = a @ b`` in parts over the host threads (``Backend.parallel``): the stacked entries of a batched
    product, else fixed blocks of out's rows (or columns): each part one BLAS call on one thread. BLAS keeps
    one thread per caller (``blas_threads``), so a large product uses the cores this way."""

    def __init__(self, xp: Any, shape_a: Sequence[int], shape_b: Sequence[int], split: Callable[..., None] | None):
        self.xp = xp
        how = matmul_parts(shape_a, shape_b) if split is not None else None
        self._split = split if how is not None else None
        self._axis, size = how if how is not None else ("whole", 1)
        count = size if self._axis == "batch" else min(GEMM_PARTS, size)
        bounds = [size * i // count for i in range(count + 1)]
        self._blocks = [slice(bounds[i], bounds[i + 1]) for i in range(count)]

    def __call__(self, a: Any, b: Any, out: Any) -> Any:
        if self._split is None:
            return self.xp.matmul(a, b, out=out)
        matmul, blocks, axis = self.xp.matmul, self._blocks, self._axis

        def run(lo: int, hi: int) -> None:
            for s in blocks[lo:hi]:
                if axis == "cols":
                    matmul(a, b[:, s], out=out[:, s])
                elif axis == "rows":
                    matmul(a[s], b, out=out[s])
                else:  # the stacked entries s of each operand that has them (one broadcast has one)
                    matmul(_entries(a, s, out.ndim), _entries(b, s, out.ndim), out=out[s])

        self._split(run, len(blocks))
        return out
