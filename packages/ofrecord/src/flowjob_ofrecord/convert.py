"""Writing image classification data (MNIST) as OFRecord folders, as legacy's documentation programs read them.

Each record holds ``encoded`` (the image as PNG bytes, one bytes value) and ``class/label`` (int32), the
features of the documentation's ``img_to_ofrecord`` programs and the benchmarks' ImageNet records; with
``raw=True`` also ``images`` (float32 pixels / 255, a float list of H*W*C) and ``labels`` (int64), the
features of the "how to make an OFRecord dataset" program. Parts are written beside and renamed in; a
folder that held a data set before holds only the new one after (parts of the old one past the new
count are removed, so a reader never mixes the two: 2 parts written over 3 leave no part 2).

:func:`write_mnist_layout` also writes the two flat folders the documentation's programs read (``LAYOUTS``).
"""
from __future__ import annotations

import io
import logging
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator

import numpy as np

from flowjob_ofrecord import record_pb2 as pb
from flowjob_ofrecord.errors import require_pillow
from flowjob_ofrecord.files import part_name, write_part

log = logging.getLogger("flowjob.ofrecord")


def _write_parts(folder: str | os.PathLike, bounds: np.ndarray, records: Callable[[int, int], Iterator[pb.OFRecord]],
                 prefix: str, suffix_length: int) -> list[Path]:
    """Part ``n`` holds ``records(bounds[n], bounds[n + 1])``; then the folder's other parts of this naming
    (an earlier data set's, written with more parts) are removed."""
    paths = []
    for n in range(len(bounds) - 1):
        path = Path(folder) / part_name(n, prefix, suffix_length)
        write_part(path, records(int(bounds[n]), int(bounds[n + 1])))
        paths.append(path)
    digits = r"\d+" if suffix_length <= 0 else rf"\d{{{suffix_length}}}"
    ours = re.compile(re.escape(prefix) + digits)
    written = {p.name for p in paths}
    for stale in sorted(Path(folder).iterdir()):
        if ours.fullmatch(stale.name) and stale.name not in written and stale.is_file():
            stale.unlink()
            log.info("removed %s: a part of the data set %s held before", stale, folder)
    return paths


def png_bytes(image: np.ndarray) -> bytes:
    """One uint8 image (H, W) or (H, W, C) as PNG bytes (lossless, so decoding gives the pixels back)."""
    Image = require_pillow("writing OFRecord images")
    buf = io.BytesIO()
    Image.fromarray(np.ascontiguousarray(image)).save(buf, format="PNG")
    return buf.getvalue()


def image_record(image: np.ndarray, label: int, raw: bool = False, image_key: str = "encoded",
                 label_key: str = "class/label") -> pb.OFRecord:
    feature = {
        image_key: pb.Feature(bytes_list=pb.BytesList(value=[png_bytes(image)])),
        label_key: pb.Feature(int32_list=pb.Int32List(value=[int(label)])),
    }
    if raw:
        pixels = (np.asarray(image, np.float32) / np.float32(255)).ravel()
        feature["images"] = pb.Feature(float_list=pb.FloatList(value=pixels))
        feature["labels"] = pb.Feature(int64_list=pb.Int64List(value=[int(label)]))
    return pb.OFRecord(feature=feature)


def write_images(folder: str | os.PathLike, images: np.ndarray, labels: np.ndarray, parts: int = 1,
                 part_name_prefix: str = "part-", part_name_suffix_length: int = 5, raw: bool = False,
                 image_key: str = "encoded", label_key: str = "class/label") -> list[Path]:
    """Write ``images`` (N, H, W[, C] uint8) and ``labels`` (N,) as ``parts`` part files of about equal size,
    each record the image as PNG bytes under ``image_key`` and its int32 label under ``label_key``."""
    if raw and {image_key, label_key} & {"images", "labels"}:
        raise ValueError(f"raw records add float 'images' and int64 'labels' features, which {image_key!r} / "
                         f"{label_key!r} would overwrite")
    images, labels = np.asarray(images), np.asarray(labels)
    if images.dtype != np.uint8 or images.ndim not in (3, 4) or len(images) != len(labels):
        raise ValueError(f"images must be uint8 (N, H, W[, C]) with one label each, got {images.dtype} "
                         f"{images.shape} and {labels.shape} labels")
    if not (isinstance(parts, int) and 1 <= parts <= max(1, len(images))):
        raise ValueError(f"parts must be an int in [1, {max(1, len(images))}], got {parts!r}")
    def records(lo: int, hi: int) -> Iterator[pb.OFRecord]:
        for i in range(lo, hi):
            yield image_record(images[i], labels[i], raw, image_key, label_key)

    return _write_parts(folder, np.linspace(0, len(images), parts + 1).astype(int), records, part_name_prefix,
                        part_name_suffix_length)


def write_mnist(out_dir: str | os.PathLike, splits: dict[str, tuple[np.ndarray, np.ndarray]], parts: int = 1,
                raw: bool = False) -> dict[str, list[Path]]:
    """``out_dir/<split>/part-00000...`` for each split (``{"train": (x, y), "test": (x, y)}``)."""
    return {name: write_images(Path(out_dir) / name, x, y, parts=parts, raw=raw) for name, (x, y) in splits.items()}


def write_mnist_npz(npz: str | os.PathLike, out_dir: str | os.PathLike, parts: int = 1,
                    raw: bool = False) -> dict[str, list[Path]]:
    """Convert an ``mnist.npz`` (``x_train``, ``y_train``, ``x_test``, ``y_test``) to ``out_dir/train``, ``/test``."""
    with np.load(npz) as f:
        splits = {"train": (f["x_train"], f["y_train"]), "test": (f["x_test"], f["y_test"])}
    return write_mnist(out_dir, splits, parts=parts, raw=raw)


