"""How the face fills its namespaces from the packages' ``__all__``, declared per module.

A ``Source`` names a package module and the distribution that provides it; the face reads that
module's ``__all__`` (or, for a module whose names legacy spread over several namespaces, its
``NAMESPACES[namespace]``) and never lists the names again. For the top-level ``flow`` namespace the
names are read without importing the module (its ``__all__`` literal, parsed), so optional
distributions are imported on first use of one of their names; a face submodule (``flow.math``)
is itself imported on first use and copies its sources' names eagerly.
"""
from __future__ import annotations

import ast
import importlib
import importlib.util
import pkgutil
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Mapping

from flowjob_core import MissingPackageError

from oneflow._lazy import require


@dataclass(frozen=True)
class Source:
    """A module whose ``__all__`` fills a face namespace, and the distribution that provides it.

    ``legacy``: the names legacy programs use from it. Its ``__all__`` gives every name when the
    distribution is installed; these few only let a missing distribution be named precisely
    (``flow.watch needs the flowjob-watch distribution``), and the face's tests check they are
    in that ``__all__``.

    ``namespace``: for a module that declares ``NAMESPACES`` (face namespace -> its names, a literal
    dict: legacy exported ``argmax`` as ``flow.argmax`` and ``flow.math.argmax``), the key whose names
    this source gives instead of the whole ``__all__``.
    """

    module: str
    distribution: str
    legacy: tuple[str, ...] = ()
    namespace: str | None = None

    def installed(self) -> bool:
        return importlib.util.find_spec(self.module.split(".")[0]) is not None

    def names(self) -> tuple[str, ...]:
        """The module's ``__all__`` (or ``NAMESPACES[namespace]``): read from its source when it is not
        imported yet (nothing runs)."""
        loaded = sys.modules.get(self.module)
        if loaded is None:
            listed = _literal_names(self._path(), self.namespace)
            if listed is not None:
                return listed
            loaded = self.load(self.module)
        return self.names_of(loaded)

    def names_of(self, module: Any) -> tuple[str, ...]:
        """The names this source gives from the imported ``module``."""
        if self.namespace is None:
            return tuple(module.__all__)
        return tuple(module.NAMESPACES[self.namespace])

    def load(self, what: str) -> Any:
        return require(self.module, self.distribution, what)

    def _path(self) -> Path | None:
        top, *rest = self.module.split(".")
        spec = importlib.util.find_spec(top)  # a top-level name: finding it imports nothing
        if spec is None:
            return None
        if not rest:
            return Path(spec.origin) if spec.origin else None
        for location in spec.submodule_search_locations or ():
            base = Path(location).joinpath(*rest)
            for path in (base.with_suffix(".py"), base / "__init__.py"):
                if path.is_file():
                    return path
        return None


def ops(module: str, namespace: str | None = None) -> Source:
    """A public module of flowjob-ops, ``flowjob_ops.api.<module>`` (``namespace`` as for ``Source``)."""
    return Source(f"flowjob_ops.api.{module}", "flowjob-ops", namespace=namespace)


def _literal_names(path: Path | None, namespace: str | None) -> tuple[str, ...] | None:
    """``__all__`` (``namespace`` None) or ``NAMESPACES[namespace]`` when the module assigns it a literal
    list or tuple of strings (a literal dict of them), else None."""
    if path is None or path.suffix != ".py":
        return None
    target = "__all__" if namespace is None else "NAMESPACES"
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == target for t in node.targets):
            try:
                value = ast.literal_eval(node.value)
            except ValueError:
                return None
            if namespace is not None:
                value = value.get(namespace) if isinstance(value, dict) else None
            if isinstance(value, (list, tuple)) and all(isinstance(v, str) for v in value):
                return tuple(value)
            return None
    return None


