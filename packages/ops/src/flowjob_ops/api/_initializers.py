"""The initializer values ``flow.get_variable`` calls (``api.initializers`` makes them under legacy's names;
the layers take their defaults from here), and legacy ``InitializerConf`` messages read as them.

An initializer is a callable ``init(shape, dtype, rng) -> numpy.ndarray`` (the contract of
``flow.get_variable``): it draws from ``rng``, the session's per-variable generator, unless it
has its own seed (``seed=`` where legacy had one, or ``with_seed`` which
``get_variable(random_seed=...)`` calls). Values are drawn in float64 and cast, so a variable
starts from the same numbers whatever its floating dtype.

``init.piece(shape, dtype, rng, axis, start, stop)`` gives rows ``[start, stop)`` along ``axis`` of what
``init(shape, dtype, rng)`` gives, without the whole in memory: a variable split over ranks draws only its rank's
piece (``flowjob_core.runtime.variables``). The random ones walk the generator's stream in C order, a chunk at
a time, keeping the piece's values (the stream is the same drawn whole or in chunks).

Fans follow legacy ``_CalcFan``: a 2-d weight (out, in) has fan_in = in and fan_out = out;
a conv weight has fan_in = prod(shape[1:]) and fan_out = shape[0] times its spatial size,
which is shape[2:] for channels_first (NCHW: F, C, kh, kw) and shape[1:-1] for channels_last
(NHWC: F, kh, kw, C).
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np


_DISTRIBUTIONS = ("truncated_normal", "random_normal", "random_uniform")


_MODES = ("fan_in", "fan_out", "fan_avg")


@dataclass(frozen=True)
class Initializer:
    """Base of the initializers: seeding, dtype handling and the call contract."""

    seed: int | None = dataclasses.field(default=None, kw_only=True)

    def __call__(self, shape: Sequence[int], dtype: Any, rng: np.random.Generator | None = None) -> np.ndarray:
        shape, dtype = tuple(int(d) for d in shape), np.dtype(dtype)
        if self.seed is not None or rng is None:
            rng = np.random.default_rng(self.seed)
        return np.asarray(self.sample(shape, dtype, rng)).astype(dtype, copy=False)

    def with_seed(self, seed: int | None) -> "Initializer":
        """A copy drawing from its own ``np.random.default_rng(seed)``."""
        return dataclasses.replace(self, seed=seed)

    def piece(self, shape: Sequence[int], dtype: Any, rng: np.random.Generator | None, axis: int, start: int,
              stop: int) -> np.ndarray:
        """Rows ``[start, stop)`` along ``axis`` of ``self(shape, dtype, rng)``, drawn without the whole."""
        shape, dtype = tuple(int(d) for d in shape), np.dtype(dtype)
        if not 0 <= axis < len(shape) or not 0 <= start <= stop <= shape[axis]:
            raise ValueError(f"initializer piece: rows [{start}, {stop}) of axis {axis} are outside shape {shape}")
        if self.seed is not None or rng is None:
            rng = np.random.default_rng(self.seed)
        return np.asarray(self.sample_piece(shape, dtype, rng, _Piece(axis, start, stop))).astype(dtype, copy=False)

    def sample(self, shape: tuple[int, ...], dtype: np.dtype, rng: np.random.Generator) -> np.ndarray:
        return self.draw(shape, dtype, rng, math.prod(shape)).reshape(shape)

    def sample_piece(self, shape: tuple[int, ...], dtype: np.dtype, rng: np.random.Generator,
                     piece: "_Piece") -> np.ndarray:
        return piece.of_stream(shape, lambda n: self.draw(shape, dtype, rng, n))

    def draw(self, shape: tuple[int, ...], dtype: np.dtype, rng: np.random.Generator, n: int) -> np.ndarray:
        """The next ``n`` values of the stream a variable of ``shape`` is drawn from, in C order."""
        raise NotImplementedError


_CHUNK = 1 << 18  # values drawn at a time for a piece (2 MiB of float64)


@dataclass(frozen=True)
class _Piece:
    """Rows ``[start, stop)`` along ``axis``: seen in C order, the whole is ``outer`` blocks of ``size`` lines of
    ``inner`` values, and the piece keeps lines ``start..stop-1`` of each block."""

    axis: int
    start: int
    stop: int

    def local_shape(self, shape: tuple[int, ...]) -> tuple[int, ...]:
        return shape[:self.axis] + (self.stop - self.start,) + shape[self.axis + 1:]

    def index(self) -> tuple[slice, ...]:
        return (slice(None),) * self.axis + (slice(self.start, self.stop),)

    def of_stream(self, shape: tuple[int, ...], draw: Any) -> np.ndarray:
        """The piece of the values ``draw(n)`` gives in C order, read a chunk at a time (never past the piece)."""
        size, inner = shape[self.axis], math.prod(shape[self.axis + 1:])
        outer = math.prod(shape[:self.axis])
        end = (outer - 1) * size + self.stop if outer and self.stop > self.start else 0  # last line needed
        kept: list[np.ndarray] = []
        if inner:
            step = max(1, _CHUNK // inner)
            for line in range(0, end, step):
                count = min(step, end - line)
                if inner <= _CHUNK:
                    values = np.asarray(draw(count * inner)).reshape(count, inner)
                    within = (line + np.arange(count)) % size
                    kept.append(values[(within >= self.start) & (within < self.stop)].ravel())
                    continue
                keep = self.start <= line % size < self.stop  # a line longer than a chunk: in parts
                for offset in range(0, inner, _CHUNK):
                    values = np.asarray(draw(min(_CHUNK, inner - offset)))
                    if keep:
                        kept.append(values)
        local = self.local_shape(shape)
        if not kept:
            return np.asarray(draw(0)).reshape(local)
        return np.concatenate(kept).reshape(local)

    def positions(self, flat: np.ndarray, shape: tuple[int, ...]) -> tuple[np.ndarray, np.ndarray]:
        """Of flat positions in the whole: which lie in the piece, and where in the piece's flat order."""
        size, inner = shape[self.axis], math.prod(shape[self.axis + 1:])
        line, within = np.divmod(flat, inner)
        block, row = np.divmod(line, size)
        inside = (row >= self.start) & (row < self.stop)
        return inside, ((block * (self.stop - self.start) + row - self.start) * inner + within)[inside]


