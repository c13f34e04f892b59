"""``flow.nn.fused_self_attention_query_mul_key_and_value`` (legacy v0.4, BERT): per-head q, k, v and their
scaled query-key products in one op."""
from __future__ import annotations

from flowjob_core import Blob, apply


__all__ = ["fused_self_attention_query_mul_key_and_value"]


def fused_self_attention_query_mul_key_and_value(x: Blob, head_size: int, alpha: float = 1.0,
                                                 name: str | None = None) -> tuple[Blob, Blob]:
    """Split (seq_len, batch, heads * 3 * head_size) hidden states into per-head q, k, v and give
    (alpha * q @ k^T, v), shaped (batch, heads, seq_len, seq_len) and (batch, heads, seq_len, head_size).

    Each head's 3 * head_size slice holds its query, key and value in that order (legacy's layout).

    Args:
        x: the floating hidden states.
        head_size: each head's width.
        alpha: scales the query-key products.
        name: the op name; default ``FusedSelfAttentionQueryMulKeyAndValue_<n>``.
    """
    qmk, v = apply("fused_self_attention_query_mul_key_and_value", [x], {"head_size": head_size, "alpha": alpha},
                   name=name)
    return qmk, v
