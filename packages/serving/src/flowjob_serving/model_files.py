"""Finding and reading a saved model on disk: ``<dir>/<version>/<basename>.pb`` (or ``.prototxt``)."""
from __future__ import annotations

import os
from typing import Any

from flowjob_core import SavedModelError
from google.protobuf import message, text_format

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
    try:
        if os.path.isfile(binary):
            with open(binary, "rb") as f:
                proto.ParseFromString(f.read())
        elif os.path.isfile(text):
            with open(text, encoding="utf-8") as f:
                text_format.Merge(f.read(), proto)
        else:
            raise SavedModelError(f"saved model folder {path!r} has neither {basename}.pb nor {basename}.prototxt")
    except (message.DecodeError, text_format.ParseError) as exc:
        raise SavedModelError(f"saved model {path!r}: cannot read its meta file: {exc}") from None
    return proto
