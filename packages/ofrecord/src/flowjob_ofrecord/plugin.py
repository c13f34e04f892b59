"""The ofrecord package's plugin: registers the reader, decoder and image op records."""
from __future__ import annotations

from typing import Any

from flowjob_core import hookimpl

from flowjob_ofrecord import defs, defs_handle, defs_image, defs_onerec, defs_transform


@hookimpl
def flowjob_add_ops(registry: Any) -> None:
    for op in (*defs.OPS, *defs_image.OPS, *defs_transform.OPS, *defs_handle.OPS, *defs_onerec.OPS):
        registry.add(op)
