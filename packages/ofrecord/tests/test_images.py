"""Random crop boxes and the Pillow extra."""
from __future__ import annotations

import sys

import numpy as np
import pytest

from flowjob_core import MissingPackageError
from flowjob_ofrecord.errors import require_pillow
from flowjob_ofrecord.images import check_color_space, random_crop_box


def test_random_crop_boxes_fit_and_follow_area_and_ratio() -> None:
    rng = np.random.default_rng(0)
    for _ in range(200):
        left, top, right, bottom = random_crop_box(64, 48, rng, 10, (0.3, 0.6), (0.75, 1.333333))
        w, h = right - left, bottom - top
        assert 0 <= left < right <= 64 and 0 <= top < bottom <= 48
        assert 0.3 * 64 * 48 * 0.9 <= w * h <= 0.6 * 64 * 48 * 1.1  # rounding of both sides
        assert 0.75 * 0.9 <= w / h <= 1.333333 * 1.1


def test_random_crop_falls_back_to_the_whole_image() -> None:
    # a 100x1 image cannot hold any crop of ratio near 1 and half its area: the whole image
    rng = np.random.default_rng(0)
    assert random_crop_box(100, 1, rng, 5, (0.5, 0.5), (0.9, 1.1)) == (0, 0, 100, 1)


def test_crops_repeat_with_the_seed() -> None:
    def boxes(seed):
        rng = np.random.default_rng(seed)
        return [random_crop_box(50, 40, rng, 10, (0.08, 1.0), (0.75, 1.333333)) for _ in range(20)]

    assert boxes(3) == boxes(3) != boxes(4)


def test_color_spaces() -> None:
    assert check_color_space("rgb") == "RGB"
    with pytest.raises(ValueError, match="color_space must be one of"):
        check_color_space("HSV")


def test_missing_pillow_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "PIL", None)  # import PIL now fails as when Pillow is absent
    with pytest.raises(MissingPackageError, match=r"decoding images .*pip install 'flowjob-ofrecord\[image\]'"):
        require_pillow("decoding images")


def test_parallel_map_keeps_order_and_raises_the_first_error() -> None:
    from flowjob_ofrecord.images import parallel_map

    assert parallel_map(lambda x: x * x, range(50)) == [x * x for x in range(50)]

    def fail(x):
        if x in (7, 30):
            raise ValueError(f"bad {x}")
        return x

    with pytest.raises(ValueError, match="bad 7"):
        parallel_map(fail, range(50))


def test_small_batches_stay_on_the_calling_thread(monkeypatch: pytest.MonkeyPatch) -> None:
    import threading

    from flowjob_ofrecord import images

    monkeypatch.setattr(images, "THREADS", 2)
    me = threading.current_thread().name
    who = lambda _: threading.current_thread().name  # noqa: E731
    assert set(images.parallel_map(who, range(8), pixels=images.SMALL_BATCH_PIXELS - 1)) == {me}
    assert me not in images.parallel_map(who, range(8), pixels=images.SMALL_BATCH_PIXELS)
    assert me not in images.parallel_map(who, range(8))  # size unknown: the pool


def test_resize_to_the_same_size_gives_the_pixels_back() -> None:
    from flowjob_ofrecord.images import resize

    pixels = np.random.default_rng(0).integers(0, 256, (5, 7, 3), np.uint8)
    for interpolation in ("auto", "bilinear", "bicubic", "area", "nearest_neighbor"):
        np.testing.assert_array_equal(resize(pixels, 7, 5, interpolation), pixels)
    assert resize(pixels, 7, 6, "bilinear").shape == (6, 7, 3)


def test_an_image_already_in_the_color_space_is_not_converted() -> None:
    from PIL import Image

    from flowjob_ofrecord.images import to_array

    gray = np.arange(12, dtype=np.uint8).reshape(3, 4)
    np.testing.assert_array_equal(to_array(Image.fromarray(gray), "GRAY"), gray[:, :, None])
    rgb = to_array(Image.fromarray(gray), "RGB")
    assert rgb.shape == (3, 4, 3) and (rgb == gray[:, :, None]).all()
    color = np.random.default_rng(1).integers(0, 256, (3, 4, 3), np.uint8)
    np.testing.assert_array_equal(to_array(Image.fromarray(color), "BGR"), color[:, :, ::-1])
