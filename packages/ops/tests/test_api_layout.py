"""The layout of ``flowjob_ops`` as the tree promises it: public modules of ``api/`` refer to ops by name and
never import one another (deferred imports included), each module's ``NAMESPACES`` covers its ``__all__``
exactly, and no module is named by when it arrived."""
from __future__ import annotations

import ast
import importlib
import pathlib
import re

import pytest

import flowjob_ops

PACKAGE = pathlib.Path(flowjob_ops.__file__).parent
PUBLIC = sorted(p.stem for p in (PACKAGE / "api").glob("*.py") if not p.stem.startswith("_"))


def _imported_modules(path: pathlib.Path) -> set[str]:
    """Every ``flowjob_ops`` module a file imports, at any depth of its code."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("flowjob_ops"):
            found.add(node.module)
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names if alias.name.startswith("flowjob_ops"))
    return found


@pytest.mark.parametrize("name", PUBLIC)
def test_a_public_module_imports_no_other_public_module(name: str) -> None:
    others = {f"flowjob_ops.api.{other}" for other in PUBLIC if other != name}
    assert not _imported_modules(PACKAGE / "api" / f"{name}.py") & others


@pytest.mark.parametrize("name", PUBLIC)
def test_a_public_module_defines_what_it_lists(name: str) -> None:
    module = importlib.import_module(f"flowjob_ops.api.{name}")
    assert module.__all__ and all(hasattr(module, n) for n in module.__all__)
    namespaces = getattr(module, "NAMESPACES", None)
    if namespaces is not None:
        assert set(module.__all__) == {n for names in namespaces.values() for n in names}
        assert all(ns == "flow" or ns.startswith("flow.") for ns in namespaces)


def test_no_module_is_named_by_when_it_arrived() -> None:
    when = re.compile(r"extra|more|leftover|v0\d|_v\d")
    named = [str(p.relative_to(PACKAGE)) for p in PACKAGE.rglob("*.py") if when.search(p.stem)]
    assert not named
