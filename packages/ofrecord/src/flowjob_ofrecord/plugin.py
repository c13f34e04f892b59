"""The ofrecord package's plugin: registers the reader, decoder and image op records."""
from __future__ import annotations

from typing import Any

from flowjob_core import hookimpl

from flowjob_ofrecord.records import (
    coco, image_buffers, image_decoders, image_handles, image_transforms, megatron, ofrecord, onerec)


@hookimpl
def flowjob_add_ops(registry: Any) -> None:
    for op in (*ofrecord.OPS, *image_decoders.OPS, *image_transforms.OPS, *image_handles.OPS, *onerec.OPS,
               *coco.OPS, *image_buffers.OPS, *megatron.OPS):
        registry.add(op)
