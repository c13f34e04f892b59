"""``flow.advanced.distribute_*``: a blob cut into (or joined from) one piece per device of the placement.

Legacy v0.4 (``oneflow/python/advanced/distribute_ops.py``): the number of pieces is the device count
of the current placement (``flow.current_scope().device_parallel_desc_symbol.parallel_num``), so on one
device ``distribute_split(x)`` is ``(x,)`` and ``distribute_concat([x])`` is ``x``. Pieces of a split are
balanced: the first ``size % n`` pieces take one more row, as legacy's splitter.
"""
from __future__ import annotations

from typing import Any, Callable, Sequence

from flowjob_core import Blob, apply
from flowjob_core.api.current_scope import parallel_desc
from flowjob_core.api.placement import placement

from flowjob_ops.api._common import build_error, job_blob, op_name

__all__ = ["distribute_add", "distribute_clone", "distribute_concat", "distribute_map", "distribute_split"]


def distribute_split(x: Blob, axis: int = 0, name: str | None = None) -> tuple[Blob, ...]:
    """``x`` cut along ``axis`` into one balanced piece per device of the current placement.

    Args:
        x: a blob.
        axis: the axis to cut.
        name: the op name; default ``DistributeSplit_<n>``.

    Returns:
        A tuple of ``parallel_num`` blobs.
    """
    what = "flow.advanced.distribute_split"
    job_blob(what, "x", x)
    count = parallel_desc().parallel_num
    rank = len(x.shape)
    if not isinstance(axis, int) or not -rank <= axis < rank:
        raise build_error(what, f"axis must be an int in [{-rank}, {rank}) for a blob of shape {x.shape}, got {axis!r}")
    axis %= rank
    size = x.shape[axis]
    if size < count:
        raise build_error(what, f"axis {axis} of {x.shape} has {size} rows, fewer than the {count} devices")
    sizes = tuple(size // count + (1 if i < size % count else 0) for i in range(count))
    name = op_name(name, "DistributeSplit")
    if count == 1:
        return (apply("identity", [x], name=name),)
    return tuple(apply("split", [x], {"axis": axis, "sizes": sizes}, name=name))


def distribute_clone(x: Blob, name: str | None = None) -> tuple[Blob, ...]:
    """``x`` once per device of the current placement (each device's copy of a broadcast blob).

    Args:
        x: a blob.
        name: the op name; default ``DistributeClone_<n>``.

    Returns:
        A tuple of ``parallel_num`` blobs equal to ``x``.
    """
    job_blob("flow.advanced.distribute_clone", "x", x)
    count = parallel_desc().parallel_num
    outs = apply("tuple_identity", [x] * count, name=op_name(name, "DistributeClone"))
    return outs if isinstance(outs, tuple) else (outs,)


def _pieces(xs: Any, what: str) -> list[Blob]:
    if not isinstance(xs, (list, tuple)) or not xs:
        raise build_error(what, f"xs must be a non-empty list of blobs, got {xs!r}")
    for i, x in enumerate(xs):
        job_blob(what, f"xs[{i}]", x)
    count = parallel_desc().parallel_num
    if len(xs) != count:
        raise build_error(what, f"needs one blob per device of the placement ({count}), got {len(xs)}")
    return list(xs)


def distribute_add(xs: Sequence[Blob], name: str | None = None) -> Blob:
    """The sum of one blob per device of the current placement (partial sums made whole).

    Args:
        xs: ``parallel_num`` blobs of one shape and dtype.
        name: the op name; default ``DistributeAdd_<n>``.

    Returns:
        Their elementwise sum.
    """
    pieces = _pieces(xs, "flow.advanced.distribute_add")
    name = op_name(name, "DistributeAdd")
    return apply("identity", pieces, name=name) if len(pieces) == 1 else apply("add_n", pieces, name=name)


def distribute_concat(xs: Sequence[Blob], axis: int = 0, name: str | None = None) -> Blob:
    """One blob per device of the current placement joined along ``axis`` (a split blob made whole).

    Args:
        xs: ``parallel_num`` blobs agreeing off ``axis``.
        axis: the axis to join along.
        name: the op name; default ``DistributeConcat_<n>``.

    Returns:
        The joined blob.
    """
    pieces = _pieces(xs, "flow.advanced.distribute_concat")
    name = op_name(name, "DistributeConcat")
    if len(pieces) == 1:
        return apply("identity", pieces, name=name)
    return apply("concat", pieces, {"axis": axis}, name=name)


def distribute_map(xs: Blob | Sequence[Blob], f: Callable[..., Any], axis: int = 0) -> Any:
    """``f`` run on each device's piece of ``xs`` (each split along ``axis``), its results joined along ``axis``.

    Args:
        xs: a blob or a non-empty list of blobs.
        f: called once per device with that device's piece of each blob, under a placement of that one
            device; returns a blob or a tuple of blobs.
        axis: the axis the inputs are cut and the results joined along.

    Returns:
        A blob when ``f`` returns one, else a tuple of blobs.
    """
    what = "flow.advanced.distribute_map"
    blobs = list(xs) if isinstance(xs, (list, tuple)) else [xs]
    if not blobs:
        raise build_error(what, "xs must be a blob or a non-empty list of blobs")
    desc = parallel_desc()
    devices = [(m, d) for m, ids in desc.machine_id2device_id_list.items() for d in ids]
    split = [distribute_split(b, axis=axis) for b in blobs]
    results = []
    for (machine, device), pieces in zip(devices, zip(*split)):
        with placement(desc.device_tag, f"{machine}:{device}"):
            results.append(f(*pieces))
    single = all(isinstance(r, Blob) for r in results)
    as_tuples = [(r,) if isinstance(r, Blob) else tuple(r) for r in results]
    for r in as_tuples:
        if not r or not all(isinstance(b, Blob) for b in r):
            raise build_error(what, f"f must return a blob or a tuple of blobs, got {r!r}")
    joined = tuple(distribute_concat(list(parts), axis=axis) for parts in zip(*as_tuples))
    return joined[0] if single else joined
