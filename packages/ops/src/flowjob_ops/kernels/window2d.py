"""The 2-D face of the window geometry (``kernels.window``), in the names the 2-D kernels use.

* ``normalize_pair`` for ksize / strides / dilation,
* ``resolve_padding``: "SAME" (legacy OneFlow's reading, "SAME_LOWER"), "SAME_UPPER" (TensorFlow's),
  "VALID" or explicit pads, to the pads and the output size,
* ``Window2d``: ``window.Window`` over an (H, W) plane with the 2-D names (``in_hw``, ``out_hw``, ...),
* ``as_strided``: ``xp.lib.stride_tricks.as_strided`` for numpy *and* cupy.

Error messages raised here are shown to users by the op layer, so they name the
offending argument and repeat its value.
"""

from __future__ import annotations

from typing import Any, Sequence

from .window import FORMATS, Window, as_strided, check_format, same_pads, spatial_ints

Pair = tuple[int, int]
Pads = tuple[Pair, Pair]  # ((top, bottom), (left, right))

__all__ = ["DATA_FORMATS", "SPATIAL_AXES", "Window2d", "as_strided", "check_data_format", "normalize_pair",
           "resolve_padding", "spatial_index"]

DATA_FORMATS = FORMATS[2]
# Position of the (H, W) axes in a 4-d activation of each data format.
SPATIAL_AXES: dict[str, Pair] = {"NCHW": (2, 3), "NHWC": (1, 2)}
_same_pads = same_pads  # the reading of "SAME" (the tests' reference pads use it)


def check_data_format(data_format: str) -> str:
    """Return the canonical data format ("NCHW" or "NHWC")."""
    return check_format(data_format, 2)


def normalize_pair(v: int | Sequence[int], name: str, minimum: int = 1) -> Pair:
    """Normalize an int-or-(h, w) argument such as ksize, strides or dilation.

    Raises ValueError naming ``name`` when ``v`` is not an int or a pair of
    ints, or when an entry is below ``minimum``.
    """
    h, w = spatial_ints(v, 2, name, minimum)
    return (h, w)


class Window2d(Window):
    """``Window`` over an (H, W) plane, with the 2-D names."""

    @classmethod
    def create(cls, in_size: Sequence[int], ksize: Any, strides: Any = 1, dilations: Any = 1, padding: Any = 0,
               data_format: str | None = "NCHW", dilation_name: str = "dilation") -> "Window2d":
        """Validate the arguments (pads may be anything ``resolve_padding`` takes)."""
        normalize_pair(tuple(in_size), "input spatial size (H, W)")
        window = super().create(in_size, ksize, strides, dilations, padding, data_format, dilation_name)
        assert isinstance(window, Window2d)
        return window

    @property
    def in_hw(self) -> Pair:
        return (self.in_size[0], self.in_size[1])

    @property
    def out_hw(self) -> Pair:
        return (self.out_size[0], self.out_size[1])

    @property
    def padded_hw(self) -> Pair:
        h, w = self.padded_size
        return (h, w)

    @property
    def dilation(self) -> Pair:
        return (self.dilations[0], self.dilations[1])


def resolve_padding(padding: Any, in_hw: Sequence[int], ksize: int | Sequence[int], strides: int | Sequence[int] = 1,
                    dilation: int | Sequence[int] = 1, data_format: str = "NCHW") -> tuple[Pads, Pair]:
    """Resolve ``padding`` to explicit pads and compute the output spatial size.

    Returns ``(((top, bottom), (left, right)), (out_h, out_w))``.  ``padding``
    is "SAME" (= "SAME_LOWER" as legacy OneFlow: an odd total's extra pixel at
    the beginning), "SAME_UPPER" (extra pixel at the end, TensorFlow's "SAME")
    or "VALID" in any case; an int; a pair (ph, pw); two (before, after) pairs; or four
    per-dimension pairs in ``data_format`` order (legacy:
    ``[[0, 0], [0, 0], [1, 1], [1, 1]]`` for NCHW).
    """
    window = Window2d.create(tuple(in_hw), ksize, strides, dilation, padding, data_format)
    top, left = window.pads
    return (top, left), window.out_hw


def spatial_index(data_format: str, hs: slice, ws: slice) -> tuple[slice, ...]:
    """A 4-d index applying (hs, ws) to the spatial axes of ``data_format``."""
    if data_format == "NCHW":
        return (slice(None), slice(None), hs, ws)
    return (slice(None), hs, ws, slice(None))
