"""``load_mnist`` with the legacy OneFlow signature, return value and batching."""

import os

import numpy as np

from flowjob_data.sources import DEFAULT_SHA256, DEFAULT_URL, locate_mnist

DATA_FORMATS = ("NCHW", "NHWC")

Split = tuple[np.ndarray, np.ndarray]


def _check_batch_size(name: str, value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value <= 0:
        raise ValueError(f"{name} must be a positive integer, got {value!r}")
    return int(value)


def batch_split(x: np.ndarray, y: np.ndarray, batch_size: int, data_format: str,
                arg_name: str = "batch_size") -> Split:
    """Scale uint8 images to float32 x/255 and cut images and labels into batches.

    Images become (N/B, B, 1, H, W) for NCHW or (N/B, B, H, W, 1) for NHWC; labels
    int32 (N/B, B). Order is kept (no shuffling), as in legacy OneFlow.
    """
    n = x.shape[0]
    if n % batch_size:
        raise ValueError(f"{arg_name}={batch_size} does not divide the {n} images of the split")
    images = x.astype(np.float32) / np.float32(255)
    h, w = x.shape[1], x.shape[2]
    if data_format == "NCHW":
        images = images.reshape((-1, batch_size, 1, h, w))
    elif data_format == "NHWC":
        images = images.reshape((-1, batch_size, h, w, 1))
    else:
        raise ValueError(f"data_format must be one of {DATA_FORMATS}, got {data_format!r}")
    labels = y.astype(np.int32).reshape((-1, batch_size))
    return images, labels


def load_mnist(
    train_batch_size: int = 100,
    test_batch_size: int = 100,
    data_format: str = "NCHW",
    url: str | None = DEFAULT_URL,
    hash_check: str | None = DEFAULT_SHA256,
    out_dir: str | os.PathLike[str] | None = ".",
) -> tuple[Split, Split]:
    """Legacy ``flow.data.load_mnist``: ``(train_images, train_labels), (test_images, test_labels)``.

    See ``flowjob_data.sources.locate_mnist`` for where the data comes from.
    """
    # Argument errors are raised before any file or network access.
    train_b = _check_batch_size("train_batch_size", train_batch_size)
    test_b = _check_batch_size("test_batch_size", test_batch_size)
    if data_format not in DATA_FORMATS:
        raise ValueError(f"data_format must be one of {DATA_FORMATS}, got {data_format!r}")
    _, data = locate_mnist(out_dir, url, hash_check)
    train = batch_split(data.x_train, data.y_train, train_b, data_format, "train_batch_size")
    test = batch_split(data.x_test, data.y_test, test_b, data_format, "test_batch_size")
    return train, test
