"""A saved model's integrity file: ``saved_model.sha256``, the SHA-256 of every other file of the version folder.

``ModelBuilder.Save()`` writes it last, in ``sha256sum``'s format (``<hex digest>  <path relative to the version
folder>``, one line per file, sorted), so ``sha256sum -c saved_model.sha256`` checks a model too. Loading reads
it first: a file it lists that is missing or whose digest differs, a line that is not a digest and a path, or a
path leaving the folder is a ``SavedModelError`` naming the model and the file. A model without the file (legacy
OneFlow's, or one written before flowjob wrote digests) loads with a ``SavedModelWarning`` saying its files are
not checked.
"""
from __future__ import annotations

import hashlib
import os
import re
import warnings

from flowjob_core import SavedModelError

DIGEST_FILE = "saved_model.sha256"
_LINE = re.compile(r"(?P<digest>[0-9a-f]{64})  (?P<path>[^\n]+)")
_CHUNK = 1 << 20


class SavedModelWarning(UserWarning):
    """A saved model loaded without a check flowjob would make on one it wrote (no ``saved_model.sha256``)."""


def file_digest(path: str) -> str:
    """The SHA-256 of a file's bytes, read in chunks."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(_CHUNK), b""):
            digest.update(chunk)
    return digest.hexdigest()


def write(folder: str) -> None:
    """Write ``<folder>/saved_model.sha256`` for every file below ``folder`` (call it after every other file)."""
    lines = []
    for root, dirs, files in os.walk(folder):
        dirs.sort()
        for name in sorted(files):
            path = os.path.join(root, name)
            relative = os.path.relpath(path, folder).replace(os.sep, "/")
            if relative != DIGEST_FILE:
                lines.append(f"{file_digest(path)}  {relative}\n")
    target = os.path.join(folder, DIGEST_FILE)
    with open(target, "w", encoding="utf-8", newline="\n") as f:
        f.writelines(lines)
        f.flush()
        os.fsync(f.fileno())


def verify(folder: str, model: str) -> dict[str, str] | None:
    """Check every file ``<folder>/saved_model.sha256`` lists; the listed paths (relative, ``/``-separated) and
    their digests, or None (with a warning) when the model has no such file."""
    listing = os.path.join(folder, DIGEST_FILE)
    if not os.path.isfile(listing):
        warnings.warn(f"saved model {model!r} has no {DIGEST_FILE}: its files cannot be checked against damage or "
                      f"change (flowjob writes one with every model it saves)", SavedModelWarning, stacklevel=3)
        return None
    where = f"saved model {model!r}, {DIGEST_FILE}"
    try:
        with open(listing, encoding="utf-8") as f:
            text = f.read()
    except (OSError, UnicodeDecodeError) as exc:
        raise SavedModelError(f"{where}: cannot be read: {exc}") from None
    listed: dict[str, str] = {}
    root = os.path.realpath(folder)
    for number, line in enumerate(text.splitlines(), 1):
        match = _LINE.fullmatch(line)
        if match is None:
            raise SavedModelError(f"{where}, line {number}: {line[:80]!r} is not '<sha256 hex>  <path>'")
        relative = match["path"]
        parts = relative.split("/")
        if relative.startswith("/") or any(p in ("", ".", "..") for p in parts) or relative == DIGEST_FILE:
            raise SavedModelError(f"{where}, line {number}: {relative!r} is not a path inside the version folder")
        path = os.path.join(folder, *parts)
        if not inside(root, path):
            raise SavedModelError(f"{where}, line {number}: {relative!r} resolves to {os.path.realpath(path)!r}, "
                                  f"outside the version folder {root!r}")
        if not os.path.isfile(path):
            raise SavedModelError(f"{where}: {relative!r} is listed but missing from {folder!r}")
        if file_digest(path) != match["digest"]:
            raise SavedModelError(f"saved model {model!r}: {relative!r} does not match its digest in {DIGEST_FILE} "
                                  f"(damaged or changed since it was saved)")
        listed[relative] = match["digest"]
    return listed


def inside(root: str, path: str) -> bool:
    """Whether ``path``, resolved (symlinks included), is ``root`` or below it (``root`` already resolved)."""
    resolved = os.path.realpath(path)
    return resolved == root or os.path.commonpath([root, resolved]) == root
