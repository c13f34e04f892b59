"""How a blob of a job on several ranks lies over them (legacy's SBP), and the signatures an op can run under.

A layout is data: ``split(axis)`` (each rank holds an even slice along ``axis``), ``BROADCAST`` (each rank holds
the whole value, the same everywhere) or ``PARTIAL_SUM`` (each rank holds a whole-shaped value; the logical value
is their sum). Printed ``S(0)``, ``B``, ``P`` as legacy wrote them.

An op record declares the signatures it can run under (``OpDef.compute.layouts``): a function of the input specs and the
attributes that returns candidate :class:`Signature` values, best first. A record that declares none runs whole:
every input broadcast, every output broadcast (``run_whole``), which is right for any op; an op with an
``Elementwise`` descriptor gets the same split on every operand (``elementwise_signatures``). A signature computed
on the pieces by another record (a gather from a row-split table must shift and mask its indices) names it in
``local_op``; the boxing pass then gives that record the attribute ``shard_start``: where this rank's piece of
the first split input starts along its split axis.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Sequence

from flowjob_core.ir.job import BlobSpec


@dataclass(frozen=True)
class Layout:
    """``kind`` is ``"split"`` (with ``axis``), ``"broadcast"`` or ``"partial_sum"``."""

    kind: str
    axis: int | None = None

    def __post_init__(self) -> None:
        if self.kind not in ("split", "broadcast", "partial_sum"):
            raise ValueError(f"a layout is split, broadcast or partial_sum, got {self.kind!r}")
        if (self.kind == "split") != isinstance(self.axis, int) or isinstance(self.axis, bool):
            raise ValueError(f"layout {self.kind!r}: a split takes an int axis, the others none; got {self.axis!r}")

    @property
    def is_split(self) -> bool:
        return self.kind == "split"

    def __str__(self) -> str:
        return f"S({self.axis})" if self.kind == "split" else ("B" if self.kind == "broadcast" else "P")

    __repr__ = __str__


def split(axis: int) -> Layout:
    return Layout("split", axis)


BROADCAST = Layout("broadcast")
PARTIAL_SUM = Layout("partial_sum")


def from_distribute(distribute: Any) -> Layout | None:
    """A legacy annotation (``flow.distribute.split(axis)`` / ``broadcast()`` / ``auto()``) as a layout;
    None for ``auto()`` (the boxing pass chooses)."""
    kind = getattr(distribute, "kind", None)
    if kind == "split":
        return split(int(distribute.axis))
    if kind == "broadcast":
        return BROADCAST
    return None


def check(layout: Any, spec: BlobSpec, where: str) -> None:
    """A ``ValueError`` naming ``where`` unless ``layout`` is a layout a blob of ``spec`` can have."""
    if not isinstance(layout, Layout):
        raise ValueError(f"{where}: {layout!r} is not a layout (split(axis), BROADCAST or PARTIAL_SUM)")
    if layout.is_split and not 0 <= int(layout.axis or 0) < len(spec.shape):
        raise ValueError(f"{where}: split axis {layout.axis} is out of range for a blob of shape {spec.shape}")


@dataclass(frozen=True)
class Shard:
    """This rank's piece of a split value: rows ``[start, stop)`` of axis ``axis`` of the logical value."""

    axis: int
    start: int
    stop: int

    def local_shape(self, shape: Sequence[int]) -> tuple[int, ...]:
        return tuple(self.stop - self.start if k == self.axis else int(d) for k, d in enumerate(shape))

    def index(self) -> tuple[slice, ...]:
        """The numpy index of this piece in the logical value."""
        return (slice(None),) * self.axis + (slice(self.start, self.stop),)


def shard_of(layout: Layout, spec: BlobSpec, rank: int, ranks: int, where: str) -> Shard | None:
    """This rank's piece of a value of ``layout``; None when it holds the whole (broadcast, partial sums).

    A split must divide evenly (each rank's piece has one shape, as legacy's split variables had)."""
    if not layout.is_split:
        return None
    axis = int(layout.axis or 0)
    size = spec.shape[axis]
    if size % ranks:
        raise ValueError(f"{where}: axis {axis} of shape {spec.shape} ({size}) does not split evenly over {ranks} "
                         f"ranks")
    piece = size // ranks
    return Shard(axis, rank * piece, (rank + 1) * piece)


