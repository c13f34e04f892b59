"""The public names of the real CuPy, as a checked-in snapshot (``cupy_names.json``) the emulation is built to.

The emulated module has exactly these names: a kernel that uses a name CuPy lacks fails on the
emulation as it would on a GPU. ``read_installed()`` reads the same lists from an installed CuPy
(it imports without a GPU); ``python -m flowjob_gpu.emulation.names --write`` refreshes the
snapshot from it, and a test compares the two wherever CuPy is installed.
"""
from __future__ import annotations

import functools
import importlib
import inspect
import json
import pathlib
import re
import sys
import warnings
from dataclasses import dataclass
from typing import Any

import numpy

SNAPSHOT = pathlib.Path(__file__).with_name("cupy_names.json")

# the modules whose names the emulation reproduces (the ones flowjob's kernels reach through ``xp``,
# the ones they could, and cupyx's helpers)
MODULES = ("cupy", "cupy.cuda", "cupy.cuda.runtime", "cupy.exceptions", "cupy.fft", "cupy.lib",
           "cupy.lib.stride_tricks", "cupy.linalg", "cupy.polynomial", "cupy.random", "cupy.testing",
           "cupy.typing", "cupyx")
# the modules whose functions' parameters it checks (ufuncs, numpy's own objects and classes aside)
SIGNED_MODULES = ("cupy", "cupy.fft", "cupy.lib.stride_tricks", "cupy.linalg", "cupyx")
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
    ``numpy_objects``: the names of ``cupy`` bound to numpy's own object (dtypes, constants, dtype helpers);
    ``signatures``: the parameters of CuPy's functions and array methods (``cupy.max``: ``"a, axis, out,
    keepdims"``; ``/`` and ``*`` as in Python; defaults left out), which the emulation holds calls to."""

    cupy_version: str
    modules: dict[str, frozenset[str]]
    classes: dict[str, frozenset[str]]
    ufuncs: frozenset[str]
    ufuncs_with_at: frozenset[str]
    array_dunders: frozenset[str]
    numpy_objects: frozenset[str]
    signatures: dict[str, str]

    def to_json(self) -> dict[str, Any]:
        return {"cupy_version": self.cupy_version,
                "modules": {k: sorted(v) for k, v in sorted(self.modules.items())},
                "classes": {k: sorted(v) for k, v in sorted(self.classes.items())},
                "ufuncs": sorted(self.ufuncs), "ufuncs_with_at": sorted(self.ufuncs_with_at),
                "array_dunders": sorted(self.array_dunders), "numpy_objects": sorted(self.numpy_objects),
                "signatures": dict(sorted(self.signatures.items()))}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> "Names":
        return cls(data["cupy_version"], {k: frozenset(v) for k, v in data["modules"].items()},
                   {k: frozenset(v) for k, v in data["classes"].items()}, frozenset(data["ufuncs"]),
                   frozenset(data["ufuncs_with_at"]), frozenset(data["array_dunders"]),
                   frozenset(data["numpy_objects"]), dict(data["signatures"]))


def public(obj: Any) -> frozenset[str]:
    return frozenset(n for n in dir(obj) if not n.startswith("_"))


def array_dunders(cls: type) -> frozenset[str]:
    """``cls``'s special methods that ``object`` lacks (Cython's ``__pyx_vtable__`` left out)."""
    return frozenset(n for n in dir(cls) if n.startswith("__") and n.endswith("__")
                     and not hasattr(object, n) and n != "__pyx_vtable__")


def parameters(fn: Any) -> str | None:
    """``fn``'s parameter names as ``Names.signatures`` keeps them: from its signature, or from the first line
    of its docstring (Cython's methods: ``_ndarray_base.sum(self, axis=None, ...) -> ...``); None without."""
    try:
        signature = inspect.signature(fn)
    except (TypeError, ValueError):
        match = re.match(r"[\w.]+\((.*)\)", (getattr(fn, "__doc__", None) or "").strip().split("\n")[0])
        return None if match is None else ", ".join(_names(_split(match.group(1))))
    tokens: list[str] = []
    kinds = [p.kind for p in signature.parameters.values()]
    for i, p in enumerate(signature.parameters.values()):
        if p.kind is p.KEYWORD_ONLY and p.VAR_POSITIONAL not in kinds and "*" not in tokens:
            tokens.append("*")
        tokens.append({p.VAR_POSITIONAL: "*", p.VAR_KEYWORD: "**"}.get(p.kind, "") + p.name)
        if p.kind is p.POSITIONAL_ONLY and (i + 1 == len(kinds) or kinds[i + 1] is not p.POSITIONAL_ONLY):
            tokens.append("/")
    return ", ".join(tokens)


def _split(text: str) -> list[str]:
    """A parameter list split at its top-level commas (defaults may hold brackets and quoted commas)."""
    parts, depth, quote, start = [], 0, "", 0
    for i, char in enumerate(text):
        if quote:
            quote = "" if char == quote else quote
        elif char in "'\"":
            quote = char
        elif char in "([{":
            depth += 1
        elif char in ")]}":
            depth -= 1
        elif char == "," and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    parts.append(text[start:])
    return [p.strip() for p in parts if p.strip()]