@dataclass(frozen=True)
class Constant(Initializer):
    value: float = 0.0

    def sample(self, shape: tuple[int, ...], dtype: np.dtype, rng: np.random.Generator) -> np.ndarray:
        return np.full(shape, self.value, dtype=dtype)

    def sample_piece(self, shape: tuple[int, ...], dtype: np.dtype, rng: np.random.Generator,
                     piece: _Piece) -> np.ndarray:
        return self.sample(piece.local_shape(shape), dtype, rng)


@dataclass(frozen=True)
class RandomUniform(Initializer):
    minval: float = 0.0
    maxval: float = 1.0

    def draw(self, shape: tuple[int, ...], dtype: np.dtype, rng: np.random.Generator, n: int) -> np.ndarray:
        if dtype.kind in "iu":  # legacy random_uniform_int_conf: integers in [min, max)
            return rng.integers(int(self.minval), int(self.maxval), size=n)
        return rng.uniform(self.minval, self.maxval, size=n)


@dataclass(frozen=True)
class RandomNormal(Initializer):
    mean: float = 0.0
    stddev: float = 1.0

    def draw(self, shape: tuple[int, ...], dtype: np.dtype, rng: np.random.Generator, n: int) -> np.ndarray:
        return rng.normal(self.mean, self.stddev, size=n)