def export(namespace: dict[str, Any], owner: str, *sources: Source) -> list[str]:
    """Copy every name of the sources' ``__all__`` into ``namespace`` (a face submodule's globals);
    returns the names, for that module's ``__all__``.

    A source whose distribution is not installed is left out while another one is (``flow.data`` with
    flowjob-ofrecord but not flowjob-data): the module's ``__getattr__`` then names what to install for the
    names it lacks. With none installed, importing the module says which distribution provides it."""
    present = [s for s in sources if s.installed()]
    absent = [s for s in sources if not s.installed()]
    if absent and present:
        namespace["__getattr__"] = _missing_names(owner, absent)
        sources = tuple(present)
    names: list[str] = []
    for source in sources:
        module = source.load(owner)
        for name in source.names_of(module):
            if name in namespace:
                raise ImportError(f"{owner}: {name!r} is provided twice (again by {source.module})")
            namespace[name] = getattr(module, name)
            names.append(name)
    return sorted(names)


def _missing_names(owner: str, absent: list[Source]) -> Any:
    """A face submodule's ``__getattr__`` for the names of sources whose distribution is not installed."""
    def __getattr__(name: str) -> Any:
        if name.startswith("_"):  # private and dunder probes (copy, pickle) stay AttributeErrors
            raise AttributeError(f"module {owner!r} has no attribute {name!r}")
        for source in absent:
            if name in source.legacy:
                raise MissingPackageError(f"{owner}.{name} needs the {source.distribution} distribution, which is "
                                          f"not installed: pip install {source.distribution}")
        wanted = " ".join(sorted({s.distribution for s in absent}))
        raise MissingPackageError(f"module {owner!r} has no attribute {name!r}; it may come from a distribution "
                                  f"that is not installed: pip install {wanted}")

    return __getattr__


@dataclass
class LazyNamespace:
    """The top-level face: names from ``sources`` (resolved on first use), ``aliases`` (a face name
    for a differently named attribute: ``name -> (source, attribute)``) and the face's own
    submodules (``package``'s modules, imported on first use)."""

    owner: str
    package_path: Iterable[str]
    sources: tuple[Source, ...]
    aliases: Mapping[str, tuple[Source, str]]
    _index: dict[str, tuple[Source, str]] | None = field(default=None, repr=False)

    def submodules(self) -> list[str]:
        return sorted(m.name for m in pkgutil.iter_modules(list(self.package_path))
                      if not m.name.startswith("_"))

    def index(self) -> dict[str, tuple[Source, str]]:
        """Face name -> (source, attribute), for the installed sources; built once, on first use."""
        if self._index is None:
            index: dict[str, tuple[Source, str]] = {}
            entries = [(s, n, n) for s in self.sources if s.installed() for n in s.names()]
            entries += [(s, name, attr) for name, (s, attr) in self.aliases.items() if s.installed()]
            for source, name, attr in entries:
                if name in index:
                    raise ImportError(f"{self.owner}.{name} is provided twice: by {index[name][0].module} "
                                      f"and by {source.module}")
                index[name] = (source, attr)
            self._index = index
        return self._index

    def names(self) -> list[str]:
        return sorted(set(self.index()) | set(self.submodules()))

    def missing(self) -> list[str]:
        return sorted({s.distribution for s in (*self.sources, *(s for s, _ in self.aliases.values()))
                       if not s.installed()})

    def resolve(self, name: str) -> Any:
        if name in self.submodules():
            return importlib.import_module(f"{self.owner}.{name}")
        entry = self.index().get(name)
        if entry is not None:
            source, attr = entry
            return getattr(source.load(f"{self.owner}.{name}"), attr)
        for source in self.sources:
            if name in source.legacy and not source.installed():
                raise MissingPackageError(
                    f"{self.owner}.{name} needs the {source.distribution} distribution, which is not installed: "
                    f"pip install {source.distribution}")
        missing = self.missing()
        if missing and not name.startswith("_"):  # private and dunder probes (copy, pickle) stay AttributeErrors
            raise MissingPackageError(
                f"module {self.owner!r} has no attribute {name!r}; it may come from a distribution that is not "
                f"installed: pip install {' '.join(missing)}")
        raise AttributeError(f"module {self.owner!r} has no attribute {name!r}")
