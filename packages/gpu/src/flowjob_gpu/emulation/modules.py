"""The emulated CuPy's module objects: each has exactly the public names the snapshot gives the real one."""
from __future__ import annotations

import types
from typing import Any, Mapping

from flowjob_gpu.emulation.names import snapshot


class EmulatedModule(types.ModuleType):
    """A module of the emulated CuPy (``cupy``, ``cupy.random``, ...): its names are those of CuPy's
    module of the same name, no more (numpy's others are AttributeError), no fewer."""

    def __init__(self, qualname: str, values: Mapping[str, Any], doc: str = "") -> None:
        super().__init__(qualname, doc or f"{qualname} of flowjob's emulated CuPy (numpy behind CuPy's names)")
        names = snapshot().modules[qualname]
        public = {name for name in values if not name.startswith("__")}  # __version__ and the like aside
        missing, extra = names - public, public - names
        if missing or extra:  # a bug of the emulation, not of the program using it
            raise ValueError(f"emulated {qualname}: CuPy's names without a value {sorted(missing)}, "
                             f"values for names CuPy lacks {sorted(extra)}")
        self.__dict__.update(values)

    def __getattr__(self, name: str) -> Any:
        raise AttributeError(f"module {self.__name__!r} has no attribute {name!r} (flowjob's emulated CuPy has "
                             f"exactly CuPy {snapshot().cupy_version}'s names)")

    def __dir__(self) -> list[str]:
        return sorted(self.__dict__)