@dataclass(frozen=True)
class TruncatedNormal(Initializer):
    """Normal(mean, stddev) with every value farther than 2 stddev from the mean drawn again."""

    mean: float = 0.0
    stddev: float = 1.0

    def sample(self, shape: tuple[int, ...], dtype: np.dtype, rng: np.random.Generator) -> np.ndarray:
        values = rng.standard_normal(size=shape)
        bad = np.abs(values) > 2.0
        while bad.any():  # each round keeps ~95% of what it redraws
            values[bad] = rng.standard_normal(size=int(bad.sum()))
            bad = np.abs(values) > 2.0
        return values * self.stddev + self.mean

    def sample_piece(self, shape: tuple[int, ...], dtype: np.dtype, rng: np.random.Generator,
                     piece: _Piece) -> np.ndarray:
        # as sample: the whole stream is walked (the rounds of redraws follow it), keeping the piece's values and
        # the flat positions of every value to redraw (about 5% of them), never the whole
        total = math.prod(shape)
        values = np.empty(math.prod(piece.local_shape(shape)))
        bad_parts = []
        for first in range(0, total, _CHUNK):
            chunk = rng.standard_normal(size=min(_CHUNK, total - first))
            flat = first + np.arange(chunk.size)
            inside, where = piece.positions(flat, shape)
            values[where] = chunk[inside]
            bad_parts.append(flat[np.abs(chunk) > 2.0])
        bad = np.concatenate(bad_parts) if bad_parts else np.empty(0, dtype=np.int64)
        while bad.size:  # each round redraws every bad value of the whole, in C order
            redrawn = rng.standard_normal(size=bad.size)
            inside, where = piece.positions(bad, shape)
            values[where] = redrawn[inside]
            bad = bad[np.abs(redrawn) > 2.0]
        return values.reshape(piece.local_shape(shape)) * self.stddev + self.mean


@dataclass(frozen=True)
class Range(Initializer):
    """``start + i * stride`` at index i of ``axis``, repeated over every other axis (legacy range_conf)."""

    start: float = 0.0
    stride: float = 1.0
    axis: int = -1

    def sample(self, shape: tuple[int, ...], dtype: np.dtype, rng: np.random.Generator) -> np.ndarray:
        if not shape or not -len(shape) <= self.axis < len(shape):
            raise ValueError(f"range initializer: axis {self.axis} is outside a variable of shape {shape}")
        axis = self.axis % len(shape)
        if dtype.kind in "iu":  # legacy int_range_conf counts in int64
            line = int(self.start) + np.arange(shape[axis], dtype=np.int64) * int(self.stride)
        else:
            line = self.start + np.arange(shape[axis], dtype=np.float64) * self.stride
        view = [1] * len(shape)
        view[axis] = shape[axis]
        return np.broadcast_to(line.reshape(view), shape)

    def sample_piece(self, shape: tuple[int, ...], dtype: np.dtype, rng: np.random.Generator,
                     piece: _Piece) -> np.ndarray:
        return self.sample(shape, dtype, rng)[piece.index()]  # a view of a broadcast line: nothing drawn whole


def _layout(data_format: str) -> str:
    """Legacy ``_get_data_format``: "channels_first", "channels_last" or "" (unknown)."""
    fmt = (data_format or "").strip()
    if fmt in ("channels_first", "channels_last"):
        return fmt
    if fmt.upper().startswith("NC"):
        return "channels_first"
    if fmt.upper().startswith("N") and fmt.upper().endswith("C"):
        return "channels_last"
    if fmt:
        raise ValueError(f"data_format must look like 'NCHW'/'channels_first' or 'NHWC'/'channels_last', got "
                         f"{data_format!r}")
    return ""


def compute_fans(shape: Sequence[int], data_format: str = "") -> tuple[float, float]:
    """(fan_in, fan_out) of a weight of ``shape`` (see the module docstring)."""
    shape = tuple(shape)
    if len(shape) == 0:
        return 1.0, 1.0
    if len(shape) == 1:
        return float(shape[0]), float(shape[0])
    if len(shape) == 2:
        return float(shape[1]), float(shape[0])
    fan_in = float(np.prod(shape[1:]))
    # without a data format a conv weight is read as channels_first, the layers' default
    spatial = shape[1:-1] if _layout(data_format) == "channels_last" else shape[2:]
    return fan_in, float(shape[0] * np.prod(spatial))


def _fan(shape: Sequence[int], mode: str, data_format: str) -> float:
    fan_in, fan_out = compute_fans(shape, data_format)
    return {"fan_in": fan_in, "fan_out": fan_out, "fan_avg": (fan_in + fan_out) / 2.0}[mode]


