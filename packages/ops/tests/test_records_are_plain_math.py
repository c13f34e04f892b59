"""Records hold the plain ``xp`` math; the host tuning (cache blocks and work over the host threads,
``flowjob_core.backends.host_blocks``; products cut over the host threads, ``host_gemm``) lives in the cpu
overrides (``flowjob_ops.overrides.cpu``), where the conformance suite compares it with the records."""
from __future__ import annotations

import ast
from pathlib import Path

import flowjob_ops.records

HOST_TUNING = ("flowjob_core.backends.host_blocks", "flowjob_core.backends.host_gemm",
               "flowjob_core.backends.host_threads")


def host_tuning_imports(folder: Path) -> list[str]:
    """``module: imported name`` for every import of a host-tuning module by a module under ``folder``."""
    found = []
    for path in sorted(folder.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            names = ([node.module or ""] if isinstance(node, ast.ImportFrom)
                     else [a.name for a in node.names] if isinstance(node, ast.Import) else [])
            found += [f"{path.relative_to(folder.parent)}: {name}" for name in names if name.startswith(HOST_TUNING)]
    return found


def test_no_record_imports_the_host_tuning() -> None:
    assert host_tuning_imports(Path(flowjob_ops.records.__file__).parent) == []


def test_the_scan_sees_the_overrides_that_do() -> None:
    from flowjob_ops.overrides import cpu

    found = host_tuning_imports(Path(cpu.__file__).parent)
    assert any("activations_in_blocks.py" in line and "host_blocks" in line for line in found), found
    assert any("matmul_parts.py" in line and "host_gemm" in line for line in found), found
