"""The gpu backend's dropout masks, drawn on the device by a counter-based generator (``philox``), so a step
recorded as CUDA graphs draws fresh masks at every replay with no live piece and no host copy.

Each node has its own stream: the Philox key is the op's ``seed`` (fresh host entropy when it has none, taken
once when the kernel is built) and its counter is ``(block, draw, 0)``, ``draw`` a 64-bit count of the node's
calls held in device memory, which the node's own kernels read and then advance, inside the graph. Element
``i`` of a mask takes word ``i % 4`` of block ``i // 4``; it is kept when its top 24 bits ``k`` (a uniform
``k / 2**24`` in [0, 1)) exceed ``rate`` (``k > floor(rate * 2**24)``), as legacy kept an element whose uniform
draw exceeded the rate. A seed gives the same masks on every CUDA device, on the emulated CuPy and across
recorded and unrecorded runs (the counter advances once a call either way); they are not the CPU backend's
masks, which follow legacy's CPU generator (``flowjob_ops.kernels.keep_mask``).

Only the state moves to the device: a record's ``host_state`` mark is overridden by the kernel function's own
``host_state = False`` (``flowjob_core.OpDef``), which the planner reads.
"""
from __future__ import annotations

from typing import Any, Callable

import numpy as np

from flowjob_core import KernelContext

from flowjob_gpu.philox import MASK, philox4x32_10, seed_key

UNIFORM_BITS = 24  # the top bits of a word that make its uniform draw


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

    def words(self) -> Any:
        xp, draws = self.xp, self.draws
        words = philox4x32_10((self.blocks, draws & MASK, draws >> 32, 0), self.key)
        xp.add(draws, self.one, out=draws)
        return xp.stack(words, axis=1).reshape(-1)[:self.size]

    def keep(self, rate: float) -> Any:
        """A bool array of ``size``: True where the element is kept (probability about ``1 - rate``)."""
        return (self.words() >> (32 - UNIFORM_BITS)) > keep_threshold(rate)


def _on_device(fn: Callable[..., Any]) -> Callable[..., Any]:
    fn.host_state = False  # type: ignore[attr-defined]  # its stream's state lives on the device
    return fn


def dropout_kernel(ctx: KernelContext) -> Any:
    """Inputs (x,); outputs (y, mask): the record's semantics with the mask drawn on the device."""
    rate = float(ctx.attrs["rate"])
    if not ctx.training or rate == 0.0:
        return _on_device(ctx.ops[ctx.op].kernel(ctx))  # the record's identity: no draw at all
    xp, y, mask = ctx.xp, ctx.out(0), ctx.out(1)
    spec = ctx.outputs[1]
    stream = DeviceStream(ctx, int(np.prod(spec.shape, dtype=np.int64)), ctx.attrs.get("seed"))
    scale = spec.dtype.type(1.0 / (1.0 - rate))

    def run(x: Any) -> tuple[Any, Any]:
        xp.multiply(stream.keep(rate).reshape(spec.shape), scale, out=mask)
        xp.multiply(x, mask, out=y)
        return y, mask

    return _on_device(run)


def random_mask_like_kernel(ctx: KernelContext) -> Any:
    """Input (like,); output the int8 keep mask, drawn on the device."""
    xp, out = ctx.xp, ctx.out(0)
    rate = float(ctx.attrs["rate"])
    shape = ctx.outputs[0].shape
    stream = DeviceStream(ctx, int(np.prod(shape, dtype=np.int64)), ctx.attrs.get("seed"))

    def run(like: Any) -> Any:
        xp.copyto(out, stream.keep(rate).reshape(shape), casting="unsafe")
        return out

    return _on_device(run)


KERNEL_BUILDERS: dict[str, Callable[[KernelContext], Any]] = {
    "dropout": dropout_kernel, "random_mask_like": random_mask_like_kernel}
"""The gpu backend's random kernels, keyed by the op records' names: registered on CuPy and on the emulated CuPy
alike (they are array code, no CUDA source)."""