@dataclass(frozen=True)
class VarianceScaling(Initializer):
    """Variance scale / fan, drawn from a truncated normal, a normal or a uniform distribution."""

    scale: float = 1.0
    mode: str = "fan_in"
    distribution: str = "truncated_normal"
    data_format: str = ""

    def _distribution(self, shape: tuple[int, ...]) -> Initializer:
        variance = self.scale / max(_fan(shape, self.mode, self.data_format), 1.0)
        if self.distribution == "random_uniform":
            limit = math.sqrt(3.0 * variance)
            return RandomUniform(minval=-limit, maxval=limit)
        if self.distribution == "random_normal":
            return RandomNormal(stddev=math.sqrt(variance))
        # 0.8796... is the stddev of a unit normal truncated at 2 stddev: the result has the wanted variance
        return TruncatedNormal(stddev=math.sqrt(variance) / 0.87962566103423978)

    def sample(self, shape: tuple[int, ...], dtype: np.dtype, rng: np.random.Generator) -> np.ndarray:
        return self._distribution(shape).sample(shape, np.dtype(np.float64), rng)

    def sample_piece(self, shape: tuple[int, ...], dtype: np.dtype, rng: np.random.Generator,
                     piece: _Piece) -> np.ndarray:
        return self._distribution(shape).sample_piece(shape, np.dtype(np.float64), rng, piece)


@dataclass(frozen=True)
class Kaiming(Initializer):
    """He et al. (2015): std = gain / sqrt(fan), from a normal or a uniform distribution."""

    distribution: str = "random_normal"
    mode: str = "fan_in"
    nonlinearity: str | None = "leaky_relu"
    negative_slope: float = 0.0
    data_format: str = "NCHW"
    shape: tuple[int, ...] | None = None  # legacy fixed the fan from a shape given up front

    def draw(self, shape: tuple[int, ...], dtype: np.dtype, rng: np.random.Generator, n: int) -> np.ndarray:
        std = _gain(self.nonlinearity, self.negative_slope) / math.sqrt(
            max(_fan(self.shape or shape, self.mode, self.data_format), 1.0))
        if self.distribution == "random_uniform":
            bound = math.sqrt(3.0) * std
            return rng.uniform(-bound, bound, size=n)
        return rng.normal(0.0, std, size=n)


def _gain(nonlinearity: str | None, negative_slope: float) -> float:
    if nonlinearity in (None, "sigmoid", "linear"):
        return 1.0
    if nonlinearity == "tanh":
        return 5.0 / 3.0
    if nonlinearity == "relu":
        return math.sqrt(2.0)
    if nonlinearity == "leaky_relu":
        return math.sqrt(2.0 / (1.0 + negative_slope ** 2))
    raise ValueError(f"nonlinearity must be None, 'tanh', 'sigmoid', 'relu' or 'leaky_relu', got {nonlinearity!r}")


def _check_choice(value: str, choices: Sequence[str], what: str) -> str:
    if not isinstance(value, str) or value.lower() not in choices:
        raise ValueError(f"{what} must be one of {', '.join(choices)}; got {value!r}")
    return value.lower()


# checked constructors ----------------------------------------------------------------------------
def uniform(minval: float, maxval: float) -> Initializer:
    """``RandomUniform`` with its bounds checked (``flow.random_uniform_initializer``)."""
    if maxval < minval:
        raise ValueError(f"random_uniform_initializer: maxval {maxval} is below minval {minval}")
    return RandomUniform(minval=minval, maxval=maxval)


def variance_scaling(scale: float, mode: str, distribution: str, data_format: str) -> Initializer:
    """``VarianceScaling`` with its arguments checked (``flow.variance_scaling_initializer``; xavier is
    ``variance_scaling(1.0, "fan_avg", "random_uniform" or "random_normal", data_format)``)."""
    if not scale > 0:
        raise ValueError(f"variance_scaling_initializer: scale must be positive, got {scale!r}")
    _layout(data_format)
    return VarianceScaling(scale=float(scale), mode=_check_choice(mode, _MODES, "mode"),
                           distribution=_check_choice(distribution, _DISTRIBUTIONS, "distribution"),
                           data_format=data_format)


