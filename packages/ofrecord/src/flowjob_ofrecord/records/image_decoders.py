"""Op records of the image decoders: the encoded images (or bytes) of each record, decoded in the reader thread.

Decoded images differ in size, so a decoder's blob is a handle, as legacy's tensor buffer was: the batch's
record ids (int64 ``(batch,)``), while the images themselves are decoded by the reader thread into the
current batch, spread over a pool of threads. ``image_transforms`` holds the ops that make them one blob.
"""
from __future__ import annotations

import numbers
from typing import Any, Sequence

import numpy as np

from flowjob_core import BlobSpec, Effects, KernelContext, LegacyFace, OpDef, ShapeError
from flowjob_core.ir import dtypes

from flowjob_ofrecord import features, images
from flowjob_ofrecord.errors import OFRecordError
from flowjob_ofrecord.files import RecordRef
from flowjob_ofrecord.record_pb2 import OFRecord
from flowjob_ofrecord.records.reader_nodes import copy_decoded, find_reader


def _handle_infer(inputs: Sequence[BlobSpec], attrs: dict) -> list[BlobSpec]:
    (records,) = inputs
    if records.dtype != dtypes.int64 or len(records.shape) != 1:
        raise ShapeError(f"the input must be an ofrecord_reader's record blob, got {records}")
    images.check_color_space(attrs["color_space"])
    return [BlobSpec(records.shape, dtypes.int64)]


def _decoder_kernel(ctx: KernelContext) -> Any:
    reader = find_reader(ctx)
    key, node, attrs = ctx.attrs["name"], ctx.node_name, ctx.attrs
    color_space = images.check_color_space(attrs["color_space"])
    crop = ctx.op == "ofrecord_image_decoder_random_crop"
    # the reader thread draws every crop, so one generator, used in record order, makes crops repeat with the seed
    rng = np.random.default_rng(attrs.get("seed")) if crop else None

    def decode(records: list[OFRecord], refs: list[RecordRef], _decoded: dict) -> list[np.ndarray]:
        opened = [images.open_image(features.bytes_values(record, key, ref, node)[0], ref, key, node)
                  for record, ref in zip(records, refs)]
        # crops drawn in record order from the headers' sizes, so they repeat with the seed; pixels in parallel
        boxes = [images.random_crop_box(image.width, image.height, rng, attrs["num_attempts"],
                                        tuple(attrs["random_area"]), tuple(attrs["random_aspect_ratio"]))
                 if rng is not None else None for image in opened]
        pixels = sum(image.width * image.height for image in opened)
        return images.parallel_map(lambda k: images.decode(opened[k], boxes[k], color_space, refs[k], key, node),
                                   range(len(refs)), attrs.get("threads"), pixels)

    reader.add_decoder(node, decode)
    out = ctx.out(0)

    def run(ids: Any) -> Any:
        out[...] = ids
        return out

    return run


def handle_infer(inputs: Sequence[BlobSpec], attrs: dict) -> list[BlobSpec]:
    (handle,) = inputs
    if handle.dtype != dtypes.int64 or len(handle.shape) != 1:
        raise ShapeError(f"the input must be the blob of an OFRecord image decoder, got {handle}")
    return [BlobSpec(handle.shape, dtypes.int64)]


def _bytes_kernel(ctx: KernelContext) -> Any:
    """Each record's one bytes value, kept in the reader thread (a handle) for the ops that read it."""
    reader = find_reader(ctx)
    key, node = ctx.attrs["name"], ctx.node_name

    def decode(records: list[OFRecord], refs: list[RecordRef], _decoded: dict) -> list[bytes]:
        out = []
        for record, ref in zip(records, refs):
            values = features.bytes_values(record, key, ref, node)
            if len(values) != 1:
                raise OFRecordError(f"{node}: feature {key!r} of {ref.where()} holds {len(values)} bytes values; "
                                    f"the bytes decoder takes exactly one")
            out.append(values[0])
        return out

    reader.add_decoder(node, decode)
    out = ctx.out(0)

    def run(ids: Any) -> Any:
        out[...] = ids
        return out

    return run


def _crop_resize_infer(inputs: Sequence[BlobSpec], attrs: dict) -> list[BlobSpec]:
    (handle,) = handle_infer(inputs, attrs)
    w, h = attrs["target_width"], attrs["target_height"]
    if not all(isinstance(v, numbers.Integral) and not isinstance(v, bool) and v >= 1 for v in (w, h)):
        raise ShapeError(f"target_width and target_height must be ints >= 1, got {w!r}, {h!r}")
    return [BlobSpec((handle.shape[0], h, w, 3), dtypes.uint8)]


def _crop_resize_kernel(ctx: KernelContext) -> Any:
    """Decodes a random crop of each encoded image and resizes it, in the reader thread."""
    reader = find_reader(ctx)
    attrs, node, spec = ctx.attrs, ctx.node_name, ctx.outputs[0]
    source, w, h = attrs["source"], attrs["target_width"], attrs["target_height"]
    rng = np.random.default_rng(attrs.get("seed"))

    def decode(records: list[OFRecord], refs: list[RecordRef], decoded: dict) -> np.ndarray:
        opened = [images.open_image(data, ref, source, node) for data, ref in zip(decoded[source], refs)]
        boxes = [images.random_crop_box(im.width, im.height, rng, attrs["num_attempts"], tuple(attrs["random_area"]),
                                        tuple(attrs["random_aspect_ratio"])) for im in opened]
        batch = np.empty(spec.shape, dtype=np.uint8)

        def one(k: int) -> None:
            pixels = images.decode(opened[k], boxes[k], "RGB", refs[k], source, node)
            batch[k] = images.resize(pixels, w, h, "auto")

        images.parallel_map(one, range(len(refs)), pixels=sum(im.width * im.height for im in opened))
        return batch

    reader.add_decoder(node, decode)
    return copy_decoded(ctx, reader)


OFRECORD_IMAGE_DECODER = OpDef(
    "ofrecord_image_decoder", _handle_infer, kernel=_decoder_kernel, not_differentiable=True,
    doc="Decodes an encoded image feature of each record (ahead, in the reader's thread); a handle blob",
    effects=Effects(host_state=True), legacy=LegacyFace(name_prefix="OFRecordImageDecoder"))
OFRECORD_IMAGE_DECODER_RANDOM_CROP = OpDef(
    "ofrecord_image_decoder_random_crop", _handle_infer, kernel=_decoder_kernel, not_differentiable=True,
    doc="Decodes a random crop (area and aspect ratio drawn per image) of each record's encoded image",
    effects=Effects(host_state=True), legacy=LegacyFace(name_prefix="OFRecordImageDecoderRandomCrop"))
OFRECORD_BYTES_DECODER = OpDef(
    "ofrecord_bytes_decoder", handle_infer, kernel=_bytes_kernel, not_differentiable=True,
    doc="Each record's bytes value (an encoded image), kept in the reader thread; a handle blob",
    effects=Effects(host_state=True), legacy=LegacyFace(name_prefix="OFRecordBytesDecoder"))
IMAGE_DECODER_RANDOM_CROP_RESIZE = OpDef(
    "image_decoder_random_crop_resize", _crop_resize_infer, kernel=_crop_resize_kernel, not_differentiable=True,
    doc="Encoded images (a bytes decoder's handle) decoded as random crops resized to (batch, h, w, 3) RGB",
    effects=Effects(host_state=True))

OPS = (OFRECORD_IMAGE_DECODER, OFRECORD_IMAGE_DECODER_RANDOM_CROP, OFRECORD_BYTES_DECODER,
       IMAGE_DECODER_RANDOM_CROP_RESIZE)
