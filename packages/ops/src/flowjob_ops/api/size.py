"""``flow.Size``: legacy v0.4's shape value (its C++ ``Shape`` exported to Python).

A tuple of ints, so it goes anywhere a shape does in a lazy program (``flow.reshape(x, flow.Size(...))``,
placeholders, ``get_variable``); a blob's ``shape`` stays a plain tuple, as in legacy's lazy mode.
Legacy facts kept: it is made from a tuple, a list or another Size (anything else is a TypeError);
it equals a tuple or Size of the same dims but never a list; slicing gives a Size; ``index`` takes
``start``/``end`` by keyword; ``numel()`` is the element count; it prints as ``flow.Size([2, 3])``.
"""
from __future__ import annotations

import operator
from typing import Any, SupportsIndex, overload

__all__ = ["Size"]


class Size(tuple):
    """The dims of a shape: ``flow.Size((4, 3))`` or ``flow.Size([4, 3])``."""

    def __new__(cls, dims: tuple | list | "Size" = ()) -> "Size":
        if not isinstance(dims, (tuple, list)):
            raise TypeError(f"flow.Size needs a tuple, a list or a flow.Size, got {type(dims).__name__}")
        try:
            values = tuple(operator.index(d) for d in dims)
        except TypeError:
            raise TypeError(f"flow.Size needs integer dims, got {dims!r}") from None
        return super().__new__(cls, values)

    @overload
    def __getitem__(self, key: SupportsIndex) -> int: ...

    @overload
    def __getitem__(self, key: slice) -> "Size": ...

    def __getitem__(self, key: Any) -> Any:
        if isinstance(key, slice):
            return Size(tuple.__getitem__(self, key))
        try:
            return tuple.__getitem__(self, key)
        except IndexError:
            raise IndexError(f"flow.Size index {key!r} out of range for {self!r}") from None

    def __eq__(self, other: object) -> bool:
        # a list is never equal, as in legacy (and as for tuples)
        return isinstance(other, tuple) and tuple.__eq__(self, other) is True

    def __ne__(self, other: object) -> bool:
        return not self == other

    __hash__ = tuple.__hash__

    def __repr__(self) -> str:
        return f"flow.Size([{', '.join(str(d) for d in self)}])"

    __str__ = __repr__

    def numel(self) -> int:
        """The number of elements of a blob of this shape (1 for no dims)."""
        count = 1
        for d in self:
            count *= d
        return count

    def index(self, value: Any, start: SupportsIndex = 0, end: SupportsIndex | None = None) -> int:  # type: ignore[override]
        """The first position of ``value`` among dims ``start``..``end``; ValueError when absent."""
        stop = len(self) if end is None else min(operator.index(end), len(self))
        return tuple.index(self, value, operator.index(start), stop)
