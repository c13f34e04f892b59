"""Legacy v0.4's ``flow.nn.Embedding``: an eager module looking rows of a weight up by index."""
from __future__ import annotations

from typing import Any

from flowjob_core.imperative.module import Module
from flowjob_core.imperative.parameter import Parameter
from flowjob_core.imperative.tensor import Tensor, run_on_blobs
from flowjob_core.trace.builder import apply


class Embedding(Module):
    """``weight`` (``num_embeddings`` x ``embedding_dim``, standard normal; the row ``padding_idx`` zeros)
    gathered along axis 0 by an integer index tensor. ``max_norm``, ``norm_type``, ``scale_grad_by_freq`` and
    ``sparse`` were unsupported in legacy too and are refused."""

    def __init__(self, num_embeddings: int, embedding_dim: int, padding_idx: int | None = None,
                 max_norm: float | None = None, norm_type: float | None = None, scale_grad_by_freq: bool = False,
                 sparse: bool = False, _weight: Tensor | None = None) -> None:
        super().__init__()
        unsupported = {"max_norm": max_norm, "norm_type": norm_type, "scale_grad_by_freq": scale_grad_by_freq or None,
                       "sparse": sparse or None}
        refused = [name for name, value in unsupported.items() if value is not None]
        if refused:
            raise NotImplementedError(f"flow.nn.Embedding: {', '.join(refused)} are not supported (nor were they "
                                      f"in legacy OneFlow)")
        if padding_idx is not None:
            if not -num_embeddings <= padding_idx < num_embeddings:
                raise ValueError(f"flow.nn.Embedding: padding_idx {padding_idx} is outside [-{num_embeddings}, "
                                 f"{num_embeddings})")
            padding_idx %= num_embeddings
        self.num_embeddings = num_embeddings
        self.embedding_dim = embedding_dim
        self.padding_idx = padding_idx
        self.sparse = sparse
        if _weight is None:
            self.weight = Parameter(Tensor(num_embeddings, embedding_dim))
            self.reset_parameters()
        else:
            if tuple(_weight.shape) != (num_embeddings, embedding_dim):
                raise ValueError(f"flow.nn.Embedding: _weight has shape {tuple(_weight.shape)}, expected "
                                 f"{(num_embeddings, embedding_dim)}")
            self.weight = Parameter(_weight)

    def reset_parameters(self) -> None:
        self.weight.normal_()
        if self.padding_idx is not None:  # the padding row starts at zero (a new array: see Tensor)
            rows = self.weight.numpy()
            rows[self.padding_idx] = 0
            self.weight.copy_(rows)

    def forward(self, indices: Tensor) -> Any:
        if not isinstance(indices, Tensor) or indices.dtype.kind not in "iu":
            raise TypeError(f"flow.nn.Embedding: indices must be an integer flow.Tensor, got {indices!r}")
        return run_on_blobs("embedding", lambda w, i: apply("gather", [w, i], {"axis": 0}), self.weight, indices)

    def extra_repr(self) -> str:
        padding = "" if self.padding_idx is None else f", padding_idx={self.padding_idx}"
        return f"{self.num_embeddings}, {self.embedding_dim}{padding}"


__all__ = ["Embedding"]
