"""The gpu backend's dropout masks, drawn on the device by a counter-based generator (``philox``), so a step
recorded as CUDA graphs draws fresh masks at every replay with no live piece and no host copy.

Each node has its own stream: the Philox key is the op's ``seed`` (fresh host entropy when it has none, taken
once when the kernel is built) and its counter is ``(block, draw, 0)``, ``draw`` a 64-bit count of the node's
calls held in device memory, which the node's own kernels read and then advance, inside the graph. Element
``i`` of a mask takes word ``i % 4`` of block ``i // 4``; it is kept when its top 24 bits ``k`` (a uniform
``k / 2**24`` in [0, 1)) exceed ``rate`` (``k > floor(rate * 2**24)``), as legacy kept an element whose uniform
draw exceeded the rate. A seed gives the same masks on every CUDA device, on the emulated CuPy and across
recorded and unrecorded runs (the counter advances once a call either way); they are not the CPU backend's
masks, which follow legacy's CPU generator (``flowjob_ops.kernels.keep_mask``), nor ``random_mask_like``'s on the
gpu backend, which still draws that stream on the host (a seed gives the CPU's values, as the other random ops).

On CuPy the mask is one ``ElementwiseKernel`` (the rounds as C, ``philox.philox_c``, written by the same code as
their array form) and one launch advances the counter; on the emulated CuPy, or a CuPy without it, the rounds run
as array operations (some hundred launches, the same words). Only the state moves to the device: a record's
``host_state`` mark is overridden by the kernel's own ``Kernel(run, host_state=False)``
(``flowjob_core.ir.kernel.runs_live``).
"""
from __future__ import annotations

import dataclasses
import functools
from typing import Any, Callable

import numpy as np

from flowjob_core import Kernel, KernelContext
from flowjob_core.ir.kernel import kernel_of
from flowjob_ops.records.dropout import DROPOUT

from flowjob_gpu.philox import MASK, philox4x32_10, philox_c, seed_key
from flowjob_gpu.record_kernels import own_kernel
from flowjob_gpu.emulation.modules import EmulatedModule

UNIFORM_BITS = 24  # the top bits of a word that make its uniform draw

MASK_IN_PARAMS = "raw uint64 draws, uint64 k0, uint64 k1, uint64 threshold, T scale"
MASK_OPERATION = (
    philox_c(("i / 4", "draws[0] & 0xFFFFFFFFULL", "draws[0] >> 32", 0), ("k0", "k1"))
    + "\nconst unsigned long long word = (i % 4 == 0) ? word0 : (i % 4 == 1) ? word1 : (i % 4 == 2) ? word2 : word3;"
    + f"\nmask = ((word >> {32 - UNIFORM_BITS}) > threshold) ? scale : (T)0;")
"""The body of the mask kernel (CuPy's ``ElementwiseKernel``, element ``i`` of the flat mask): ``scale`` where the
element is kept, else 0; the node's draw count is read from ``draws[0]``."""


def mask_kernel(cp: Any) -> Any:
    """The mask ``ElementwiseKernel`` on CuPy; None on an array module that builds no CUDA (the emulated CuPy)."""
    if isinstance(cp, EmulatedModule) or getattr(cp, "ElementwiseKernel", None) is None:
        return None
    return _compiled(cp)


@functools.lru_cache(maxsize=None)
def _compiled(cp: Any) -> Any:
    return cp.ElementwiseKernel(MASK_IN_PARAMS, "T mask", MASK_OPERATION, "flowjob_philox_keep_mask")


def keep_threshold(rate: float) -> int:
    """An element whose word's top 24 bits exceed this is kept: ``k / 2**24 > rate``."""
    return int(np.floor(rate * (1 << UNIFORM_BITS)))


class DeviceStream:
    """One node's Philox stream: ``words()`` gives the next call's ``size`` 32-bit words (uint64) on the device and
    advances the node's counter there."""

    def __init__(self, ctx: KernelContext, size: int, seed: int | None) -> None:
        xp = self.xp = ctx.xp
        if seed is None:  # no seed: fresh entropy, as the CPU's streams take
            seed = int(np.random.SeedSequence().generate_state(2, np.uint64)[0])
        self.key = seed_key(int(seed))
        self.size = size
        self.draws = ctx.workspace((1,), np.uint64)  # the node's calls so far: the counter's middle words
        self.draws.fill(0)
        self.blocks = xp.arange(-(-size // 4), dtype=np.uint64)
        self.one = np.uint64(1)
        self.kernel = mask_kernel(xp)

    def fill(self, out: Any, rate: float, scale: Any) -> None:
        """Write the next call's mask into ``out`` (``size`` elements, contiguous): ``scale`` where kept, else 0."""
        xp = self.xp
        if self.kernel is not None:
            self.kernel(self.draws, np.uint64(self.key[0]), np.uint64(self.key[1]), np.uint64(keep_threshold(rate)),
                        out.dtype.type(scale), out)
            xp.add(self.draws, self.one, out=self.draws)
            return
        xp.multiply(self.keep(rate).reshape(out.shape), out.dtype.type(scale), out=out)

    def words(self) -> Any:
        xp, draws = self.xp, self.draws
        words = philox4x32_10((self.blocks, draws & MASK, draws >> 32, 0), self.key)
        xp.add(draws, self.one, out=draws)
        return xp.stack(words, axis=1).reshape(-1)[:self.size]

    def keep(self, rate: float) -> Any:
        """A bool array of ``size``: True where the element is kept (probability about ``1 - rate``)."""
        return (self.words() >> (32 - UNIFORM_BITS)) > keep_threshold(rate)


def _on_device(fn: Callable[..., Any] | Kernel) -> Kernel:
    return dataclasses.replace(kernel_of(fn), host_state=False)  # its stream's state lives on the device


def dropout_kernel(ctx: KernelContext) -> Any:
    """Inputs (x,); outputs (y, mask): the record's semantics with the mask drawn on the device."""
    rate = float(ctx.attrs["rate"])
    if not ctx.training or rate == 0.0:
        return _on_device(own_kernel(ctx, "a predict job or a rate of 0"))  # the record's identity: no draw
    xp, y, mask = ctx.xp, ctx.out(0), ctx.out(1)
    spec = ctx.outputs[1]
    stream = DeviceStream(ctx, int(np.prod(spec.shape, dtype=np.int64)), ctx.attrs.get("seed"))
    scale = spec.dtype.type(1.0 / (1.0 - rate))

    def run(x: Any) -> tuple[Any, Any]:
        stream.fill(mask, rate, scale)
        xp.multiply(x, mask, out=y)
        return y, mask

    return _on_device(run)


KERNEL_BUILDERS: dict[str, Callable[[KernelContext], Any]] = {DROPOUT.name: dropout_kernel}
"""The gpu backend's random kernels, keyed by the op records' names: registered on CuPy and on the emulated CuPy
alike (they are array code, no CUDA source)."""
