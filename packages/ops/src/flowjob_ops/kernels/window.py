"""The sliding window of convolution and pooling over any number of spatial axes (1, 2 or 3): one geometry
for every rank.

* data formats: channels first (``NCW``, ``NCHW``, ``NCDHW``: N, C, then the spatial axes) or channels
  last (``NWC``, ``NHWC``, ``NDHWC``), also spelled "channels_first" / "channels_last";
* ksize, strides and dilations: an int, or a sequence of 1 or ``rank`` ints;
* padding: "SAME" (legacy OneFlow's reading, "SAME_LOWER": an odd total's extra element before, because
  legacy's conv and pool functions rewrite "SAME" to "SAME_LOWER" before the op sees it), "SAME_UPPER"
  (TensorFlow's), "VALID" (any case), an int, ``rank`` spatial entries (ints or (before, after) pairs),
  or ``rank + 2`` (before, after) pairs in data-format order whose batch and channel pairs are 0;
* ``Window``: the resolved geometry (pads, output size) and the strided slice of every kernel tap, the
  building block of every conv and pool kernel.

Error messages are shown to users by the op layer: they name the argument and repeat its value.
"""
from __future__ import annotations

import numbers
from dataclasses import dataclass
from typing import Any, Iterator, Sequence

FORMATS: dict[int, tuple[str, str]] = {1: ("NCW", "NWC"), 2: ("NCHW", "NHWC"), 3: ("NCDHW", "NDHWC")}
"""rank -> (channels-first, channels-last) data format."""
_SAME_MODES = ("SAME", "SAME_LOWER", "SAME_UPPER")
_AXES = {1: "w", 2: "h, w", 3: "d, h, w"}


def check_format(data_format: Any, rank: int) -> str:
    """The canonical data format of ``rank`` spatial axes ("channels_first" / "channels_last" accepted)."""
    first, last = FORMATS[rank]
    fmt = str(data_format).upper()
    fmt = {"CHANNELS_FIRST": first, "CHANNELS_LAST": last}.get(fmt, fmt)
    if fmt not in (first, last):
        raise ValueError(f"data_format must be '{first}' or '{last}' (or 'channels_first' / 'channels_last'), "
                         f"got {data_format!r}")
    return fmt


def channels_last(fmt: str) -> bool:
    return fmt.endswith("C")


def spatial_axes(fmt: str) -> tuple[int, ...]:
    """The spatial axes of an array in ``fmt``."""
    rank = len(fmt) - 2
    return tuple(range(1, rank + 1)) if channels_last(fmt) else tuple(range(2, rank + 2))


def is_sequence(v: Any) -> bool:
    """Lists, tuples and 1-d arrays, but not strings."""
    return not isinstance(v, (str, bytes)) and hasattr(v, "__len__") and hasattr(v, "__getitem__")


def is_int(v: Any) -> bool:
    # bool is an Integral, but `strides=True` is a bug, never a stride of 1
    return isinstance(v, numbers.Integral) and not isinstance(v, bool)


def _as_int(v: Any, name: str) -> int:
    if not is_int(v):
        raise ValueError(f"{name} must contain ints, got {v!r} ({type(v).__name__})")
    return int(v)


def spatial_ints(value: Any, rank: int, name: str, minimum: int = 1) -> tuple[int, ...]:
    """An int, or a sequence of 1 or ``rank`` ints, as ``rank`` ints (ksize, strides, dilations)."""
    if is_int(value):
        items = (int(value),) * rank
    elif is_sequence(value) and len(value) in (1, rank):
        ints = [_as_int(e, name) for e in value]
        items = tuple(ints) * rank if len(ints) == 1 else tuple(ints)
    else:
        form = "a pair of ints" if rank == 2 else f"a list of 1 or {rank} ints"
        raise ValueError(f"{name} must be an int or {form} ({_AXES[rank]}), got {value!r}")
    if min(items) < minimum:
        raise ValueError(f"{name} must be >= {minimum} in every dimension, got {value!r}")
    return items


def _pad_pair(v: Any) -> tuple[int, int]:
    if is_int(v):
        pair = (int(v), int(v))
    elif is_sequence(v) and len(v) == 2:
        pair = (_as_int(v[0], "padding"), _as_int(v[1], "padding"))
    else:
        raise ValueError(f"padding must be an int or a (before, after) pair, got {v!r}")
    if min(pair) < 0:
        raise ValueError(f"padding must be non-negative, got {v!r}")
    return pair


def explicit_pads(padding: Any, rank: int, fmt: str) -> tuple[tuple[int, int], ...]:
    """``rank`` spatial (before, after) pairs from an int, ``rank`` entries, or ``rank + 2`` pairs in
    ``fmt`` order whose batch and channel pairs are 0."""
    if is_int(padding):
        return (_pad_pair(padding),) * rank
    if is_sequence(padding) and len(padding) in (rank, rank + 2):
        pairs = [_pad_pair(p) for p in padding]
        if len(pairs) == rank:
            return tuple(pairs)
        spatial = spatial_axes(check_format(fmt, rank))
        for axis, pair in enumerate(pairs):
            if axis not in spatial and pair != (0, 0):
                *most, last = (fmt[a] for a in spatial)
                only = f"{', '.join(most)} and {last}" if most else last
                raise ValueError(f"padding {padding!r} pads the {fmt[axis]} dimension of a {fmt} tensor; only "
                                 f"{only} may be padded (use [0, 0] there)")
        return tuple(pairs[a] for a in spatial)
    raise ValueError(f"padding must be 'SAME', 'SAME_LOWER', 'SAME_UPPER', 'VALID', an int, {rank} spatial "
                     f"entries (ints or (before, after) pairs) or {rank + 2} per-dimension pairs in {fmt} order, "
                     f"got {padding!r}")


