"""CuPy's names that numpy cannot stand in for (CUDA code, device pointers, host callbacks): they exist,
as in CuPy, and using one raises ``NotImplementedError`` naming the emulation."""
from __future__ import annotations

import types
from typing import Any, NoReturn

WHY_CUDA = "it needs a CUDA device (a real GPU runs it)"


def not_emulated(qualname: str, why: str = WHY_CUDA) -> NotImplementedError:
    return NotImplementedError(f"{qualname} is not available on flowjob's emulated CuPy (FLOWJOB_GPU_EMULATION=1): "
                               f"{why}")


class Unemulated:
    """A module-level name of CuPy's that the emulation cannot provide: calling it, or reading an
    attribute of it, raises ``NotImplementedError``."""

    def __init__(self, qualname: str, why: str = WHY_CUDA) -> None:
        self._qualname = qualname
        self._why = why

    @property
    def why(self) -> str:
        return self._why

    def __call__(self, *args: Any, **kwargs: Any) -> NoReturn:
        raise not_emulated(self._qualname, self._why)

    def __getattr__(self, name: str) -> NoReturn:
        if name.startswith("_"):  # protocol probes (copy, inspect, pickle) see an ordinary object
            raise AttributeError(name)
        raise not_emulated(f"{self._qualname}.{name}", self._why)

    def __repr__(self) -> str:
        return f"<{self._qualname}: not emulated>"


class UnemulatedModule(types.ModuleType):
    """A CuPy submodule the emulation does not provide; reading any of its names raises
    ``NotImplementedError`` (with ``names``, only CuPy's: others are ``AttributeError`` as usual)."""

    def __init__(self, qualname: str, names: frozenset[str] | None = None, why: str = WHY_CUDA) -> None:
        super().__init__(qualname, f"{qualname}: not emulated ({why})")
        self._names = names
        self._why = why

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_") or (self._names is not None and name not in self._names):
            raise AttributeError(f"module {self.__name__!r} has no attribute {name!r}")
        raise not_emulated(f"{self.__name__}.{name}", self._why)

    def __dir__(self) -> list[str]:
        return sorted(self._names or ())


class UnemulatedAttribute:
    """A class attribute of CuPy's (method or property) the emulation cannot provide: reading it on
    an instance raises ``NotImplementedError``."""

    def __init__(self, why: str = WHY_CUDA) -> None:
        self._why = why
        self._qualname = "?"

    def __set_name__(self, owner: type, name: str) -> None:
        self._qualname = f"cupy.{owner.__qualname__}.{name}"

    def __get__(self, instance: Any, owner: type | None = None) -> Any:
        if instance is None:
            return self
        raise not_emulated(self._qualname, self._why)


def complete_class(cls: type, names: frozenset[str], why: str = WHY_CUDA) -> type:
    """Give ``cls`` every public name of CuPy's class (``names``) it lacks, as an ``UnemulatedAttribute``;
    a public name CuPy's class lacks is a bug of the emulation (ValueError)."""
    own = {n for n in dir(cls) if not n.startswith("_")}
    extra = own - names
    if extra:
        raise ValueError(f"emulated {cls.__qualname__} has names CuPy's lacks: {sorted(extra)}")
    for name in sorted(names - own):
        attribute = UnemulatedAttribute(why)
        setattr(cls, name, attribute)
        attribute.__set_name__(cls, name)
    return cls
