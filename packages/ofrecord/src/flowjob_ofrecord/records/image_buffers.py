"""Images of tensor buffers (legacy's ``image_decode`` over a buffer of encoded files, as ``coco_reader`` gives):
each element's bytes decoded with Pillow into an (H, W, C) array of uint8 or float32, in the step."""
from __future__ import annotations

import io
from typing import Any, Sequence

import numpy as np

from flowjob_core import BlobSpec, KernelContext, OpDef, ShapeError
from flowjob_core.ir import dtypes

from flowjob_ofrecord import images
from flowjob_ofrecord.errors import OFRecordError, require_pillow

DECODED = (dtypes.uint8, dtypes.float32)


def _infer(inputs: Sequence[BlobSpec], attrs: dict) -> list[BlobSpec]:
    (x,) = inputs
    if x.dtype != dtypes.tensor_buffer:
        raise ShapeError(f"the input must be a tensor buffer of encoded images, got {x}")
    images.check_color_space(attrs["color_space"])
    if dtypes.as_dtype(attrs["data_type"]) not in DECODED:
        raise ShapeError(f"images decode to uint8 or float32, got data_type {attrs['data_type']!r}")
    return [BlobSpec(x.shape, dtypes.tensor_buffer)]


def _kernel(ctx: KernelContext) -> Any:
    Image = require_pillow(ctx.node_name)
    color_space, node, xp = images.check_color_space(ctx.attrs["color_space"]), ctx.node_name, ctx.xp
    dtype = dtypes.as_dtype(ctx.attrs["data_type"])
    to_host = ctx.backend.to_host

    def one(encoded: Any, k: int) -> Any:
        data = np.asarray(to_host(encoded)).tobytes()
        try:
            picture = Image.open(io.BytesIO(data))
            picture.load()
        except Exception as exc:  # Pillow raises several kinds for bytes that are not an image
            raise OFRecordError(f"{node}: tensor buffer element {k} is not a decodable image: {exc}") from None
        return xp.asarray(images.to_array(picture, color_space).astype(dtype))

    def run(buffer: Any) -> Any:
        flat = buffer.reshape(-1)
        out = np.empty(buffer.shape, dtype=object)
        for k, element in enumerate(flat):
            out.reshape(-1)[k] = one(element, k)
        return out

    return run


IMAGE_DECODE_TENSOR_BUFFER = OpDef(
    "image_decode_tensor_buffer", _infer, kernel=_kernel, not_differentiable=True, name_prefix="ImageDecode",
    doc="each element's encoded image decoded to (H, W, C) pixels of data_type (BGR, RGB or GRAY)")

OPS = (IMAGE_DECODE_TENSOR_BUFFER,)
