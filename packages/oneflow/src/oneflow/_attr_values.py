"""A job node's attributes as legacy's ``AttrValue`` messages, and back, for a saved model's op list.

Booleans, integers, floats, strings, dtypes and tuples of integers (shapes, axes) take legacy's own
members (``at_bool``, ``at_int64``, ``at_double``, ``at_string``, ``at_data_type``, ``at_list_int64``).
Any other value a Python literal can spell (``None``, nested tuples, lists, dicts) is kept as
``at_string`` holding ``LITERAL`` and its ``repr``, read back with ``ast.literal_eval``; a value that
does not come back equal cannot be saved, and the error names the op and the attribute.
"""
from __future__ import annotations

import ast
from typing import Any

import numpy as np

from flowjob_core import SavedModelError
from flowjob_core.checkpoint.layout import DATA_TYPES

import oneflow.core.common.data_type_pb2 as data_type_pb
from oneflow.core.framework.user_op_attr_pb2 import AttrValue

LITERAL = "flowjob-literal:"
_BY_NUMBER = {data_type_pb.DataType.Value(name): dtype for dtype, name in DATA_TYPES.items()}


def encode(value: Any, where: str) -> Any:
    """The ``AttrValue`` of ``value``; ``where`` names the op and attribute in the error."""
    attr = AttrValue()
    if isinstance(value, (bool, np.bool_)):
        attr.at_bool = bool(value)
    elif isinstance(value, (int, np.integer)):
        attr.at_int64 = int(value)
    elif isinstance(value, (float, np.floating)):
        attr.at_double = float(value)
    elif isinstance(value, str) and not value.startswith(LITERAL):
        attr.at_string = value
    elif isinstance(value, np.dtype) and value in DATA_TYPES:
        attr.at_data_type = data_type_pb.DataType.Value(DATA_TYPES[value])
    elif isinstance(value, tuple) and all(type(v) is int for v in value):
        attr.at_list_int64.val.extend(value)
    else:
        attr.at_string = LITERAL + _literal(value, where)
    return attr


def decode(attr: Any) -> Any:
    """The value an ``AttrValue`` holds (lists as tuples)."""
    member = attr.WhichOneof("value")
    if member is None:
        raise SavedModelError("an attribute of the saved op list holds no value")
    value = getattr(attr, member)
    if member == "at_string":
        return ast.literal_eval(value[len(LITERAL):]) if value.startswith(LITERAL) else value
    if member == "at_data_type":
        return _BY_NUMBER[value]
    if member == "at_shape":
        return tuple(value.dim)
    if member == "at_list_data_type":
        return tuple(_BY_NUMBER[v] for v in value.val)
    if member == "at_list_shape":
        return tuple(tuple(s.dim) for s in value.val)
    if member.startswith("at_list_"):
        return tuple(value.val)
    return value


def _literal(value: Any, where: str) -> str:
    text = repr(value)
    try:
        back = ast.literal_eval(text)
        same = type(back) is type(value) and bool(back == value)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        same = False
    if not same:
        raise SavedModelError(f"{where}: the value {text} ({type(value).__name__}) cannot be written to a saved "
                              f"model (booleans, numbers, strings, dtypes and Python literals can)")
    return text
