"""A saved model on disk: finding ``<dir>/<version>/``, reading its ``<basename>.pb`` (or ``.prototxt``), where its
``checkpoint_dir`` may point and whether its variable files hold what its op list declares.

A model may come from anyone: nothing here follows a path out of the version folder, and the variable files are
measured against their declared shapes before a single variable is allocated.
"""
from __future__ import annotations

import os
from typing import Any, Iterable

from flowjob_core import BlobSpec, CheckpointError, SavedModelError
from google.protobuf import text_format

from flowjob_serving import checkpoints
from flowjob_serving.digests import inside

from oneflow.core.serving.saved_model_pb2 import SavedModel


def versions(saved_model_dir: str) -> list[int]:
    """The version folders of a saved model, by number (folders whose name is an integer)."""
    found = []
    for entry in os.listdir(saved_model_dir):
        if entry.isdigit() and os.path.isdir(os.path.join(saved_model_dir, entry)):
            found.append(int(entry))
    return sorted(found)


def version_dir(saved_model_dir: str, model_version: int | None) -> str:
    """The folder of version ``model_version`` (None: the latest) in ``saved_model_dir``."""
    if not os.path.isdir(saved_model_dir):
        raise SavedModelError(f"saved model folder {saved_model_dir!r} does not exist or is not a folder")
    present = versions(saved_model_dir)
    if model_version is None:
        if not present:
            raise SavedModelError(f"saved model folder {saved_model_dir!r} holds no version (a folder named by an "
                                  f"integer, as ModelBuilder(...).Version(n).Save() writes)")
        model_version = present[-1]
    path = os.path.join(saved_model_dir, str(model_version))
    if not os.path.isdir(path):
        raise SavedModelError(f"version {model_version} of the saved model in {saved_model_dir!r} does not exist; "
                              f"its versions: {present or 'none'}")
    return path


def read(path: str, basename: str) -> Any:
    """The ``SavedModel`` in folder ``path``: ``<basename>.pb``, else ``<basename>.prototxt``."""
    proto = SavedModel()
    binary = os.path.join(path, f"{basename}.pb")
    text = os.path.join(path, f"{basename}.prototxt")
    if not os.path.isfile(binary) and not os.path.isfile(text):
        raise SavedModelError(f"saved model folder {path!r} has neither {basename}.pb nor {basename}.prototxt")
    try:
        if os.path.isfile(binary):
            with open(binary, "rb") as f:
                proto.ParseFromString(f.read())
        else:
            with open(text, encoding="utf-8") as f:
                text_format.Merge(f.read(), proto)
    except Exception as exc:  # DecodeError, ParseError, UnicodeDecodeError, ...: whatever a damaged file raises
        raise SavedModelError(f"saved model {path!r}: cannot read its meta file: {type(exc).__name__}: "
                              f"{exc}") from exc
    try:
        _check_text(proto, f"saved model {path!r}", "")
    except UnicodeDecodeError as exc:  # a map's key that is not UTF-8 fails as protobuf decodes it
        raise SavedModelError(f"saved model {path!r}: its meta file holds a map key that is not UTF-8 text: "
                              f"{exc}") from exc
    return proto


def _check_text(proto: Any, where: str, prefix: str) -> None:
    """Every string field of ``proto`` holds text: protobuf hands a string that is not UTF-8 back as bytes (a
    damaged or crafted file), which would reach paths and names; refused naming the field."""
    for desc, value in proto.ListFields():
        name = f"{prefix}{desc.name}"
        if desc.message_type is not None and desc.message_type.GetOptions().map_entry:
            value_desc = desc.message_type.fields_by_name["value"]
            for key, item in value.items():
                _check_value(key, f"{name} key", where)
                if value_desc.message_type is not None:
                    _check_text(item, where, f"{name}[{key!r}].")
                elif value_desc.type == value_desc.TYPE_STRING:
                    _check_value(item, f"{name}[{key!r}]", where)
        elif desc.message_type is not None:
            items = value if _repeated(desc) else [value]
            for index, item in enumerate(items):
                _check_text(item, where, f"{name}[{index}]." if _repeated(desc) else f"{name}.")
        elif desc.type == desc.TYPE_STRING:
            for item in (value if _repeated(desc) else [value]):
                _check_value(item, name, where)


def _repeated(desc: Any) -> bool:
    # protobuf 6 says ``is_repeated``; older ones (>= 4.25, which this package accepts) only ``label``
    return bool(desc.is_repeated) if hasattr(desc, "is_repeated") else desc.label == desc.LABEL_REPEATED


def _check_value(value: Any, name: str, where: str) -> None:
    if not isinstance(value, str):
        raise SavedModelError(f"{where}: its field {name} holds {value!r}, which is not UTF-8 text")


def checkpoint_folder(path: str, checkpoint_dir: str, model: str) -> str:
    """The variables' folder a model's ``checkpoint_dir`` names, resolved (symlinks included); anything outside
    its version folder ``path`` is refused, naming the field."""
    where = f"saved model {model!r} ({path})"
    if not checkpoint_dir or "\0" in checkpoint_dir:
        raise SavedModelError(f"{where}: its field checkpoint_dir ({checkpoint_dir!r}) names no folder")
    root = os.path.realpath(path)
    target = os.path.join(path, checkpoint_dir)
    resolved = os.path.realpath(target)
    if resolved == root or not inside(root, target):
        raise SavedModelError(f"{where}: its field checkpoint_dir ({checkpoint_dir!r}) resolves to {resolved!r}, "
                              f"outside its version folder {root!r}; a saved model serves only variables inside it")
    if not os.path.isdir(target):
        raise SavedModelError(f"{where}: its variables folder {target!r} (field checkpoint_dir) does not exist")
    return target


def check_variable_files(folder: str, variables: Iterable[tuple[str, BlobSpec]], model: str,
                         root: str | None = None, listed: dict[str, str] | None = None) -> None:
    """Before any variable is allocated: each variable's ``out`` file in the checkpoint ``folder`` exists, holds
    exactly the bytes of its declared shape and dtype, and (``root`` given, resolved) lies inside ``root``; with
    the model's digest listing ``listed`` (paths relative to ``root``), it is a file the listing checked."""
    missing = []
    for name, spec in variables:
        where = f"saved model {model!r}, variable {name!r}"
        try:
            out = os.path.join(checkpoints.variable_dir(folder, name), checkpoints.OUT_FILE)
        except CheckpointError as exc:
            raise SavedModelError(f"{where}: {exc}") from None
        if root is not None and not inside(root, out):
            raise SavedModelError(f"{where}: its file {out!r} resolves to {os.path.realpath(out)!r}, outside the "
                                  f"version folder {root!r}")
        if not os.path.isfile(out):
            missing.append(name)
            continue
        size = os.path.getsize(out)
        if size != spec.nbytes:
            raise SavedModelError(f"{where}: the op list declares shape {spec.shape} {spec.dtype} ({spec.nbytes} "
                                  f"bytes), its file {out!r} holds {size} bytes; nothing was allocated")
        if listed is not None and root is not None:
            relative = os.path.relpath(os.path.realpath(out), root).replace(os.sep, "/")
            if relative not in listed:
                raise SavedModelError(f"{where}: its file {relative!r} is not listed in the model's digests")
    if missing:
        raise CheckpointError(f"checkpoint {folder!r} lacks {len(missing)} variables of the saved model: "
                              f"{', '.join(repr(n) for n in missing)}")
