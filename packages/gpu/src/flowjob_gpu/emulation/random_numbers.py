"""The emulated ``cupy.random``: numpy's generators behind CuPy's names, draws landing on the device.

CuPy's ``Generator`` has fewer methods than numpy's (no ``normal``, ``permutation``, ``choice``,
``shuffle``): the emulated one has CuPy's only, so a kernel calling one of numpy's others fails here
as on a GPU. The streams are numpy's (PCG64), not CuPy's XORWOW: a seed gives the same numbers on
every emulated run, not the numbers a GPU gives.
"""
from __future__ import annotations

import __future__
from typing import Any, Callable

import numpy as np

from flowjob_gpu.emulation.array import device_op, ndarray, to_device, unwrap
from flowjob_gpu.emulation.modules import EmulatedModule
from flowjob_gpu.emulation.names import snapshot
from flowjob_gpu.emulation.unemulated import complete_class


def _draw(result: Any, dtype: Any = None) -> Any:
    if dtype is not None:
        result = np.asarray(result).astype(dtype, copy=False)
    return to_device(result, scalars=True)


class BitGenerator:
    """A stream of random bits (``cupy.random.BitGenerator``); numpy's PCG64 behind it."""

    def __init__(self, seed: Any = None) -> None:
        self._numpy = np.random.PCG64(unwrap(seed))

    def random_raw(self, size: Any = None, out: bool = False) -> Any:
        return _draw(self._numpy.random_raw(size))


class XORWOW(BitGenerator):
    """CuPy's default bit generator (by name: the bits are PCG64's)."""

    def __init__(self, seed: Any = None, *, size: int = -1) -> None:
        super().__init__(seed)

    @property
    def state(self) -> Any:
        return self._numpy.state

    @property
    def generator(self) -> Any:
        return self._numpy


class MRG32k3a(XORWOW):
    """CuPy's MRG32k3a bit generator (by name: the bits are PCG64's)."""


class Philox4x3210(XORWOW):
    """CuPy's Philox4x32-10 bit generator (by name: the bits are PCG64's)."""


class Generator:
    """CuPy's ``Generator``: its methods only (numpy's has more), each drawing onto the device."""

    def __init__(self, bit_generator: BitGenerator) -> None:
        if not isinstance(bit_generator, BitGenerator):
            raise TypeError("cupy.random.Generator takes a cupy.random.BitGenerator")
        self._bit_generator = bit_generator
        self._numpy = np.random.Generator(bit_generator._numpy)

    def random(self, size: Any = None, dtype: Any = np.float64, out: Any = None) -> Any:
        return _into(self._numpy.random, out, size, dtype)

    def integers(self, low: Any, high: Any = None, size: Any = None, dtype: Any = np.int64,
                 endpoint: bool = False) -> Any:
        return _draw(self._numpy.integers(unwrap(low), unwrap(high), size, dtype, endpoint))

    def standard_normal(self, size: Any = None, dtype: Any = np.float64, out: Any = None) -> Any:
        return _into(self._numpy.standard_normal, out, size, dtype)

    def uniform(self, low: Any = 0.0, high: Any = 1.0, size: Any = None, dtype: Any = np.float64) -> Any:
        return _draw(self._numpy.uniform(unwrap(low), unwrap(high), size), dtype)

    def standard_exponential(self, size: Any = None, dtype: Any = np.float64, method: str = "inv",
                             out: Any = None) -> Any:
        return _into(self._numpy.standard_exponential, out, size, dtype, method)

    def standard_gamma(self, shape: Any, size: Any = None, dtype: Any = np.float64, out: Any = None) -> Any:
        return _into(self._numpy.standard_gamma, out, unwrap(shape), size, dtype)

    def beta(self, a: Any, b: Any, size: Any = None, dtype: Any = np.float64) -> Any:
        return _draw(self._numpy.beta(unwrap(a), unwrap(b), size), dtype)


def _into(method: Callable[..., Any], out: Any, *args: Any) -> Any:
    """numpy's ``method(*args)``, into the device array ``out`` if given (filled whole, as numpy's).

    On a GPU, CuPy 14.2's ``Generator.random(out=buf)`` without ``size`` filled ``buf`` with one value
    repeated (read off an H100 by bench/cupy_facts.py): code that relies on ``out=`` without ``size`` is
    refused here, so it shows on a CPU run instead of drawing the same number everywhere on a device."""
    if out is None:
        return _draw(method(*args))
    if type(out) is not ndarray:
        raise TypeError(f"out must be a cupy.ndarray, not {type(out)}")
    if args and args[0] is None and out.size > 1:
        raise TypeError("emulated CuPy: Generator draws with out= and no size fill out with one repeated value "
                        "on a GPU (CuPy 14.2); pass size=out.shape, or draw on the host")
    method(*args, out=out._array)
    return out