def same_pads(mode: str, size: int, k: int, s: int, d: int) -> tuple[int, int]:
    """(before, after) pads giving an output of ceil(size / s); an odd total's extra element goes after for
    "SAME_UPPER", before otherwise (legacy's "SAME" is "SAME_LOWER")."""
    out = -(-size // s)
    total = max((out - 1) * s + (k - 1) * d + 1 - size, 0)
    small = total // 2
    return (small, total - small) if mode == "SAME_UPPER" else (total - small, small)


def _by(values: Sequence[int]) -> str:
    return "x".join(str(v) for v in values)


@dataclass(frozen=True)
class Window:
    """A validated window over ``len(in_size)`` spatial axes."""

    in_size: tuple[int, ...]
    ksize: tuple[int, ...]
    strides: tuple[int, ...]
    dilations: tuple[int, ...]
    pads: tuple[tuple[int, int], ...]
    out_size: tuple[int, ...]

    @classmethod
    def create(cls, in_size: Sequence[int], ksize: Any, strides: Any = 1, dilations: Any = 1, padding: Any = "VALID",
               data_format: str | None = None, dilation_name: str = "dilations") -> "Window":
        """Validate the arguments; ``data_format`` (default channels first) reads ``rank + 2`` explicit pads."""
        rank = len(in_size)
        fmt = check_format(data_format if data_format is not None else FORMATS[rank][0], rank)
        size = tuple(int(v) for v in in_size)
        k = spatial_ints(ksize, rank, "ksize")
        s = spatial_ints(strides, rank, "strides")
        d = spatial_ints(dilations, rank, dilation_name)
        if isinstance(padding, str):
            mode = padding.upper()
            if mode == "VALID":
                pads: tuple[tuple[int, int], ...] = ((0, 0),) * rank
            elif mode in _SAME_MODES:
                pads = tuple(same_pads(mode, size[i], k[i], s[i], d[i]) for i in range(rank))
            else:
                raise ValueError(f"padding must be 'SAME', 'SAME_UPPER', 'SAME_LOWER' or 'VALID' (case-insensitive) "
                                 f"or explicit pads, got {padding!r}")
        else:
            pads = explicit_pads(padding, rank, fmt)
        extent = tuple((k[i] - 1) * d[i] + 1 for i in range(rank))
        padded = tuple(size[i] + sum(pads[i]) for i in range(rank))
        out = tuple((padded[i] - extent[i]) // s[i] + 1 for i in range(rank))
        if min(out) <= 0:
            raise ValueError(f"the output would be empty: padding {padding!r} gives a {_by(padded)} padded input "
                             f"(input {_by(size)}, pads {pads}), smaller than the kernel extent {_by(extent)} "
                             f"(ksize {_by(k)}, {dilation_name} {_by(d)})")
        return cls(size, k, s, d, pads, out)

    @property
    def rank(self) -> int:
        return len(self.in_size)

    @property
    def padded_size(self) -> tuple[int, ...]:
        return tuple(n + b + a for n, (b, a) in zip(self.in_size, self.pads))

    @property
    def has_padding(self) -> bool:
        return any(b or a for b, a in self.pads)

    @property
    def interior(self) -> tuple[slice, ...]:
        """The unpadded input inside the padded spatial block."""
        return tuple(slice(b, b + n) for n, (b, _) in zip(self.in_size, self.pads))

    @property
    def non_overlapping(self) -> bool:
        """True when no input position is covered by taps of two different windows."""
        return all((k - 1) * d + 1 <= s for k, d, s in zip(self.ksize, self.dilations, self.strides))

    @property
    def tiles(self) -> bool:
        """True when the windows tile the padded block: each position is read exactly once."""
        return all(d == 1 and k == s and p == o * s for k, s, d, p, o in
                   zip(self.ksize, self.strides, self.dilations, self.padded_size, self.out_size))

    def taps(self) -> Iterator[tuple[int, ...]]:
        """Kernel taps in row-major window order (the order "first maximum" refers to)."""
        def walk(prefix: tuple[int, ...]) -> Iterator[tuple[int, ...]]:
            if len(prefix) == len(self.ksize):
                yield prefix
                return
            for t in range(self.ksize[len(prefix)]):
                yield from walk(prefix + (t,))
        return walk(())

    def tap(self, *offsets: int) -> tuple[slice, ...]:
        """Slices of the padded spatial block that one tap reads for every output position."""
        return tuple(slice(t * d, t * d + (o - 1) * s + 1, s)
                     for t, d, o, s in zip(offsets, self.dilations, self.out_size, self.strides))


def spatial_index(last: bool, spatial: Sequence[slice]) -> tuple[slice, ...]:
    """An index applying ``spatial`` to the spatial axes of an (N, C, ...) or (N, ..., C) array."""
    whole = slice(None)
    return (whole, *spatial, whole) if last else (whole, whole, *spatial)


def with_spatial(shape: Sequence[int], last: bool, spatial: Sequence[int]) -> tuple[int, ...]:
    """``shape`` (N, C, ...) or (N, ..., C) with its spatial sizes replaced."""
    n, c = shape[0], shape[-1] if last else shape[1]
    return (n, *spatial, c) if last else (n, c, *spatial)


def as_strided(xp: Any, a: Any, shape: Sequence[int], strides: Sequence[int]) -> Any:
    """``xp.lib.stride_tricks.as_strided`` (numpy and cupy both provide it)."""
    tricks = getattr(getattr(xp, "lib", None), "stride_tricks", None)
    if tricks is None:
        raise RuntimeError(f"array module {getattr(xp, '__name__', xp)!r} lacks lib.stride_tricks")
    return tricks.as_strided(a, shape=tuple(shape), strides=tuple(strides))
