"""A matrix product in parts over the host threads (``Backend.parallel``).

BLAS runs one thread per caller in a step (``blas_threads``): OpenBLAS's own worker threads spin for a while
after each call, and that spinning took the core a following split or lane needed (a LeNet step on two threads
was no faster than on one). A product large enough is cut instead into parts that the host threads run, each
part one BLAS call: the entries of a stacked product, or fixed blocks of a 2-D product's rows (or columns).
A stacked product's entries are numpy's own BLAS calls, so the bits are those of one call on one BLAS thread.
A 2-D product is cut into one block per thread, and BLAS may round a block's sums differently in the last bit
from a whole call's (its kernels depend on the sizes): such a product agrees across thread counts to float32
rounding, and gives the same bits run after run on one count.
"""
from __future__ import annotations

from typing import Any, Callable, Sequence

GEMM_SPLIT_FLOPS = 8e6
"""A matrix product this small (multiply-adds, twice) is one BLAS call: handing parts to threads costs more."""
GEMM_PARTS = 8
"""A 2-D product is cut where its longer side has at least four rows per part of this many."""


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
    product (each entry one BLAS call, as numpy makes them), else one block of out's rows (or columns) per
    thread, each one BLAS call on one thread. BLAS keeps one thread per caller (``blas_threads``), so a large
    product uses the cores this way; one block per thread, as BLAS's own threads would cut it, because every
    block reads the whole of the other operand (a vocabulary projection's 30522-long inner sum packed eight
    times took twice as long as once)."""

    def __init__(self, xp: Any, shape_a: Sequence[int], shape_b: Sequence[int], split: Callable[..., None] | None):
        self.xp = xp
        how = matmul_parts(shape_a, shape_b) if split is not None else None
        self._split = split if how is not None else None
        self._axis, self._size = how if how is not None else ("whole", 1)

    def __call__(self, a: Any, b: Any, out: Any) -> Any:
        if self._split is None:
            return self.xp.matmul(a, b, out=out)
        matmul, axis = self.xp.matmul, self._axis

        def run(lo: int, hi: int) -> None:
            s = slice(lo, hi)
            if axis == "cols":
                matmul(a, b[:, s], out=out[:, s])
            elif axis == "rows":
                matmul(a[s], b, out=out[s])
            else:  # the stacked entries s of each operand that has them (one broadcast has one)
                matmul(_entries(a, s, out.ndim), _entries(b, s, out.ndim), out=out[s])

        self._split(run, self._size)
        return out
