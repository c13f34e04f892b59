"""The layout of ``flowjob_ops`` as the tree promises it: public modules of ``api/`` refer to ops by name and
never import one another (deferred imports included), and each module's ``NAMESPACES`` covers its ``__all__``
exactly. (tests/test_import_layout.py checks every distribution for cycles and names by arrival.)"""
from __future__ import annotations

import importlib
import pathlib

import pytest

import flowjob_ops
from flowjob_core.testing.import_graph import import_graph

PACKAGE = pathlib.Path(flowjob_ops.__file__).parent
PUBLIC = sorted(p.stem for p in (PACKAGE / "api").glob("*.py") if not p.stem.startswith("_"))
# the package's imports, deferred ones included (flowjob_core.testing.import_graph)
GRAPH = import_graph(PACKAGE.parent, "flowjob_ops")


@pytest.mark.parametrize("name", PUBLIC)
def test_a_public_module_imports_no_other_public_module(name: str) -> None:
    others = {f"flowjob_ops.api.{other}" for other in PUBLIC if other != name}
    assert not GRAPH[f"flowjob_ops.api.{name}"] & others


@pytest.mark.parametrize("name", PUBLIC)
def test_a_public_module_defines_what_it_lists(name: str) -> None:
    module = importlib.import_module(f"flowjob_ops.api.{name}")
    assert module.__all__ and all(hasattr(module, n) for n in module.__all__)
    namespaces = getattr(module, "NAMESPACES", None)
    if namespaces is not None:
        assert set(module.__all__) == {n for names in namespaces.values() for n in names}
        assert all(ns == "flow" or ns.startswith("flow.") for ns in namespaces)