def _generator_method(name: str) -> Callable[..., Any]:
    """numpy's method ``name`` (the same arguments as CuPy's, without a dtype)."""
    method = getattr(np.random.Generator, name)

    def draw(self: Generator, *args: Any, **kwargs: Any) -> Any:
        return _draw(method(self._numpy, *map(unwrap, args), **{k: unwrap(v) for k, v in kwargs.items()}))

    draw.__name__ = draw.__qualname__ = name
    return draw


for _name in ("binomial", "chisquare", "dirichlet", "exponential", "f", "gamma", "geometric", "hypergeometric",
              "logseries", "poisson", "power"):
    setattr(Generator, _name, _generator_method(_name))


class RandomState:
    """CuPy's legacy ``RandomState``; numpy's behind it. CuPy's ``dtype=`` arguments cast the draws."""

    def __init__(self, seed: Any = None, method: Any = None) -> None:
        self._numpy = np.random.RandomState(unwrap(seed))

    def seed(self, seed: Any = None) -> None:
        self._numpy.seed(unwrap(seed))

    def rand(self, *size: int, dtype: Any = float) -> Any:
        return _draw(self._numpy.rand(*size), dtype)

    def randn(self, *size: int, dtype: Any = float) -> Any:
        return _draw(self._numpy.randn(*size), dtype)

    def shuffle(self, a: Any) -> None:
        self._numpy.shuffle(unwrap(a))


def _state_method(name: str) -> Callable[..., Any]:
    method = getattr(np.random.RandomState, name)

    def draw(self: RandomState, *args: Any, dtype: Any = None, **kwargs: Any) -> Any:
        return _draw(method(self._numpy, *map(unwrap, args), **{k: unwrap(v) for k, v in kwargs.items()}), dtype)

    draw.__name__ = draw.__qualname__ = name
    return draw


for _name in sorted(snapshot().classes["cupy.random.RandomState"] - set(vars(RandomState))):
    if hasattr(np.random.RandomState, _name):
        setattr(RandomState, _name, _state_method(_name))

for _cls in (BitGenerator, Generator, RandomState):
    complete_class(_cls, snapshot().classes[f"cupy.random.{_cls.__name__}"])
    # draws are device work: recorded for the graph while a stream captures, drawn anew at each launch
    for _name, _value in list(vars(_cls).items()):
        if callable(_value) and not _name.startswith("_") and _name != "seed":
            setattr(_cls, _name, device_op(_value))

_random_state: list[RandomState] = []


def get_random_state() -> RandomState:
    """The process's ``RandomState`` behind ``cupy.random``'s functions."""
    if not _random_state:
        _random_state.append(RandomState())
    return _random_state[0]


def set_random_state(rs: RandomState) -> None:
    if not isinstance(rs, RandomState):
        raise TypeError(f"Random state must be an instance of RandomState. Actual: {type(rs)}")
    _random_state[:] = [rs]


def reset_states() -> None:
    _random_state.clear()


def seed(seed: Any = None) -> None:
    get_random_state().seed(seed)


def default_rng(seed: Any = None) -> Generator:
    """A ``Generator``: ``seed`` itself if it is one, around it if it is a ``BitGenerator``."""
    if isinstance(seed, Generator):
        return seed
    return Generator(seed if isinstance(seed, BitGenerator) else XORWOW(seed))


def _global(name: str) -> Callable[..., Any]:
    def draw(*args: Any, **kwargs: Any) -> Any:
        return getattr(get_random_state(), name)(*args, **kwargs)

    draw.__name__ = draw.__qualname__ = name
    return draw


_ALIASES = {"random": "random_sample", "ranf": "random_sample", "sample": "random_sample"}


def build() -> EmulatedModule:
    """The emulated ``cupy.random``."""
    values: dict[str, Any] = {}
    for name in snapshot().modules["cupy.random"]:
        method = _ALIASES.get(name, name)
        if hasattr(RandomState, method) or hasattr(np.random.RandomState, method):
            values[name] = _global(method) if hasattr(RandomState, method) else _numpy_global(method)
    values.update(BitGenerator=BitGenerator, XORWOW=XORWOW, MRG32k3a=MRG32k3a, Philox4x3210=Philox4x3210,
                  Generator=Generator, RandomState=RandomState, default_rng=default_rng, seed=seed,
                  get_random_state=get_random_state, set_random_state=set_random_state, reset_states=reset_states,
                  annotations=__future__.annotations)
    return EmulatedModule("cupy.random", values)


def _numpy_global(name: str) -> Callable[..., Any]:
    """A module function CuPy has that its RandomState lacks (``multinomial``, ``bytes``): numpy's, on the
    same stream."""
    def draw(*args: Any, **kwargs: Any) -> Any:
        method = getattr(get_random_state()._numpy, name)
        return _draw(method(*map(unwrap, args), **{k: unwrap(v) for k, v in kwargs.items()}))

    draw.__name__ = draw.__qualname__ = name
    return device_op(draw)
