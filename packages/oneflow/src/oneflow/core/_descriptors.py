"""Build a ``.proto`` file's descriptor in code, for the ``*_pb2`` modules of ``oneflow.core``.

Each module describes its messages and enums with the small helpers below, and ``load`` turns them
into message classes. A file may import files loaded before it (``dependencies``), nest messages and
declare ``map<string, V>`` fields (label ``"map"``: protoc's nested ``<Name>Entry`` message is made).
Generated protoc modules would pin the protobuf runtime to the compiler's version; a
``FileDescriptorProto`` built here works with any protobuf >= 4.25. The files live in a pool of their
own, so another library's ``oneflow`` package in the default pool cannot clash with them.
``tests/test_protos.py`` compiles the ``.proto`` text beside each module with protoc and checks
that the two descriptors are equal.
"""
from __future__ import annotations

from types import SimpleNamespace
from typing import Iterable, Iterator, NamedTuple

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
from google.protobuf.internal.enum_type_wrapper import EnumTypeWrapper

PACKAGE = "oneflow"
_F = descriptor_pb2.FieldDescriptorProto
_SCALARS = {
    "double": _F.TYPE_DOUBLE, "float": _F.TYPE_FLOAT, "int64": _F.TYPE_INT64, "int32": _F.TYPE_INT32,
    "bool": _F.TYPE_BOOL, "string": _F.TYPE_STRING, "bytes": _F.TYPE_BYTES,
}
_LABELS = {"optional": _F.LABEL_OPTIONAL, "required": _F.LABEL_REQUIRED, "repeated": _F.LABEL_REPEATED,
           "map": _F.LABEL_REPEATED}

_POOL = descriptor_pool.DescriptorPool()
BUILT: dict[str, descriptor_pb2.FileDescriptorProto] = {}
"""Each loaded file's ``FileDescriptorProto`` as built, by file name (what the protoc test compares)."""


class Field(NamedTuple):
    """One field: ``label type name = number [default = default]``, in oneof ``oneof`` if given. A message or
    enum type is named as in the ``.proto`` file, qualified by its outer message when nested
    (``AttrValue.ListInt32``); a ``map`` field's type is its value type (keys are strings)."""

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


def message(name: str, *fields: Field, nested: tuple[descriptor_pb2.DescriptorProto, ...] = ()
            ) -> descriptor_pb2.DescriptorProto:
    """A message of ``fields`` with the ``nested`` messages declared inside it (before its map fields, whose
    entry messages protoc nests after them); a non-scalar field type names an enum or a message."""
    proto = descriptor_pb2.DescriptorProto(name=name)
    proto.nested_type.extend(nested)
    for field in fields:
        if field.oneof is not None and field.oneof not in [o.name for o in proto.oneof_decl]:
            proto.oneof_decl.add(name=field.oneof)
        added = proto.field.add(name=field.name, number=field.number, label=_LABELS[field.label])
        if field.label == "map":
            entry = _map_entry(field)
            proto.nested_type.append(entry)
            added.type_name = f".{PACKAGE}.{name}.{entry.name}"
        elif field.type in _SCALARS:
            added.type = _SCALARS[field.type]
        else:  # enum or message: ``file`` tells them apart once every type of the file and its imports is known
            added.type_name = f".{PACKAGE}.{field.type}"
        if field.default is not None:
            added.default_value = field.default
        if field.oneof is not None:
            added.oneof_index = [o.name for o in proto.oneof_decl].index(field.oneof)
    return proto


def _map_entry(field: Field) -> descriptor_pb2.DescriptorProto:
    """protoc's entry message of ``map<string, type> name``: ``NameEntry { key = 1; value = 2; }``."""
    camel = "".join(part[:1].upper() + part[1:] for part in field.name.split("_"))
    entry = message(f"{camel}Entry", Field("optional", "string", "key", 1), Field("optional", field.type, "value", 2))
    entry.options.map_entry = True
    return entry


def file(name: str, enums: list[descriptor_pb2.EnumDescriptorProto],
         messages: list[descriptor_pb2.DescriptorProto],
         dependencies: tuple[str, ...] = ()) -> descriptor_pb2.FileDescriptorProto:
    """The ``FileDescriptorProto`` of ``name`` (proto2, package ``oneflow``), importing ``dependencies``
    (files loaded already, in the ``.proto`` file's import order)."""
    proto = descriptor_pb2.FileDescriptorProto(name=name, package=PACKAGE)
    proto.dependency.extend(dependencies)
    proto.enum_type.extend(enums)
    proto.message_type.extend(messages)
    enum_names = {f".{PACKAGE}.{e.name}" for e in enums}
    for dependency in dependencies:
        enum_names.update(f".{PACKAGE}.{e.name}" for e in BUILT[dependency].enum_type)
    for msg in _all_messages(proto.message_type):
        for field in msg.field:
            if field.type_name:
                field.type = _F.TYPE_ENUM if field.type_name in enum_names else _F.TYPE_MESSAGE
    return proto


def _all_messages(messages: Iterable[descriptor_pb2.DescriptorProto]) -> Iterator[descriptor_pb2.DescriptorProto]:
    for msg in messages:
        yield msg
        yield from _all_messages(msg.nested_type)


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
