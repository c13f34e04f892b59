"""The tree is the map: no import cycles in any distribution (deferred imports included), flowjob_core's
layers import downward only, and no module is named after when it arrived or where it came from."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from flowjob_core.testing import import_graph as _graph

REPO = Path(__file__).resolve().parents[1]
SOURCE_TREES = sorted(p for p in [*REPO.glob("packages/*/src"), *REPO.glob("kernels/src")] if p.is_dir())

# flowjob_core's layers, lowest first: a module may import its own layer and the layers before it
CORE_LAYERS = ("errors", "switches", "ir", "plugins", "backends", "trace", "config", "passes", "plan", "runtime",
               "checkpoint", "api", "imperative", "testing")


def _tree_id(src: Path) -> str:
    return str(src.relative_to(REPO).parent)


@pytest.mark.parametrize("src", SOURCE_TREES, ids=_tree_id)
def test_no_import_cycles(src):
    found = _graph.cycles(_graph.import_graph(src))
    assert not found, "import cycles (each line one cycle's modules): " + "; ".join(", ".join(c) for c in found)


def test_the_graph_finds_deferred_cycles_and_ignores_type_checking(tmp_path):
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "low.py").write_text("def f():\n    from pkg import high\n    return high\n")
    (pkg / "high.py").write_text("from pkg.low import f\n")
    (pkg / "typed.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pkg import high\n")
    graph = _graph.import_graph(tmp_path)
    assert _graph.cycles(graph) == [["pkg.high", "pkg.low"]]
    assert graph["pkg.typed"] == set()


def _core_layer(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def test_core_layers_import_downward():
    graph = _graph.import_graph(REPO / "packages/core/src")
    layers = {_core_layer(m) for m in graph} - {"__init__"}
    outside = sorted(layers - set(CORE_LAYERS))
    assert not outside, f"flowjob_core has modules outside its layers: {outside}"
    upward = [f"{m} -> {t}" for m, targets in sorted(graph.items()) for t in sorted(targets)
              if _core_layer(m) != "__init__" and CORE_LAYERS.index(_core_layer(t)) > CORE_LAYERS.index(_core_layer(m))]
    assert not upward, f"flowjob_core imports against its layer order {CORE_LAYERS}: {upward}"


ACCRETION = re.compile(r"(extra|more|leftover|misc|v0\d|_v\d)", re.I)


def test_no_module_is_named_by_when_it_arrived():
    named = [str(p.relative_to(REPO)) for src in SOURCE_TREES for p in src.rglob("*.py") if ACCRETION.search(p.stem)]
    assert not named, f"modules named by when they arrived, not by what they hold: {named}"


# a name that says where code came from (legacy_*), not what it holds: the whole project ports legacy OneFlow
ORIGIN = re.compile(r"^(test_)?legacy_")
TEST_TREES = sorted(p for p in [*REPO.glob("packages/*/tests"), REPO / "tests"] if p.is_dir())


def test_no_module_or_test_is_named_by_where_it_came_from():
    files = [p for tree in [*SOURCE_TREES, *TEST_TREES] for p in tree.rglob("*.py")]
    named = sorted(str(p.relative_to(REPO)) for p in files if ORIGIN.search(p.stem))
    assert not named, f"modules and tests named by where they came from, not by their subject: {named}"
    assert ORIGIN.search("legacy_helpers") and ORIGIN.search("test_legacy_protos") and not ORIGIN.search("test_protos")


def test_the_architecture_page_names_every_core_layer_and_module_in_order():
    """docs/architecture.md's table of flowjob_core's layers lists them in the tested order, each with its modules."""
    page = (REPO / "docs/architecture.md").read_text()
    rows = {m.group(1): m.group(2) for m in re.finditer(r"^\| `(\w+)/` \| (.*) \|$", page, re.M)}
    layers = [name for name in CORE_LAYERS if (REPO / "packages/core/src/flowjob_core" / name).is_dir()]
    assert [name for name in rows if name in CORE_LAYERS] == layers, "the page's layer rows, in order"
    unnamed = [f"{layer}/{path.stem}" for layer in layers if layer != "testing"
               for path in sorted((REPO / "packages/core/src/flowjob_core" / layer).glob("*.py"))
               if path.stem != "__init__" and f"`{path.stem}`" not in rows[layer]]
    assert not unnamed, f"modules docs/architecture.md's layer table does not name: {unnamed}"
