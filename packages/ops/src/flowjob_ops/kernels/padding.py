"""Window geometry shared by the conv and pool kernels.

* argument normalization (``normalize_pair`` for ksize / strides / dilation),
* padding resolution (``resolve_padding``): ``"SAME"`` (legacy OneFlow's reading,
  ``"SAME_LOWER"``), ``"SAME_UPPER"`` (TensorFlow's), ``"VALID"`` or explicit pads,
* ``Window2d``: the resolved geometry plus the strided slice of every kernel
  tap, the building block of all kernels here,
* ``as_strided``: ``xp.lib.stride_tricks.as_strided`` for numpy *and* cupy.

Error messages raised here are shown to users by the op layer, so they name the
offending argument and repeat its value.
"""

from __future__ import annotations

import numbers
from dataclasses import dataclass
from typing import Any, Iterator, Sequence

Pair = tuple[int, int]
Pads = tuple[Pair, Pair]  # ((top, bottom), (left, right))

DATA_FORMATS = ("NCHW", "NHWC")
# Position of the (H, W) axes in a 4-d activation of each data format.
SPATIAL_AXES: dict[str, Pair] = {"NCHW": (2, 3), "NHWC": (1, 2)}
_FORMAT_ALIASES = {"CHANNELS_FIRST": "NCHW", "CHANNELS_LAST": "NHWC"}
_SAME_MODES = ("SAME", "SAME_UPPER", "SAME_LOWER")


def check_data_format(data_format: str) -> str:
    """Return the canonical data format ("NCHW" or "NHWC")."""
    fmt = str(data_format).upper()
    fmt = _FORMAT_ALIASES.get(fmt, fmt)
    if fmt not in DATA_FORMATS:
        raise ValueError(
            f"data_format must be 'NCHW' or 'NHWC' (or 'channels_first' / "
            f"'channels_last'), got {data_format!r}"
        )
    return fmt


def _is_seq(v: Any) -> bool:
    # Lists, tuples and 1-d arrays, but not strings.
    return not isinstance(v, (str, bytes)) and hasattr(v, "__len__") and hasattr(v, "__getitem__")


def _as_int(v: Any, name: str) -> int:
    # bool is an Integral, but `strides=True` is a bug, never a stride of 1.
    if isinstance(v, bool) or not isinstance(v, numbers.Integral):
        raise ValueError(f"{name} must contain ints, got {v!r} ({type(v).__name__})")
    return int(v)


def normalize_pair(v: int | Sequence[int], name: str, minimum: int = 1) -> Pair:
    """Normalize an int-or-(h, w) argument such as ksize, strides or dilation.

    Raises ValueError naming ``name`` when ``v`` is not an int or a pair of
    ints, or when an entry is below ``minimum``.
    """
    if isinstance(v, numbers.Integral) and not isinstance(v, bool):
        pair = (int(v), int(v))
    elif _is_seq(v) and len(v) in (1, 2):
        vals = [_as_int(e, name) for e in v]
        pair = (vals[0], vals[-1])
    else:
        raise ValueError(f"{name} must be an int or a pair of ints (h, w), got {v!r}")
    if min(pair) < minimum:
        raise ValueError(f"{name} must be >= {minimum} in every dimension, got {v!r}")
    return pair


def _pad_pair(v: Any, name: str) -> Pair:
    """A (before, after) pair from an int or a 2-sequence; entries must be >= 0."""
    if isinstance(v, numbers.Integral) and not isinstance(v, bool):
        pair = (int(v), int(v))
    elif _is_seq(v) and len(v) == 2:
        pair = (_as_int(v[0], name), _as_int(v[1], name))
    else:
        raise ValueError(f"{name} must be an int or a (before, after) pair, got {v!r}")
    if min(pair) < 0:
        raise ValueError(f"{name} must be non-negative, got {v!r}")
    return pair


