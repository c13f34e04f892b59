"""Legacy v0.4's hash-table encoding: ``flow.categorical_ordinal_encode`` on given table variables and
``flow.layers.categorical_ordinal_encoder``, which makes them."""
from __future__ import annotations

import numbers

from flowjob_core import Blob, apply, get_variable
from flowjob_core.trace import scope

from flowjob_ops.api._common import blob_arg, build_error
from flowjob_ops.api._initializers import Constant


NAMESPACES = {
    "flow": ["categorical_ordinal_encode"],
    "flow.layers": ["categorical_ordinal_encoder"],
}
"""The face namespaces legacy exported these names in; the oneflow face reads this literal."""
__all__ = sorted({name for names in NAMESPACES.values() for name in names})


def categorical_ordinal_encode(table: Blob, size: Blob, input_tensor: Blob, hash_precomputed: bool = True,
                               name: str | None = None) -> Blob:
    """Ordinals 1, 2, ... for the distinct values of ``input_tensor``, by first appearance, kept in a hash table.

    ``table`` (2 * capacity,) and ``size`` (1,) are usually non-trainable variables initialised to 0
    (``flow.layers.categorical_ordinal_encoder`` makes them); each step writes new keys into them, so
    a value keeps its ordinal across steps. The value 0 marks an empty slot and encodes to 0.

    Args:
        table: an int32/int64 variable of (key, ordinal) pairs.
        size: an int32/int64 (1,) variable, the ordinals handed out so far.
        input_tensor: an int32/int64 blob of precomputed hash values (non-negative).
        hash_precomputed: must be True (legacy supported nothing else).
        name: the op name; default ``CategoricalOrdinalEncode_<n>``.

    Returns:
        A blob like input_tensor.
    """
    what = "flow.categorical_ordinal_encode"
    if hash_precomputed is not True:
        raise build_error(what, f"hash_precomputed must be True (legacy supported no other mode), got "
                                f"{hash_precomputed!r}")
    blobs = [blob_arg(what, arg, value) for arg, value in
             (("input_tensor", input_tensor), ("table", table), ("size", size))]
    return apply("categorical_ordinal_encode", blobs, {"hash_precomputed": True}, name=name)


def categorical_ordinal_encoder(input_tensor: Blob, capacity: int, hash_precomputed: bool = True,
                                name: str = "CategoricalOrdinalEncoder") -> Blob:
    """``flow.categorical_ordinal_encode`` on its own table: variables ``<name>-Table`` (2 * capacity,) and
    ``<name>-Size`` (1,), of input_tensor's dtype, zero-initialised and not trainable; the op is ``<name>-Encode``.

    Args:
        input_tensor: an int32/int64 blob of precomputed hash values.
        capacity: how many distinct values the table can hold.
        hash_precomputed: must be True.
        name: the namespace of the variables and the op.
    """
    what = "flow.layers.categorical_ordinal_encoder"
    if isinstance(capacity, bool) or not isinstance(capacity, numbers.Integral) or capacity < 1:
        raise build_error(what, f"capacity must be a positive int, got {capacity!r}")
    if not isinstance(input_tensor, Blob):
        raise TypeError(f"{what}: input_tensor must be a blob, got {type(input_tensor).__name__}")
    dtype = input_tensor.dtype
    with scope.namespace(name):
        table = get_variable("Table", shape=(2 * int(capacity),), dtype=dtype,
                             initializer=Constant(value=0), trainable=False,
                             reuse=False)
        size = get_variable("Size", shape=(1,), dtype=dtype,
                            initializer=Constant(value=0), trainable=False,
                            reuse=False)
        return categorical_ordinal_encode(table, size, input_tensor, hash_precomputed, name="Encode")
