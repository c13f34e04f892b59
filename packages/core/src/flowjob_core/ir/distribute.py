"""How a logical blob lies over the devices of its placement: split along an axis, broadcast, or auto.

Legacy's ``flow.distribute.split(axis)`` / ``broadcast()`` / ``auto()`` (v0.3's ``oneflow_api.distribute``): an
annotation on a variable (``get_variable(distribute=)``) or a blob (``Blob.with_distribute``). It chooses a
physical layout only: the logical value a job computes with is the same under every distribution.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Distribute:
    """A distribution: ``kind`` is ``"split"`` (with ``axis``), ``"broadcast"`` or ``"auto"``."""

    kind: str
    axis: int | None = None

    def __repr__(self) -> str:
        return f"split({self.axis})" if self.kind == "split" else f"{self.kind}()"


class SplitDistribute(Distribute):
    """Each device holds a balanced slice of the blob along ``axis``."""

    def __init__(self, axis: int) -> None:
        super().__init__("split", axis)


class BroadcastDistribute(Distribute):
    """Each device holds the whole blob."""

    def __init__(self) -> None:
        super().__init__("broadcast")


class AutoDistribute(Distribute):
    """The system chooses (legacy's default for every blob)."""

    def __init__(self) -> None:
        super().__init__("auto")


def split(axis: int) -> SplitDistribute:
    """``flow.distribute.split(axis)``: legacy asserted ``type(axis) is int``."""
    if type(axis) is not int:
        raise TypeError(f"flow.distribute.split: axis must be an int, got {axis!r}")
    return SplitDistribute(axis)


def broadcast() -> BroadcastDistribute:
    return BroadcastDistribute()


def auto() -> AutoDistribute:
    return AutoDistribute()


AUTO = AutoDistribute()


def assert_is_valid_distribute(distribute: Any) -> None:
    """``flow.distribute.assert_is_valid_distribute``: an ``AssertionError`` for anything but a distribution."""
    if not isinstance(distribute, Distribute):
        raise AssertionError(f"not a valid distribute policy: {distribute!r}; expected flow.distribute.split(axis), "
                             f"flow.distribute.broadcast() or flow.distribute.auto()")


def checked_for(distribute: Any, shape: tuple[int, ...], what: str) -> Distribute:
    """``distribute`` checked for a blob of ``shape`` (a split axis counted from the end made positive)."""
    if not isinstance(distribute, Distribute):
        raise TypeError(f"{what}: expected flow.distribute.split(axis), broadcast() or auto(), got {distribute!r}")
    if distribute.kind != "split":
        return distribute
    axis = distribute.axis if distribute.axis is not None else 0
    if not -len(shape) <= axis < len(shape):
        raise ValueError(f"{what}: split axis {axis} is out of range for a blob of shape {shape}")
    return SplitDistribute(axis % len(shape))


def split_axis_of(distribute: Distribute, batch_axis: int | None) -> int | None:
    """Legacy's ``Blob.split_axis``: the axis the blob lies split along over its devices, None where each
    device holds it whole (broadcast). An annotation (``with_distribute``, ``get_variable(distribute=)``)
    decides; an ``auto`` blob is laid out as legacy's data parallelism did: split along its batch axis,
    whole where it has none (variables, the values computed from them alone).

    The one place a blob's layout is read from what it carries: real layouts over ranks wire in here.
    """
    if distribute.kind == "split":
        return distribute.axis
    if distribute.kind == "broadcast":
        return None
    return batch_axis
