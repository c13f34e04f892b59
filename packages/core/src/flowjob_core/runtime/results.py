"""The contracts between core and result-kind plugins (the typing package implements them)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, Sequence

import numpy as np

if TYPE_CHECKING:
    from flowjob_core.trace.blob import Blob
    from flowjob_core.runtime.executor import PendingCall


@dataclass(frozen=True)
class InputSpec:
    """One placeholder a parameter needs: static shape, dtype, batch axis and optional legacy name."""

    shape: tuple[int, ...]
    dtype: np.dtype
    batch_axis: int | None = 0
    name: str | None = None


class ParamKind(Protocol):
    """How one parameter of a global function is declared, traced and fed.

    An optional class attribute ``dynamic = True`` marks a parameter whose declared shapes are maxima
    (legacy's mirrored placeholders): its blobs, and what is computed from them, say ``is_dynamic``.
    An optional ``tensor_list = True`` marks a parameter fed lists of arrays per device (legacy's tensor
    lists): its placeholder blobs say ``is_tensor_list``.
    """

    def input_specs(self) -> Sequence[InputSpec]:
        """The placeholders this parameter needs, in feed order."""

    def build(self, blobs: Sequence["Blob"]) -> Any:
        """What the body receives for this parameter, made from its placeholder blobs."""

    def feed(self, value: Any, where: str) -> list[np.ndarray]:
        """Check a call's argument and return copies of its arrays, one per placeholder.

        ``where`` names the job and parameter for error messages (raise JobArgumentError).
        """


class ReturnKind(Protocol):
    """How a global function's results reach the caller."""

    waits: bool
    """True when the call blocks until the step is done (a synchronous result)."""

    def flatten(self, value: Any, where: str) -> list["Blob"]:
        """Check the body's return value against the annotation at trace time; the blobs to fetch."""

    def launch(self, pending: "PendingCall", where: str) -> Any:
        """What the call returns, given the pending step whose values are the fetched host arrays."""