def _explicit_pads(padding: Any, data_format: str) -> Pads:
    """Parse explicit pads: int, (ph, pw), ((t, b), (l, r)) or 4 per-dim pairs."""
    if isinstance(padding, numbers.Integral) and not isinstance(padding, bool):
        p = _pad_pair(padding, "padding")
        return (p, p)
    if _is_seq(padding):
        items = list(padding)
        if len(items) == 4:
            # Legacy layout: one (before, after) pair per dim in data_format order.
            fmt = check_data_format(data_format)
            pairs = [_pad_pair(p, "padding") for p in items]
            ah, aw = SPATIAL_AXES[fmt]
            for axis in range(4):
                if axis not in (ah, aw) and pairs[axis] != (0, 0):
                    raise ValueError(
                        f"padding {padding!r} pads the {fmt[axis]} dimension of a "
                        f"{fmt} tensor; only H and W may be padded (use [0, 0] there)"
                    )
            return (pairs[ah], pairs[aw])
        if len(items) == 2:
            return (_pad_pair(items[0], "padding"), _pad_pair(items[1], "padding"))
    raise ValueError(
        f"padding must be 'SAME', 'SAME_UPPER', 'SAME_LOWER', 'VALID', an int, a "
        f"pair (ph, pw), two (before, after) pairs or four per-dimension pairs, "
        f"got {padding!r}"
    )


