"""Op cases of the matmul records beyond op_cases.py's table: the fused self-attention projection
(``fused_self_attention_query_mul_key_and_value``) and its gradient op; the reference slices the heads
explicitly. op_cases.py appends ``CASES``."""
from __future__ import annotations

from typing import Any

import numpy as np
from hypothesis import strategies as st

from flowjob_core.testing import OpCase
from flowjob_core.testing.modules import sibling

base = sibling(__file__, "op_cases")
Draw = Any
Case = tuple[list[np.ndarray], dict]


def attention_case(draw: Draw) -> Case:
    seq, batch, heads, size = (draw(st.integers(1, 3)) for _ in range(4))
    attrs = {"head_size": size, "alpha": draw(st.sampled_from([1.0, 0.5]))}
    return [base._array(draw, (seq, batch, heads * 3 * size))], attrs


def _qkv(hidden: np.ndarray, head_size: int) -> list[np.ndarray]:
    seq, batch, width = hidden.shape
    heads = width // (3 * head_size)
    out = []
    for part in range(3):
        t = np.empty((batch, heads, seq, head_size), dtype=hidden.dtype)
        for h in range(heads):
            start = h * 3 * head_size + part * head_size
            t[:, h] = hidden[:, :, start:start + head_size].transpose(1, 0, 2)
        out.append(t)
    return out


def attention_ref(hidden: np.ndarray, head_size: int, alpha: float) -> tuple[np.ndarray, np.ndarray]:
    q, k, v = _qkv(hidden, head_size)
    return alpha * np.einsum("bhid,bhjd->bhij", q, k), v


def attention_grad_case(draw: Draw) -> Case:
    (hidden,), attrs = attention_case(draw)
    qmk, v = attention_ref(hidden, **attrs)
    return [hidden, base._array(draw, qmk.shape), base._array(draw, v.shape)], attrs


def attention_grad_ref(hidden: np.ndarray, dqmk: np.ndarray, dv: np.ndarray, head_size: int,
                       alpha: float) -> np.ndarray:
    q, k, _ = _qkv(hidden, head_size)
    grads = [alpha * np.einsum("bhij,bhjd->bhid", dqmk, k), alpha * np.einsum("bhij,bhid->bhjd", dqmk, q), dv]
    out = np.empty_like(hidden)
    heads = hidden.shape[2] // (3 * head_size)
    for part, g in enumerate(grads):
        for h in range(heads):
            start = h * 3 * head_size + part * head_size
            out[:, :, start:start + head_size] = g[:, h].transpose(1, 0, 2)
    return out


CASES = [
    OpCase("fused_self_attention_query_mul_key_and_value", attention_case, reference=attention_ref),
    OpCase("fused_self_attention_query_mul_key_and_value_grad", attention_grad_case, reference=attention_grad_ref,
           wrt=()),
]