def _names(parts: list[str]) -> list[str]:
    """Parameter names of Cython's parameter texts (``int axis=-1`` is ``axis``; ``*shape`` stays)."""
    names = []
    for part in parts:
        head = part.split("=")[0].split(":")[0].strip()
        stars = head[: len(head) - len(head.lstrip("*"))]
        names.append(stars + head.lstrip("*").split()[-1] if head.lstrip("*") else head)
    return names


class Parameters:
    """What one of CuPy's functions takes, from its ``Names.signatures`` entry: at most ``positional``
    arguments by position (None: any number), keywords among ``keywords`` (None: any)."""

    def __init__(self, qualname: str, text: str) -> None:
        self.qualname = qualname
        self.tokens = [t for t in text.split(", ") if t]
        self.positional: int | None = 0
        self.keywords: set[str] | None = set()
        keyword_only = False
        for token in self.tokens:
            if token == "/":  # the names so far are positional-only
                self.keywords = set() if self.keywords is not None else None
            elif token == "*":
                keyword_only = True
            elif token.startswith("**"):
                self.keywords = None
            elif token.startswith("*"):
                self.positional, keyword_only = None, True
            else:
                if not keyword_only and self.positional is not None:
                    self.positional += 1
                if self.keywords is not None:
                    self.keywords.add(token)

    def check(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        """TypeError where CuPy's function would refuse the call's shape (too many arguments, a keyword it
        lacks: numpy's ``initial=``, ``where=`` and the like)."""
        if self.positional is not None and len(args) > self.positional:
            raise TypeError(f"{self.qualname}() takes at most {self.positional} positional arguments in CuPy "
                            f"({len(args)} given)")
        if kwargs and self.keywords is not None:
            unknown = sorted(kwargs.keys() - self.keywords)
            if unknown:
                raise TypeError(f"{self.qualname}() got an unexpected keyword argument {unknown[0]!r} (CuPy's "
                                f"takes {', '.join(self.tokens)})")

    def signature(self) -> inspect.Signature:
        """The parameters as an ``inspect.Signature`` (without defaults, which the snapshot leaves out)."""
        kind = inspect.Parameter.POSITIONAL_OR_KEYWORD
        params = []
        for token in self.tokens:
            if token == "/":
                params = [p.replace(kind=p.POSITIONAL_ONLY) for p in params]
            elif token == "*":
                kind = inspect.Parameter.KEYWORD_ONLY
            elif token.startswith("**"):
                params.append(inspect.Parameter(token[2:], inspect.Parameter.VAR_KEYWORD))
            elif token.startswith("*"):
                params.append(inspect.Parameter(token[1:], inspect.Parameter.VAR_POSITIONAL))
                kind = inspect.Parameter.KEYWORD_ONLY
            else:
                params.append(inspect.Parameter(token, kind))
        return inspect.Signature(params)


def parameters_of(qualname: str) -> Parameters | None:
    """CuPy's parameters of ``qualname`` (``cupy.max``, ``cupy.ndarray.sum``), where the snapshot has them."""
    text = snapshot().signatures.get(qualname)
    return None if text is None else Parameters(qualname, text)


@functools.lru_cache(maxsize=None)
def snapshot() -> Names:
    """The checked-in names the emulation is built to."""
    return Names.from_json(json.loads(SNAPSHOT.read_text()))


def read_installed() -> Names:
    """The names of the CuPy installed here (it imports without a CUDA device); ImportError without one."""
    with warnings.catch_warnings():  # CuPy warns that it finds no CUDA toolkit: irrelevant to its names
        warnings.simplefilter("ignore")
        cupy = importlib.import_module("cupy")
        classes = {}
        for dotted in CLASSES:  # first: reading cupy.random.Generator adds it to the module's names
            module, _, attr = dotted.rpartition(".")
            classes[dotted] = public(getattr(importlib.import_module(module), attr))
        modules = {name: public(importlib.import_module(name)) for name in MODULES}

    ufuncs = frozenset(n for n in modules["cupy"] if isinstance(getattr(cupy, n), cupy.ufunc))
    # a ufunc's ``at`` is a scatter kernel, which CuPy keeps in a private attribute
    with_at = frozenset(n for n in ufuncs if getattr(getattr(cupy, n), "_scatter_op", None) is not None)
    same = frozenset(n for n in modules["cupy"] if getattr(numpy, n, None) is getattr(cupy, n))
    signatures = {}
    for module in SIGNED_MODULES:
        for name in modules[module]:
            value = getattr(importlib.import_module(module), name)
            if callable(value) and not isinstance(value, (type, cupy.ufunc)) and name not in same:
                signature = parameters(value)
                if signature is not None:
                    signatures[f"{module}.{name}"] = signature
    for name in classes["cupy.ndarray"]:
        value = getattr(cupy.ndarray, name)
        signature = parameters(value) if callable(value) else None
        if signature is not None:
            signatures[f"cupy.ndarray.{name}"] = signature
    return Names(cupy.__version__, modules, classes, ufuncs, with_at, array_dunders(cupy.ndarray), same, signatures)


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
