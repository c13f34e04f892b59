"""Image decoding, random crops and resizing with Pillow (the ``image`` extra), on one image at a time.

Decoded images are uint8 ``(H, W, C)`` arrays: C = 3 in ``RGB`` or ``BGR`` order (legacy decoded with
OpenCV, whose order is BGR, its default), C = 1 for ``GRAY``.
"""
from __future__ import annotations

import io
import math
import os
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable, Sequence, TypeVar

import numpy as np

from flowjob_ofrecord.errors import OFRecordError, require_pillow
from flowjob_ofrecord.files import RecordRef

T = TypeVar("T")
# threads decoding and resizing the images of one batch: Pillow releases the GIL while it works
THREADS = max(1, min(8, os.cpu_count() or 1))
# a batch of fewer pixels than this is worked on by the calling thread: handing tiny images (MNIST's 28x28)
# to the pool costs more than decoding them there (measured: 100 PNGs of 28x28, 18 ms of CPU per batch on the
# reader thread alone against 26 ms spread over 2 pool threads)
SMALL_BATCH_PIXELS = 1 << 20
_pool: ThreadPoolExecutor | None = None
_pool_lock = threading.Lock()


def parallel_map(fn: Callable[[Any], T], items: Sequence[Any], workers: int | None = None,
                 pixels: int | None = None) -> list[T]:
    """``[fn(x) for x in items]`` on a shared pool of ``THREADS`` threads; the first error in order is raised.

    ``workers`` (a reader's ``num_decode_threads_per_machine``) caps how many of the pool's threads work on
    these items at once: they are cut into that many runs of consecutive items, one task each. ``pixels``,
    the batch's pixel count when known, keeps batches under ``SMALL_BATCH_PIXELS`` on the calling thread."""
    global _pool
    width = THREADS if not workers else min(THREADS, workers)
    if width == 1 or len(items) < 2 or (pixels is not None and pixels < SMALL_BATCH_PIXELS):
        return [fn(x) for x in items]
    with _pool_lock:
        if _pool is None:
            _pool = ThreadPoolExecutor(max_workers=THREADS, thread_name_prefix="flowjob-image-decode")
    if width >= len(items):
        return list(_pool.map(fn, items))
    bounds = [len(items) * k // width for k in range(width + 1)]
    runs = _pool.map(lambda k: [fn(x) for x in items[bounds[k]:bounds[k + 1]]], range(width))
    return [y for run in runs for y in run]


COLOR_SPACES = {"RGB": ("RGB", 3), "BGR": ("RGB", 3), "GRAY": ("L", 1)}
INTERPOLATIONS = ("auto", "bilinear", "nearest_neighbor", "bicubic", "area")


def check_color_space(color_space: str) -> str:
    if not isinstance(color_space, str) or color_space.upper() not in COLOR_SPACES:
        raise ValueError(f"color_space must be one of {sorted(COLOR_SPACES)}, got {color_space!r}")
    return color_space.upper()


def open_image(data: bytes, ref: RecordRef, key: str, op: str):
    """The image with its size read from the header; its pixels are decoded by ``decode``."""
    Image = require_pillow(op)
    try:
        return Image.open(io.BytesIO(data))
    except Exception as exc:  # Pillow raises several kinds for bytes that are not an image
        raise OFRecordError(f"{op}: feature {key!r} of {ref.where()} is not a decodable image: {exc}") from None


def decode(image, box: tuple[int, ...] | None, color_space: str, ref: RecordRef, key: str, op: str) -> np.ndarray:
    """An opened image's pixels (only the ``box`` when given) as a uint8 (H, W, C) array."""
    try:
        image.load()
    except Exception as exc:  # a truncated or corrupt image body
        raise OFRecordError(f"{op}: feature {key!r} of {ref.where()} is not a decodable image: {exc}") from None
    return to_array(image.crop(box) if box is not None else image, color_space)


def to_array(image, color_space: str) -> np.ndarray:
    mode, channels = COLOR_SPACES[color_space]
    # convert() copies even an image already in the mode (a grayscale PNG read as GRAY)
    pixels = np.asarray(image if image.mode == mode else image.convert(mode), dtype=np.uint8)
    if channels == 1:
        return pixels[:, :, None]
    return np.ascontiguousarray(pixels[:, :, ::-1]) if color_space == "BGR" else pixels


def random_crop_box(width: int, height: int, rng: np.random.Generator, num_attempts: int,
                    random_area: tuple[float, float], random_aspect_ratio: tuple[float, float]) -> tuple[int, ...]:
    """(left, top, right, bottom): an area fraction drawn in random_area and an aspect ratio drawn
    log-uniformly in random_aspect_ratio, up to num_attempts times until the box fits; else the whole image
    (as legacy's random crop fell back to)."""
    area = width * height
    lo, hi = math.log(random_aspect_ratio[0]), math.log(random_aspect_ratio[1])
    for _ in range(num_attempts):
        target = area * rng.uniform(random_area[0], random_area[1])
        ratio = math.exp(rng.uniform(lo, hi))
        w = int(round(math.sqrt(target * ratio)))
        h = int(round(math.sqrt(target / ratio)))
        if 0 < w <= width and 0 < h <= height:
            left = int(rng.integers(0, width - w + 1))
            top = int(rng.integers(0, height - h + 1))
            return left, top, left + w, top + h
    return 0, 0, width, height


def resample(name: str, shrinking: bool) -> int:
    Image = require_pillow("flow.image.Resize")
    if name == "auto":  # area averaging when shrinking, bilinear when growing
        name = "area" if shrinking else "bilinear"
    return {"bilinear": Image.BILINEAR, "nearest_neighbor": Image.NEAREST, "bicubic": Image.BICUBIC,
            "area": Image.BOX}[name]


def resize(pixels: np.ndarray, width: int, height: int, interpolation: str) -> np.ndarray:
    """One uint8 (H, W, C) image resized to (height, width, C)."""
    Image = require_pillow("flow.image.Resize")
    h, w, c = pixels.shape
    if (h, w) == (height, width):  # Pillow would return a copy of the same pixels, at some cost per image
        return pixels
    method = resample(interpolation, width * height < w * h)
    if c == 1:
        out = Image.fromarray(pixels[:, :, 0]).resize((width, height), method)
        return np.asarray(out, dtype=np.uint8)[:, :, None]
    return np.asarray(Image.fromarray(pixels).resize((width, height), method), dtype=np.uint8)


def aspect_size(height: int, width: int, target: int, resize_longer: bool, min_size: int,
                max_size: int) -> tuple[int, int]:
    """(new height, new width) keeping the aspect ratio: the shorter (or longer) side becomes ``target``,
    unless that makes the longer side exceed ``max_size`` (or the shorter side fall below ``min_size``);
    0 turns either limit off."""
    short, long_ = min(height, width), max(height, width)
    if resize_longer:
        scale = target / long_
        if min_size > 0 and short * scale < min_size:
            scale = min_size / short
    else:
        scale = target / short
        if max_size > 0 and long_ * scale > max_size:
            scale = max_size / long_
    return max(1, int(round(height * scale))), max(1, int(round(width * scale)))
