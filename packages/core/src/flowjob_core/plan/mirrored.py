"""Several devices (the mirrored view) on one machine: a step run once per device slice.

A step whose feeds hold a ``PerDevice`` value runs once per device slice (``run_per_device``);
each result then comes back as a ``PerDevice``. A device's slice of a tensor-list argument
(``tp.ListListNumpy`` fed several arrays) is a ``TensorList``; ``flowjob_core.plan.dynamic`` runs the
step once per list element and gathers each result as a ``TensorList`` too.
"""
from __future__ import annotations

from typing import Any, Callable, Sequence

import numpy as np

from flowjob_core.errors import FlowjobError


class TensorList(list):
    """One device's tensor list (legacy ``MirroredTensorListDef``): several arrays of one declared rank.

    As one array (``tp.Numpy`` / ``tp.ListNumpy``) it is legacy's dense body: the elements
    concatenated along axis 0.
    """

    __slots__ = ()
    shape = None  # not an array: a shape test against a declared shape never passes

    def body(self, what: str = "value") -> Any:
        if len(self) == 1:
            return self[0]
        if len({a.shape[1:] for a in self}) > 1:
            raise FlowjobError(f"{what} is a tensor list whose elements differ beyond axis 0 "
                               f"({[a.shape for a in self]}); annotate it tp.ListListNumpy to get each array")
        return np.concatenate(self, axis=0)


def dense(value: Any, what: str = "value") -> Any:
    """A device's value as one array: a tensor list's body, anything else as it is."""
    return value.body(what) if type(value) is TensorList else value


class PerDevice(list):
    """One value per device: a mirrored argument (one array per device) or a result of a step run per device."""

    __slots__ = ()

    def merged(self, batch_axis: int | None, what: str = "value") -> Any:
        """The logical value: pieces concatenated along ``batch_axis``; a value without one must
        agree across devices."""
        if len(self) == 1:
            return dense(self[0], what)
        if any(type(piece) is TensorList for piece in self):
            return PerDevice(dense(piece, what) for piece in self).merged(batch_axis, what)
        first = self[0]
        if batch_axis is not None and getattr(first, "ndim", 0) > 0:
            return np.concatenate(self, axis=batch_axis)
        if all(np.array_equal(first, other) for other in self[1:]):
            return first  # replicated (a variable, a broadcast input): every device holds the same
        raise FlowjobError(f"{what} has no batch axis and differs across the {len(self)} devices; "
                           f"annotate it tp.ListNumpy to get one array per device")


def run_per_device(run: Callable[[list[Any]], tuple[tuple[Any, ...], tuple[Any, ...]]], feeds: Sequence[Any],
                   devices: int, variables: Any = None, names: Sequence[str] = ()) -> tuple[tuple, tuple]:
    """Run one step once per device slice, sequentially, and gather each result as a ``PerDevice``.

    A ``PerDevice`` feed gives device ``d`` its ``d``-th array; other feeds are shared. When
    ``variables`` (the session's store) and ``names`` are given, the step updates those
    variables in place: every slice starts from the same values and the step ends with their
    mean over devices. That is data-parallel averaging: exact for updates linear in the
    gradient (SGD, momentum), an approximation for Adam-like updates.
    """
    start: dict[str, Any] = {}
    total: dict[str, Any] = {}
    if names and variables is None:
        raise ValueError("run_per_device: variable names given without the variable store")
    xp: Any = variables.backend.xp if variables is not None else np
    for name in names:
        start[name] = xp.array(variables.array(name), copy=True)
    results = []
    try:
        for d in range(devices):
            if d:
                for name, value in start.items():
                    xp.copyto(variables.array(name), value)
            results.append(run([f[d] if type(f) is PerDevice else f for f in feeds]))
            for name in names:
                array = variables.array(name)
                if d:
                    xp.add(total[name], array, out=total[name])
                else:
                    total[name] = array.astype(np.float64 if array.dtype.kind == "f" else np.int64, copy=True)
    except BaseException:
        for name, value in start.items():  # a failed step leaves the variables as they were
            xp.copyto(variables.array(name), value)
        raise
    for name in names:
        array = variables.array(name)
        mean = total[name] / devices if array.dtype.kind == "f" else total[name] // devices
        xp.copyto(array, mean.astype(array.dtype, copy=False))
    returns = tuple(PerDevice(r[0][i] for r in results) for i in range(len(results[0][0])))
    sides = tuple(PerDevice(r[1][i] for r in results) for i in range(len(results[0][1])))
    return returns, sides
