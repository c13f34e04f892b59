"""The public names of the real CuPy, as a checked-in snapshot (``cupy_names.json``) the emulation is built to.

The emulated module has exactly these names: a kernel that uses a name CuPy lacks fails on the
emulation as it would on a GPU. ``read_installed()`` reads the same lists from an installed CuPy
(it imports without a GPU); ``python -m flowjob_gpu.emulation.names --write`` refreshes the
snapshot from it, and a test compares the two wherever CuPy is installed.
"""
from __future__ import annotations

import functools
import importlib
import json
import pathlib
import sys
from dataclasses import dataclass
from typing import Any

SNAPSHOT = pathlib.Path(__file__).with_name("cupy_names.json")

# the modules whose names the emulation reproduces (the ones flowjob's kernels reach through ``xp``,
# the ones they could, and cupyx's helpers)
MODULES = ("cupy", "cupy.cuda", "cupy.cuda.runtime", "cupy.exceptions", "cupy.fft", "cupy.lib",
           "cupy.lib.stride_tricks", "cupy.linalg", "cupy.polynomial", "cupy.random", "cupy.testing",
           "cupy.typing", "cupyx")
# the classes whose public attributes it reproduces (read from the class: instance attributes are not listed)
CLASSES = ("cupy.ndarray", "cupy.ufunc", "cupy.flatiter", "cupy.broadcast", "cupy.random.Generator",
           "cupy.random.RandomState", "cupy.random.BitGenerator", "cupy.cuda.Device", "cupy.cuda.Stream",
           "cupy.cuda.Event", "cupy.cuda.MemoryPool", "cupy.cuda.PinnedMemoryPool", "cupy.cuda.MemoryPointer")


@dataclass(frozen=True)
class Names:
    """One CuPy release's names: ``modules`` and ``classes`` map a dotted name to its public names;
    ``ufuncs``: the names of ``cupy`` that are ``cupy.ufunc`` objects; ``array_dunders``: the special
    methods of ``cupy.ndarray`` beyond ``object``'s (which operators and conversions it has);
    ``ufuncs_with_at``: the ufuncs whose ``at`` CuPy implements (a scatter kernel; the others raise);
    ``numpy_objects``: the names of ``cupy`` bound to numpy's own object (dtypes, constants, dtype helpers)."""

    cupy_version: str
    modules: dict[str, frozenset[str]]
    classes: dict[str, frozenset[str]]
    ufuncs: frozenset[str]
    ufuncs_with_at: frozenset[str]
    array_dunders: frozenset[str]
    numpy_objects: frozenset[str]

    def to_json(self) -> dict[str, Any]:
        return {"cupy_version": self.cupy_version,
                "modules": {k: sorted(v) for k, v in sorted(self.modules.items())},
                "classes": {k: sorted(v) for k, v in sorted(self.classes.items())},
                "ufuncs": sorted(self.ufuncs), "ufuncs_with_at": sorted(self.ufuncs_with_at),
                "array_dunders": sorted(self.array_dunders), "numpy_objects": sorted(self.numpy_objects)}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> "Names":
        return cls(data["cupy_version"], {k: frozenset(v) for k, v in data["modules"].items()},
                   {k: frozenset(v) for k, v in data["classes"].items()}, frozenset(data["ufuncs"]),
                   frozenset(data["ufuncs_with_at"]), frozenset(data["array_dunders"]),
                   frozenset(data["numpy_objects"]))


def public(obj: Any) -> frozenset[str]:
    return frozenset(n for n in dir(obj) if not n.startswith("_"))


def array_dunders(cls: type) -> frozenset[str]:
    """``cls``'s special methods that ``object`` lacks (Cython's ``__pyx_vtable__`` left out)."""
    return frozenset(n for n in dir(cls) if n.startswith("__") and n.endswith("__")
                     and not hasattr(object, n) and n != "__pyx_vtable__")


@functools.lru_cache(maxsize=None)
def snapshot() -> Names:
    """The checked-in names the emulation is built to."""
    return Names.from_json(json.loads(SNAPSHOT.read_text()))


def read_installed() -> Names:
    """The names of the CuPy installed here (it imports without a CUDA device); ImportError without one."""
    import warnings

    with warnings.catch_warnings():  # CuPy warns that it finds no CUDA toolkit: irrelevant to its names
        warnings.simplefilter("ignore")
        cupy = importlib.import_module("cupy")
        classes = {}
        for dotted in CLASSES:  # first: reading cupy.random.Generator adds it to the module's names
            module, _, attr = dotted.rpartition(".")
            classes[dotted] = public(getattr(importlib.import_module(module), attr))
        modules = {name: public(importlib.import_module(name)) for name in MODULES}
    import numpy

    ufuncs = frozenset(n for n in modules["cupy"] if isinstance(getattr(cupy, n), cupy.ufunc))
    # a ufunc's ``at`` is a scatter kernel, which CuPy keeps in a private attribute
    with_at = frozenset(n for n in ufuncs if getattr(getattr(cupy, n), "_scatter_op", None) is not None)
    same = frozenset(n for n in modules["cupy"] if getattr(numpy, n, None) is getattr(cupy, n))
    return Names(cupy.__version__, modules, classes, ufuncs, with_at, array_dunders(cupy.ndarray), same)


def main(argv: list[str]) -> int:
    """``--write``: refresh the snapshot from the installed CuPy; ``--print``: print its names as JSON."""
    names = read_installed()
    text = json.dumps(names.to_json(), indent=1) + "\n"
    if argv == ["--write"]:
        SNAPSHOT.write_text(text)
        print(f"wrote {SNAPSHOT} (CuPy {names.cupy_version})")
    elif argv == ["--print"]:
        sys.stdout.write(text)
    else:
        print("usage: python -m flowjob_gpu.emulation.names --write | --print", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