def kaiming(distribution: str, mode: str, nonlinearity: str | None, negative_slope: float, data_format: str,
            shape: tuple[int, ...] | None) -> Initializer:
    """``Kaiming`` with its arguments checked (``flow.kaiming_initializer``)."""
    _gain(nonlinearity, negative_slope)
    _layout(data_format)
    return Kaiming(distribution=_check_choice(distribution, _DISTRIBUTIONS[1:], "distribution"),
                   mode=_check_choice(mode, _MODES, "mode"), nonlinearity=nonlinearity,
                   negative_slope=float(negative_slope), data_format=data_format, shape=shape)


# legacy InitializerConf messages ------------------------------------------------------------
# VarianceNorm and RandomDistribution numbers of legacy initializer_conf.proto


_VARIANCE_NORMS = {0: "fan_in", 1: "fan_out", 2: "fan_avg"}


_CONF_DISTRIBUTIONS = {0: "random_uniform", 1: "random_normal", 2: "truncated_normal"}


def from_initializer_conf(conf: Any, owner: str = "an initializer") -> Initializer:
    """The initializer a legacy ``InitializerConf`` message describes (``oneflow.core.job.initializer_conf_pb2``).

    Each member maps as legacy's kernels computed it: xavier_conf is uniform in +-sqrt(3 / fan), msra_conf
    normal with std sqrt(2 / fan), variance_scaling_conf as flow.variance_scaling_initializer; range_conf and
    int_range_conf count along an axis; empty_conf (legacy left the memory as it was) starts at zeros.
    Read duck-typed, so any protobuf message with legacy's field names works.

    Args:
        conf: the message; exactly one member of its oneof ``type`` is set.
        owner: what the message initializes, for the error messages ("variable 'w'", "flow.data.decode_random").

    Returns:
        An initializer.

    Raises:
        ValueError: no member is set, or a member holds a value legacy refused (an unknown enum number).
    """
    try:
        kind = conf.WhichOneof("type")
    except ValueError:  # another protobuf message: it has no oneof named type
        raise ValueError(f"{owner}: a {type(conf).__name__} message is not an initializer; pass an "
                         f"InitializerConf (oneflow.core.job.initializer_conf_pb2) or a flow.*_initializer") from None
    if kind is None:
        raise ValueError(f"{owner}: the InitializerConf given as its initializer sets none of "
                         f"its initializers (set e.g. .constant_conf.value or .truncated_normal_conf.std)")
    member = getattr(conf, kind)

    def choice(table: dict[int, str], number: int, field: str) -> str:
        if number not in table:
            raise ValueError(f"{owner}: InitializerConf.{kind}.{field} is {number}, legacy knew "
                             f"{', '.join(f'{k} ({v})' for k, v in table.items())}")
        return table[number]

    if kind in ("constant_conf", "constant_int_conf"):
        return Constant(value=member.value)
    if kind in ("random_uniform_conf", "random_uniform_int_conf"):
        return uniform(member.min, member.max)
    if kind == "random_normal_conf":
        return RandomNormal(mean=member.mean, stddev=member.std)
    if kind == "truncated_normal_conf":
        return TruncatedNormal(mean=member.mean, stddev=member.std)
    if kind in ("xavier_conf", "msra_conf"):
        mode = choice(_VARIANCE_NORMS, member.variance_norm, "variance_norm")
        scale, distribution = (1.0, "random_uniform") if kind == "xavier_conf" else (2.0, "random_normal")
        return variance_scaling(scale, mode, distribution, member.data_format)
    if kind == "variance_scaling_conf":
        return variance_scaling(member.scale, choice(_VARIANCE_NORMS, member.variance_norm, "variance_norm"),
                                choice(_CONF_DISTRIBUTIONS, member.distribution, "distribution"), member.data_format)
    if kind in ("range_conf", "int_range_conf"):
        return Range(start=member.start, stride=member.stride, axis=int(member.axis))
    if kind == "empty_conf":
        return Constant(value=0.0)  # empty_initializer: legacy left the memory as it was
    raise ValueError(f"{owner}: InitializerConf.{kind} is not an initializer flowjob knows")