@dataclass(frozen=True)
class Signature:
    """One way an op runs over the ranks: the layout each input must have and each output then has.

    ``local_op``: the op record that computes the pieces under this signature, when it is not the op itself
    (it takes the op's inputs and attributes plus ``shard_start``). ``shape_attrs``: ``(attribute, output)`` pairs
    naming attributes that hold the shape of an output (a convolution's gradient holds ``x_shape``): the pass sets
    each to the shape of this rank's piece of that output."""

    inputs: tuple[Layout, ...]
    outputs: tuple[Layout, ...]
    local_op: str | None = None
    shape_attrs: tuple[tuple[str, int], ...] = ()

    def __str__(self) -> str:
        text = f"({', '.join(map(str, self.inputs))}) -> ({', '.join(map(str, self.outputs))})"
        return text + (f" via {self.local_op}" if self.local_op else "")


LayoutRule = Callable[[Sequence[BlobSpec], dict], Sequence[Signature]]
"""``rule(input_specs, attrs) -> signatures`` (logical specs), best first; ``run_whole`` is always allowed."""


def run_whole(inputs: Sequence[BlobSpec], outputs: int) -> Signature:
    """The default of every op: each input gathered whole, the op run whole on every rank."""
    return Signature((BROADCAST,) * len(inputs), (BROADCAST,) * outputs)


def elementwise_signatures(inputs: Sequence[BlobSpec], out: BlobSpec) -> list[Signature]:
    """An elementwise op split along any axis of its output: each operand split on its own matching axis
    (numpy's broadcasting aligns trailing axes), or broadcast where it has that axis of size 1 or lacks it."""
    found = []
    for axis, size in enumerate(out.shape):
        if size == 1:
            continue
        layouts = []
        for x in inputs:
            mine = axis - (len(out.shape) - len(x.shape))
            layouts.append(split(mine) if mine >= 0 and x.shape[mine] == size else BROADCAST)
        found.append(Signature(tuple(layouts), (split(axis),)))
    return found


def signatures_of(opdef: Any, inputs: Sequence[BlobSpec], outputs: Sequence[BlobSpec], attrs: dict) -> list[Signature]:
    """Every signature the op record allows for these (logical) specs, its own first, ``run_whole`` last."""
    declared: list[Signature] = []
    if opdef.compute.layouts is not None:
        declared = list(opdef.compute.layouts(inputs, attrs))
    elif opdef.elementwise is not None and len(outputs) == 1:
        declared = elementwise_signatures(inputs, outputs[0])
    whole = run_whole(inputs, len(outputs))
    for sig in declared:
        if len(sig.inputs) != len(inputs) or len(sig.outputs) != len(outputs):
            raise ValueError(f"op {opdef.name!r}: its layout rule gave {sig} for {len(inputs)} inputs and "
                             f"{len(outputs)} outputs")
    return [sig for sig in declared if sig != whole] + [whole]


def boxing_bytes(have: Layout, want: Layout, spec: BlobSpec, ranks: int) -> float:
    """About how many bytes one rank sends to turn a value of layout ``have`` into ``want`` (ring collectives);
    ``inf`` where no boxing does it (a partial sum cannot be made from a split or broadcast value here)."""
    if have == want:
        return 0.0
    share = spec.nbytes * (ranks - 1) / ranks
    if want == PARTIAL_SUM:
        return float("inf")
    if have == BROADCAST:
        return 0.0  # a slice of what the rank holds
    if have == PARTIAL_SUM:
        return 2 * share if want == BROADCAST else share  # all-reduce; reduce-scatter
    if want.is_split:
        return share / ranks  # all-to-all: each rank keeps 1/R of what an all-gather would bring it
    return share  # all-gather


def choose(candidates: Sequence[Signature], have: Sequence[Layout], specs: Sequence[BlobSpec],
           ranks: int) -> Signature:
    """The candidate that moves the fewest bytes to get its inputs; the first of equals (declared order)."""
    best, best_cost = None, float("inf")
    for sig in candidates:
        cost = sum(boxing_bytes(h, w, s, ranks) for h, w, s in zip(have, sig.inputs, specs))
        if cost < best_cost:
            best, best_cost = sig, cost
    if best is None:
        raise ValueError(f"no signature of {[str(s) for s in candidates]} can take inputs laid out as "
                         f"{[str(h) for h in have]}")
    return best
