"""Gradient clipping: ``flow.optimizer.grad_clipping.by_global_norm(clip_norm)``.

With ``g`` the 1/N-scaled gradients of every updated variable of the job,
``global_norm = sqrt(sum(||g_i||^2))`` and each ``g_i`` is used as
``g_i * clip_norm / max(global_norm, clip_norm)`` by its update (no extra copy of the
gradients: the factor is one scalar node read by every fused update op).
"""
from __future__ import annotations


class ClipGradient:
    """Base of the clipping strategies an optimizer accepts as ``grad_clipping``."""


class by_global_norm(ClipGradient):  # noqa: N801 - the legacy name
    """Scale all gradients together so that their global L2 norm is at most ``clip_norm``."""

    def __init__(self, clip_norm: float) -> None:
        clip_norm = float(clip_norm)
        if not clip_norm > 0:
            raise ValueError(f"by_global_norm: clip_norm must be positive, got {clip_norm!r}")
        self.clip_norm = clip_norm

    def __repr__(self) -> str:
        return f"by_global_norm({self.clip_norm})"


class _GradClippingNamespace:
    """``flow.optimizer.grad_clipping``."""

    by_global_norm = by_global_norm


grad_clipping = _GradClippingNamespace()

__all__ = ["ClipGradient", "by_global_norm", "grad_clipping"]
