"""What the records of the data path share: a reader's int attributes checked, a decoder node's reader found
in the plan, and the decoder's step, which copies what the reader thread decoded for the batch."""
from __future__ import annotations

import numbers
from typing import Any, Callable

from flowjob_core import KernelContext, ShapeError

from flowjob_ofrecord.errors import OFRecordError
from flowjob_ofrecord.reader import Reader


def int_attr(attrs: dict, key: str, low: int) -> int:
    value = attrs[key]
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < low:
        raise ShapeError(f"{key} must be an int >= {low}, got {value!r}")
    return int(value)


def find_reader(ctx: KernelContext) -> Reader:
    reader = ctx.shared.get(("ofrecord", ctx.attrs["reader"]))
    if reader is None:
        raise OFRecordError(f"{ctx.node_name}: its input is not the output of an ofrecord_reader "
                            f"(reader {ctx.attrs['reader']!r} not in this plan)")
    return reader


def copy_decoded(ctx: KernelContext, reader: Reader) -> Callable[[Any], Any]:
    out, xp, key = ctx.out(0), ctx.xp, ctx.node_name

    def run(_ids: Any) -> Any:
        assert reader.current is not None  # the reader node runs first: the decoder reads its output
        out[...] = xp.asarray(reader.current.decoded[key])
        return out

    return run
