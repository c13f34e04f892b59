"""A planned node set run at actual shapes smaller than traced: views of the max-sized arena slots,
reshape targets realigned to the actual input. Shared by smaller mirrored feeds
(:mod:`flowjob_core.plan.dynamic`) and data-dependent extents (:mod:`flowjob_core.plan.extent`).
"""
from __future__ import annotations

from typing import Any

from flowjob_core.errors import FlowjobError
from flowjob_core.ir.job import BlobSpec

MAX_SPECIALISED = 64  # actual-shape keys kept per job (oldest dropped first)


class DynamicShapeError(FlowjobError, ValueError):
    """An op cannot run on the actual (smaller) shape a dynamic placeholder was fed."""



def reshaped(declared_in: tuple[int, ...], actual_in: tuple[int, ...], target: tuple[int, ...], where: str
             ) -> tuple[int, ...]:
    """The target shape of a reshape whose input shrank.

    A ``-1`` entry is inferred again from the actual element count (legacy's dynamic_reshape).
    A fully static target (from ``flatten``, ``expand_dims``, ``squeeze``, ``layers.dense``) is
    realigned: input and target dims are grouped where their running products meet; an
    unchanged group keeps its target dims; in a changed one the first target dim other than
    one takes what the group's actual size leaves after the others (the batch leads).
    """
    if -1 in target:
        return target
    size_in = 1
    for d in actual_in:
        size_in *= d
    out: list[int] = []
    i = j = 0
    while i < len(declared_in) or j < len(target):
        gi, gj = [i], [j]
        pi = declared_in[i] if i < len(declared_in) else 1
        pj = target[j] if j < len(target) else 1
        i, j = i + 1, j + 1
        while pi != pj:
            if pi < pj:
                pi *= declared_in[i]
                gi.append(i)
                i += 1
            else:
                pj *= target[j]
                gj.append(j)
                j += 1
        while j < len(target) and target[j] == 1 and (i >= len(declared_in) or declared_in[i] != 1):
            gj.append(j)  # ones the reshape inserts join the group before them
            j += 1
        gj = [k for k in gj if k < len(target)]
        gi = [k for k in gi if k < len(declared_in)]
        group = 1
        for k in gi:
            group *= actual_in[k]
        if all(actual_in[k] == declared_in[k] for k in gi):
            out.extend(target[k] for k in gj)
            continue
        free = [k for k in gj if target[k] != 1]
        rest = 1
        for k in free[1:]:
            rest *= target[k]
        if not free or group % rest:
            raise DynamicShapeError(f"{where}: reshape to the static shape {target} does not follow the dynamic "
                                    f"input; write the shape with -1 where the dynamic size goes")
        out.extend(group // rest if k == free[0] else target[k] for k in gj)
    result = tuple(out)
    count = 1
    for d in result:
        count *= d
    if count != size_in:
        raise DynamicShapeError(f"{where}: cannot reshape {actual_in} to follow {target}")
    return result


class SpecialisedArena:
    """The plan's arena seen with actual shapes: views of the same slots; a value that outgrows its
    slot (legacy checks a feed's element count, not each dim) gets memory of its own."""

    def __init__(self, base: Any) -> None:
        self.base = base
        self.buffers = base.buffers
        self.xp = base.xp
        self._own: dict[str, Any] = {}

    def view(self, lbn: str, spec: BlobSpec) -> Any:
        if spec.nbytes <= self.buffers.slot_nbytes[self.buffers.slot_of[lbn]]:
            return self.base.view(lbn, spec)
        own = self._own.get(lbn)
        if own is None or own.shape != spec.shape:
            own = self._own[lbn] = self.xp.empty(spec.shape, dtype=spec.dtype)
        return own

    @property
    def allocated_bytes(self) -> int:
        return int(self.base.allocated_bytes) + sum(int(a.nbytes) for a in self._own.values())

