"""Legacy v0.3/v0.4 ``flow.repeat``, ``flow.acc``, ``flow.unpack`` and ``flow.pack``: run part of a job
several times within one call (on the same value, or on successive slices of a batch).

Top-level ``flow`` names; the ``repeat-acc`` pass
(``flowjob_ops.passes.repeat_acc``) unrolls the ticks.
"""
from __future__ import annotations

import numbers

from flowjob_core import Blob, apply

from flowjob_ops.api._common import build_error


__all__ = ["acc", "pack", "repeat", "unpack"]


def _check(what: str, blob: object, arg: str, count: object) -> None:
    if not isinstance(blob, Blob):
        raise TypeError(f"{what}: input must be a blob, got {type(blob).__name__}")
    if isinstance(count, bool) or not isinstance(count, numbers.Integral) or count < 1:
        raise build_error(what, f"{arg} must be an int >= 1, got {count!r}")


def repeat(input: Blob, repeat_num: int, name: str | None = None) -> Blob:
    """``input`` once per tick, ``repeat_num`` ticks per tick of ``input``: the ops reading the result run
    ``repeat_num`` times within one call (legacy's time shape gains an axis).

    Every other input of those ops must tick as often (repeat variables too); a result must be
    summed back with :func:`acc` before it is returned or watched. The gradient is ``acc`` of the
    output gradient.

    Args:
        input: any blob.
        repeat_num: ticks per tick of ``input``, an int >= 1.
        name: the op name; default ``Repeat_<n>``.
    """
    _check("flow.repeat", input, "repeat_num", repeat_num)
    return apply("repeat", [input], {"repeat_num": int(repeat_num)}, name=name)


def acc(one: Blob, max_acc_num: int, name: str | None = None) -> Blob:
    """The sum of every ``max_acc_num`` consecutive ticks of ``one``: ``acc(repeat(a, 3), 3)`` is ``a * 3``.

    The ticks of ``one`` per call must be a multiple of ``max_acc_num``. The gradient is ``repeat``
    of the output gradient.

    Args:
        one: a blob computed in a repeated region.
        max_acc_num: ticks summed into one, an int >= 1.
        name: the op name; default ``Acc_<n>``.
    """
    _check("flow.acc", one, "max_acc_num", max_acc_num)
    return apply("acc", [one], {"max_acc_num": int(max_acc_num)}, name=name)


def unpack(input: Blob, unpack_num: int, name: str | None = None) -> Blob:
    """``input`` cut along axis 0 into ``unpack_num`` ticks of ``shape[0] / unpack_num`` rows each: the ops
    reading the result run once per slice within one call (micro-batches of one batch).

    As with :func:`repeat`, every other input of those ops must tick as often, and a result must be
    joined back with :func:`pack` (or summed with :func:`acc`) before it is returned or watched. The
    gradient is ``pack`` of the output gradient.

    Args:
        input: a blob of rank >= 1 whose axis 0 ``unpack_num`` divides.
        unpack_num: ticks per tick of ``input``, an int >= 1.
        name: the op name; default ``Unpack_<n>``.

    Returns:
        One tick's slice, shaped ``(shape[0] / unpack_num, *shape[1:])``.
    """
    _check("flow.unpack", input, "unpack_num", unpack_num)
    shape = tuple(input.shape)
    if not shape:
        raise build_error("flow.unpack", f"input {input.lbn!r} must have rank >= 1 (unpack cuts axis 0), got a "
                                         f"scalar")
    if shape[0] % unpack_num:
        raise build_error("flow.unpack", f"unpack_num={unpack_num} does not divide axis 0 of input {input.lbn!r} "
                                         f"of shape {shape}: every tick needs the same number of rows")
    return apply("unpack", [input], {"unpack_num": int(unpack_num)}, name=name)


def pack(input: Blob, pack_num: int, name: str | None = None) -> Blob:
    """Every ``pack_num`` consecutive ticks of ``input`` joined along axis 0: ``pack(unpack(a, 3), 3)`` is ``a``.

    The ticks of ``input`` per call must be a multiple of ``pack_num``. The gradient is ``unpack`` of
    the output gradient.

    Args:
        input: a blob of rank >= 1 computed in a repeated or unpacked region.
        pack_num: ticks joined into one, an int >= 1.
        name: the op name; default ``Pack_<n>``.

    Returns:
        The joined blob, shaped ``(shape[0] * pack_num, *shape[1:])``.
    """
    _check("flow.pack", input, "pack_num", pack_num)
    if not tuple(input.shape):
        raise build_error("flow.pack", f"input {input.lbn!r} must have rank >= 1 (pack joins along axis 0), got a "
                                       f"scalar")
    return apply("pack", [input], {"pack_num": int(pack_num)}, name=name)
