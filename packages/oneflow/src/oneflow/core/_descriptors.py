"""Build a ``.proto`` file's descriptor in code, for the ``*_pb2`` modules of ``oneflow.core``.

Each module describes its messages and enums with the small helpers below, and ``load`` turns them
into message classes. Generated protoc modules would pin the protobuf runtime to the compiler's
version; a ``FileDescriptorProto`` built here works with any protobuf >= 4.25. The files live in a
pool of their own, so another library's ``oneflow`` package in the default pool cannot clash with
them. ``tests/test_legacy_protos.py`` compiles the ``.proto`` text beside each module with protoc and
checks that the two descriptors are equal.
"""
from __future__ import annotations

from types import SimpleNamespace
from typing import NamedTuple

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
from google.protobuf.internal.enum_type_wrapper import EnumTypeWrapper

PACKAGE = "oneflow"
_F = descriptor_pb2.FieldDescriptorProto
_SCALARS = {
    "double": _F.TYPE_DOUBLE, "float": _F.TYPE_FLOAT, "int64": _F.TYPE_INT64, "int32": _F.TYPE_INT32,
    "bool": _F.TYPE_BOOL, "string": _F.TYPE_STRING, "bytes": _F.TYPE_BYTES,
}
_LABELS = {"optional": _F.LABEL_OPTIONAL, "required": _F.LABEL_REQUIRED, "repeated": _F.LABEL_REPEATED}

_POOL = descriptor_pool.DescriptorPool()
BUILT: dict[str, descriptor_pb2.FileDescriptorProto] = {}
"""Each loaded file's ``FileDescriptorProto`` as built, by file name (what the protoc test compares)."""


class Field(NamedTuple):
    """One field: ``label type name = number [default = default]``, in oneof ``oneof`` if given."""

    label: str
    type: str
    name: str
    number: int
    default: str | None = None  # as protoc writes it in the descriptor: "0", "0.05", "-1"
    oneof: str | None = None


def enum(name: str, *values: str) -> descriptor_pb2.EnumDescriptorProto:
    """An enum whose values are numbered 0, 1, 2... in the order given."""
    proto = descriptor_pb2.EnumDescriptorProto(name=name)
    for number, value in enumerate(values):
        proto.value.add(name=value, number=number)
    return proto


def message(name: str, *fields: Field) -> descriptor_pb2.DescriptorProto:
    """A message of ``fields``; a field type that is not a scalar names an enum or a message of the file."""
    proto = descriptor_pb2.DescriptorProto(name=name)
    for field in fields:
        if field.oneof is not None and field.oneof not in [o.name for o in proto.oneof_decl]:
            proto.oneof_decl.add(name=field.oneof)
        added = proto.field.add(name=field.name, number=field.number, label=_LABELS[field.label])
        if field.type in _SCALARS:
            added.type = _SCALARS[field.type]
        else:  # resolved against the file's enums in ``file``
            added.type_name = f".{PACKAGE}.{field.type}"
        if field.default is not None:
            added.default_value = field.default
        if field.oneof is not None:
            added.oneof_index = [o.name for o in proto.oneof_decl].index(field.oneof)
    return proto


def file(name: str, enums: list[descriptor_pb2.EnumDescriptorProto],
         messages: list[descriptor_pb2.DescriptorProto]) -> descriptor_pb2.FileDescriptorProto:
    """The ``FileDescriptorProto`` of ``name`` (proto2, package ``oneflow``, no imports)."""
    proto = descriptor_pb2.FileDescriptorProto(name=name, package=PACKAGE)
    proto.enum_type.extend(enums)
    proto.message_type.extend(messages)
    enum_names = {f".{PACKAGE}.{e.name}" for e in enums}
    for msg in proto.message_type:
        for field in msg.field:
            if field.type_name:
                field.type = _F.TYPE_ENUM if field.type_name in enum_names else _F.TYPE_MESSAGE
    return proto


def load(proto: descriptor_pb2.FileDescriptorProto) -> SimpleNamespace:
    """The file's classes: one attribute per message, per enum (an ``EnumTypeWrapper``) and per enum value
    (its number, as generated modules export them), plus ``DESCRIPTOR``."""
    _POOL.AddSerializedFile(proto.SerializeToString())
    BUILT[proto.name] = proto
    found = _POOL.FindFileByName(proto.name)
    names: dict[str, object] = {"DESCRIPTOR": found}
    for enum_name, enum_desc in found.enum_types_by_name.items():
        names[enum_name] = EnumTypeWrapper(enum_desc)
        names.update({value.name: value.number for value in enum_desc.values})
    for message_name, message_desc in found.message_types_by_name.items():
        names[message_name] = message_factory.GetMessageClass(message_desc)
    return SimpleNamespace(**names)
