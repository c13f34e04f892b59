"""Core knows no op of another package by name: flowjob_core imports no other flowjob distribution, and no string
literal of its code (docstrings aside) is the name of an op another plugin registers. What core needs of a plugin's
ops comes through the registries (the eager tensor's methods: ``OpRegistry.add_tensor_method``)."""
from __future__ import annotations

import ast
from pathlib import Path

from flowjob_core import Session
from flowjob_core.imperative.tensor import Tensor

CORE = Path(__file__).resolve().parents[1] / "packages/core/src/flowjob_core"
CORE_PLUGINS = {"core-ops", "core-passes", "numpy-backend"}
OUR_DISTRIBUTIONS = ("flowjob_", "oneflow")

# literals equal to a plugin's op name that do not name that op (the word means something else there)
NOT_OP_NAMES = {
    ("ir/distribute.py", "split"): "legacy's split distribution of a blob, not the split op",
    ("trace/blob.py", "split"): "the split layout's kind in a blob's legacy unique_name suffix (:S0)",
    ("ir/layout.py", "split"): "the split layout (legacy's S) of a blob over ranks, not the split op",
    ("plugins/builtin_ops.py", "multiply"): "numpy's ufunc in scalar_mul's Elementwise descriptor",
    ("switches.py", "gather"): "FLOWJOB_CHECKPOINT_SPLIT_SAVE's value: split variables saved by a gather onto rank 0",
}


def _docstrings(tree: ast.AST) -> set[int]:
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                found.add(id(first.value))
    return found


def _sources() -> dict[str, ast.AST]:
    return {str(path.relative_to(CORE)): ast.parse(path.read_text(encoding="utf-8"))
            for path in sorted(CORE.rglob("*.py"))}


def _plugin_op_names() -> dict[str, str]:
    ops = Session().registries.ops
    names = {op.name: ops.owner(op.name) for op in ops if ops.owner(op.name) not in CORE_PLUGINS}
    assert {"reshape", "cast", "relu", "optim_adam_update"} <= set(names), "the plugins' ops were not all found"
    return names


def test_core_imports_no_other_flowjob_distribution():
    imported = []
    for where, tree in _sources().items():
        for node in ast.walk(tree):
            modules = ([alias.name for alias in node.names] if isinstance(node, ast.Import)
                       else [node.module or ""] if isinstance(node, ast.ImportFrom) and node.level == 0 else [])
            imported += [f"{where}: {m}" for m in modules
                         if m.startswith(OUR_DISTRIBUTIONS) and m.split(".")[0] != "flowjob_core"]
    assert not imported, f"flowjob_core imports other distributions: {imported}"


def test_no_literal_of_core_is_a_plugins_op_name():
    plugin_ops = _plugin_op_names()
    found = set()
    for where, tree in _sources().items():
        docs = _docstrings(tree)
        found |= {(where, node.value) for node in ast.walk(tree) if isinstance(node, ast.Constant)
                  and isinstance(node.value, str) and id(node) not in docs and node.value in plugin_ops}
    named = sorted(found - set(NOT_OP_NAMES))
    assert not named, "flowjob_core names ops of other plugins (take them from a registry): " + ", ".join(
        f"{where}: {name!r} (plugin {plugin_ops[name]!r})" for where, name in named)
    fixed = sorted(set(NOT_OP_NAMES) - found)
    assert not fixed, f"no longer found, remove from this test's lists: {fixed}"


def test_the_ops_plugins_tensor_methods_are_the_ones_the_tensor_lacks():
    methods = Session().registries.ops.tensor_methods
    assert {"reshape", "sum", "to", "normal_", "relu", "clone"} <= set(methods)
    shadowed = sorted(name for name in methods if name in vars(Tensor))
    assert not shadowed, f"registered tensor methods that flow.Tensor defines itself (never looked up): {shadowed}"


def test_the_traits_core_reads_instead_of_op_names_are_declared_by_the_ops_records():
    """Core rewrites a traced target shape and cuts bitwise fusions by these traits, never by an op's name."""
    ops = Session().registries.ops
    assert [op.name for op in ops if op.shape.target_shape_attr is not None] == ["reshape"]
    assert ops["reshape"].shape.target_shape_attr == "shape"
    assert {op.name for op in ops if op.compute.bitwise_as_parts} == {"elementwise_chain", "matmul_bias"}