def _same_pads(mode: str, size: int, k: int, s: int, d: int) -> Pair:
    """(before, after) pads giving an output of ceil(size / s).

    An odd total leaves one pixel over: "SAME_UPPER" puts it after (TensorFlow),
    "SAME_LOWER" before.  Plain "SAME" is "SAME_LOWER" because legacy OneFlow's
    nn.conv1d/2d/3d and pools rewrite "SAME" to "SAME_LOWER" before the op sees it;
    this only matters for odd totals (even kernels, or stride > 1).
    """
    out = -(-size // s)
    total = max((out - 1) * s + (k - 1) * d + 1 - size, 0)
    small = total // 2
    return (small, total - small) if mode == "SAME_UPPER" else (total - small, small)


def resolve_padding(
    padding: Any,
    in_hw: Sequence[int],
    ksize: int | Sequence[int],
    strides: int | Sequence[int] = 1,
    dilation: int | Sequence[int] = 1,
    data_format: str = "NCHW",
) -> tuple[Pads, Pair]:
    """Resolve ``padding`` to explicit pads and compute the output spatial size.

    Returns ``(((top, bottom), (left, right)), (out_h, out_w))``.  ``padding``
    is "SAME" (= "SAME_LOWER" as legacy OneFlow: an odd total's extra pixel at
    the beginning), "SAME_UPPER" (extra pixel at the end, TensorFlow's "SAME")
    or "VALID" in any case; an int; a pair (ph, pw); two (before, after) pairs; or four
    per-dimension pairs in ``data_format`` order (legacy:
    ``[[0, 0], [0, 0], [1, 1], [1, 1]]`` for NCHW).
    """
    in_h, in_w = normalize_pair(tuple(in_hw), "input spatial size (H, W)")
    kh, kw = normalize_pair(ksize, "ksize")
    sh, sw = normalize_pair(strides, "strides")
    dh, dw = normalize_pair(dilation, "dilation")
    if isinstance(padding, str):
        mode = padding.upper()
        if mode == "VALID":
            pads: Pads = ((0, 0), (0, 0))
        elif mode in _SAME_MODES:
            pads = (_same_pads(mode, in_h, kh, sh, dh), _same_pads(mode, in_w, kw, sw, dw))
        else:
            raise ValueError(
                f"padding must be 'SAME', 'SAME_UPPER', 'SAME_LOWER' or 'VALID' "
                f"(case-insensitive) or explicit pads, got {padding!r}"
            )
    else:
        pads = _explicit_pads(padding, data_format)
    eff_h, eff_w = (kh - 1) * dh + 1, (kw - 1) * dw + 1
    out_h = (in_h + pads[0][0] + pads[0][1] - eff_h) // sh + 1
    out_w = (in_w + pads[1][0] + pads[1][1] - eff_w) // sw + 1
    if out_h <= 0 or out_w <= 0:
        ph, pw = in_h + pads[0][0] + pads[0][1], in_w + pads[1][0] + pads[1][1]
        raise ValueError(
            f"the output would be empty: padding {padding!r} gives a {ph}x{pw} padded "
            f"input (input {in_h}x{in_w}, pads {pads}), smaller than the kernel extent "
            f"{eff_h}x{eff_w} (ksize {kh}x{kw}, dilation {dh}x{dw})"
        )
    return pads, (out_h, out_w)


@dataclass(frozen=True)
class Window2d:
    """Resolved geometry of a 2-D sliding window over an (H, W) plane."""

    in_hw: Pair
    ksize: Pair
    strides: Pair
    dilation: Pair
    pads: Pads
    out_hw: Pair

    @classmethod
    def create(
        cls,
        in_hw: Sequence[int],
        ksize: int | Sequence[int],
        strides: int | Sequence[int] = 1,
        dilation: int | Sequence[int] = 1,
        pads: Any = 0,
        data_format: str = "NCHW",
    ) -> "Window2d":
        """Validate the arguments (pads may be anything ``resolve_padding`` takes)."""
        resolved, out_hw = resolve_padding(pads, in_hw, ksize, strides, dilation, data_format)
        return cls(
            in_hw=(int(in_hw[0]), int(in_hw[1])),
            ksize=normalize_pair(ksize, "ksize"),
            strides=normalize_pair(strides, "strides"),
            dilation=normalize_pair(dilation, "dilation"),
            pads=resolved,
            out_hw=out_hw,
        )

    @property
    def has_padding(self) -> bool:
        return any(self.pads[0]) or any(self.pads[1])

    @property
    def padded_hw(self) -> Pair:
        (t, b), (l, r) = self.pads
        return (self.in_hw[0] + t + b, self.in_hw[1] + l + r)

    @property
    def interior(self) -> tuple[slice, slice]:
        """Slices of the unpadded input inside the padded plane."""
        (t, _), (l, _) = self.pads
        return slice(t, t + self.in_hw[0]), slice(l, l + self.in_hw[1])

    @property
    def non_overlapping(self) -> bool:
        """True when no input position is covered by two taps of different windows."""
        (kh, kw), (sh, sw), (dh, dw) = self.ksize, self.strides, self.dilation
        return (kh - 1) * dh + 1 <= sh and (kw - 1) * dw + 1 <= sw

    @property
    def tiles(self) -> bool:
        """True when the windows tile the padded plane: each position is read exactly once."""
        return all(
            d == 1 and k == s and p == o * s
            for k, s, d, p, o in zip(self.ksize, self.strides, self.dilation, self.padded_hw, self.out_hw)
        )

    def taps(self) -> Iterator[Pair]:
        """Kernel taps (i, j) in row-major window order."""
        for i in range(self.ksize[0]):
            for j in range(self.ksize[1]):
                yield i, j

    def tap(self, i: int, j: int) -> tuple[slice, slice]:
        """Slices of the padded plane that tap (i, j) reads for all output pixels."""
        (oh, ow), (sh, sw), (dh, dw) = self.out_hw, self.strides, self.dilation
        return (
            slice(i * dh, i * dh + (oh - 1) * sh + 1, sh),
            slice(j * dw, j * dw + (ow - 1) * sw + 1, sw),
        )


def spatial_index(data_format: str, hs: slice, ws: slice) -> tuple[slice, ...]:
    """A 4-d index applying (hs, ws) to the spatial axes of ``data_format``."""
    if data_format == "NCHW":
        return (slice(None), slice(None), hs, ws)
    return (slice(None), hs, ws, slice(None))


def as_strided(xp: Any, a: Any, shape: Sequence[int], strides: Sequence[int]) -> Any:
    """``xp.lib.stride_tricks.as_strided`` (numpy and cupy both provide it)."""
    tricks = getattr(getattr(xp, "lib", None), "stride_tricks", None)
    if tricks is None:
        raise RuntimeError(f"array module {getattr(xp, '__name__', xp)!r} lacks lib.stride_tricks")
    return tricks.as_strided(a, shape=tuple(shape), strides=tuple(strides))
