"""Dropout keep masks drawn as legacy's CPU kernels drew them.

Legacy's ``random_mask_like`` (which ``flow.nn.dropout`` and the fused dropouts used) kept an element when
its draw of legacy's CPU uniform stream (``mt19937_uniform``) was more than ``rate``, so with a seed the masks
are legacy's CPU masks bit for bit, step after step, and every op given one seed draws one sequence.
"""
from __future__ import annotations

from typing import Any, Callable

import numpy as np

from flowjob_ops.kernels.mt19937_uniform import canonical_source


def keep_mask_source(ctx: Any, shape: tuple[int, ...]) -> Callable[[float], Any]:
    """``draw(rate)``: a host bool array of ``shape``, True where the element is kept (uniform > rate)."""
    uniform = canonical_source(ctx.attrs.get("seed"), int(np.prod(shape, dtype=np.int64)))

    def draw(rate: float) -> Any:
        return (uniform() > np.float32(rate)).reshape(shape)

    return draw