@dataclass(frozen=True)
class Layout:
    """Where the parts of an MNIST split go and what their records are called."""

    description: str
    image_key: str = "encoded"
    label_key: str = "class/label"
    suffix_length: int = 5
    default_parts: int = 1
    flat: bool = True  # one split's parts right in the folder, not under train/ and test/


LAYOUTS = {
    "splits": Layout("DIR/train/part-00000..., DIR/test/...: encoded (PNG) and class/label (int32)", flat=False),
    # of_data_pipeline.py reads "path/to/ImageNet/ofrecord" with data_part_num=1, part_name_suffix_length=5
    "flat": Layout("DIR/part-00000... of one split: encoded (PNG) and class/label (int32), as the ImageNet "
                   "records the documentation's of_data_pipeline.py reads"),
    # img2ofrecord.py writes part-0 ... part-4 (its --part_num default) holding images and labels, which
    # img_to_ofrecord/lenet_train.py reads with data_part_num=5, part_name_suffix_length=-1
    "img2ofrecord": Layout("DIR/part-0 ... part-4 of one split: images (PNG) and labels (int32), as the "
                           "documentation's img2ofrecord.py writes them for img_to_ofrecord/lenet_train.py",
                           image_key="images", label_key="labels", suffix_length=-1, default_parts=5),
}


def write_mnist_layout(npz: str | os.PathLike, out_dir: str | os.PathLike, layout: str = "splits",
                       parts: int | None = None, split: str = "train", raw: bool = False) -> list[Path]:
    """Convert an ``mnist.npz`` to OFRecord parts laid out as ``LAYOUTS[layout]`` says; the flat layouts
    hold ``split`` ("train" or "test") alone. ``parts=None`` takes the layout's default part count."""
    if layout not in LAYOUTS:
        raise ValueError(f"unknown OFRecord layout {layout!r}; one of {sorted(LAYOUTS)}")
    spec = LAYOUTS[layout]
    parts = spec.default_parts if parts is None else parts
    if not spec.flat:
        return [p for paths in write_mnist_npz(npz, out_dir, parts=parts, raw=raw).values() for p in paths]
    if split not in ("train", "test"):
        raise ValueError(f"split must be 'train' or 'test', got {split!r}")
    with np.load(npz) as f:
        images, labels = f[f"x_{split}"], f[f"y_{split}"]
    return write_images(out_dir, images, labels, parts=parts, part_name_suffix_length=spec.suffix_length, raw=raw,
                        image_key=spec.image_key, label_key=spec.label_key)


IMAGE_SUFFIXES = (".jpg", ".jpeg", ".png", ".bmp")


def image_folder_files(src: str | os.PathLike) -> tuple[list[str], list[tuple[Path, int]]]:
    """An ImageNet-style folder (one subfolder per class, image files inside): the class names in sorted
    order, whose index is the label, and every (file, label), sorted."""
    root = Path(src)
    if not root.is_dir():
        raise FileNotFoundError(f"image folder {str(root)!r} does not exist")
    classes = sorted(p.name for p in root.iterdir() if p.is_dir())
    files = [(f, label) for label, name in enumerate(classes) for f in sorted((root / name).iterdir())
             if f.is_file() and f.suffix.lower() in IMAGE_SUFFIXES]
    if not files:
        raise FileNotFoundError(f"image folder {str(root)!r} holds no class subfolder with {IMAGE_SUFFIXES} files")
    return classes, files


def write_image_folder(src: str | os.PathLike, out_dir: str | os.PathLike, parts: int = 1, shuffle_seed: int | None = 0,
                       part_name_prefix: str = "part-", part_name_suffix_length: int = 5) -> list[Path]:
    """Convert an ImageNet-style folder to OFRecord parts, as the benchmarks' ImageNet records are laid out:
    ``encoded`` (the file's bytes, not re-encoded), ``class/label`` (int32, the class's sorted index) and
    ``filename`` (bytes). Records are shuffled with ``shuffle_seed`` (None keeps the folder order), so that
    each part holds every class; the class names are written to ``out_dir/labels.txt``, one per line."""
    classes, files = image_folder_files(src)
    if shuffle_seed is not None:
        order = np.random.default_rng(shuffle_seed).permutation(len(files))
        files = [files[i] for i in order]
    if not (isinstance(parts, int) and 1 <= parts <= len(files)):
        raise ValueError(f"parts must be an int in [1, {len(files)}], got {parts!r}")
    def records(lo: int, hi: int) -> Iterator[pb.OFRecord]:
        for f, label in files[lo:hi]:
            yield pb.OFRecord(feature={
                "encoded": pb.Feature(bytes_list=pb.BytesList(value=[f.read_bytes()])),
                "class/label": pb.Feature(int32_list=pb.Int32List(value=[label])),
                "filename": pb.Feature(bytes_list=pb.BytesList(value=[f.name.encode()])),
            })

    paths = _write_parts(out_dir, np.linspace(0, len(files), parts + 1).astype(int), records, part_name_prefix,
                         part_name_suffix_length)
    labels = Path(out_dir) / "labels.txt"
    tmp = labels.with_name(".labels.txt.tmp")
    tmp.write_text("".join(f"{name}\n" for name in classes))
    os.replace(tmp, labels)  # written beside, renamed in, as the parts
    return paths
