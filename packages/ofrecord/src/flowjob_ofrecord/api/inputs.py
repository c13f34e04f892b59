"""Checks of the public functions' inputs: the op that made an input blob (and which ops make image handles),
and a random crop's ranges."""
from __future__ import annotations

from typing import Any, Sequence

from flowjob_core import Blob, OpBuildError

# handle-producing ops whose images are uint8 (Resize, CropMirrorNormalize and these ops read them)
UINT8_HANDLES = ("ofrecord_image_decoder", "ofrecord_image_decoder_random_crop", "image_resize_keep_aspect_ratio",
                 "image_decode", "image_flip", "image_random_crop")
HANDLES = (*UINT8_HANDLES, "image_normalize")  # image_normalize's images are float32
WANTED = "flow.data.OFRecordImageDecoder(RandomCrop), flow.image.decode, flip, random_crop or a Resize keeping the " \
         "aspect ratio"


def channels_of(node: Any) -> int:
    """How many channels the images of a handle-producing node have."""
    if "color_space" in node.attrs:
        return 1 if node.attrs["color_space"] == "GRAY" else 3
    return int(node.attrs["channels"])


def producer(blob: Any, ops: tuple[str, ...] | None, what: str, wanted: str) -> Any:
    """The node of ``blob``'s job that made it, checked to be one of ``ops`` (None: any, or None for none)."""
    if not isinstance(blob, Blob):
        raise TypeError(f"{what}: the input must be the blob of {wanted}, got {type(blob).__name__}")
    node = next((n for n in blob.builder.job.nodes if n.name == blob.op_name), None)
    if ops is None:
        return node
    if node is None or node.op not in ops:
        raise OpBuildError(f"{what}: input {blob.lbn!r} is not the output of {wanted} "
                           f"(it comes from {node.op if node else 'no op'!r})")
    return node


def check_crop_args(num_attempts: int, random_area: Sequence[float],
                    random_aspect_ratio: Sequence[float]) -> tuple[tuple[float, ...], tuple[float, ...]]:
    if isinstance(num_attempts, bool) or not isinstance(num_attempts, int) or num_attempts < 1:
        raise ValueError(f"num_attempts must be an int >= 1, got {num_attempts!r}")
    area, ratio = tuple(map(float, random_area)), tuple(map(float, random_aspect_ratio))
    if len(area) != 2 or not 0 < area[0] <= area[1] <= 1:
        raise ValueError(f"random_area must be (low, high) with 0 < low <= high <= 1, got {random_area!r}")
    if len(ratio) != 2 or not 0 < ratio[0] <= ratio[1]:
        raise ValueError(f"random_aspect_ratio must be (low, high) with 0 < low <= high, got {random_aspect_ratio!r}")
    return area, ratio
