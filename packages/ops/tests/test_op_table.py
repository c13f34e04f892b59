"""The conformance suite of flowjob_core.testing over every op of flowjob-ops (the table in op_cases.py):
gradients against central differences, forward values against numpy, coverage of every op, and their
mixed-precision classes."""
from __future__ import annotations

import numpy as np

from flowjob_core.testing import conformance_suite
from flowjob_core.testing.modules import sibling


test_op_gradients, test_op_forward, test_ops_covered = conformance_suite(sibling(__file__, "op_cases").CASES,
                                                                        plugin="ops")


def test_ops_taking_floats_declare_their_mixed_precision_class() -> None:
    """Every op of the table that takes a floating input says how ``enable_auto_mixed_precision`` treats it
    (``OpDef.compute.amp``), so a new op cannot silently stay float32; gradient ops are exempt: autodiff makes
    them after the pass, which casts the forward graph only."""
    from hypothesis import find

    from flowjob_ops.records import catalog

    records = {op.name: op for module in catalog.RECORD_MODULES for op in module.OPS}
    undeclared = set()
    for case in sibling(__file__, "op_cases").CASES:
        if "_grad" in case.op or case.op not in records or records[case.op].compute.amp is not None:
            continue
        inputs, _attrs = find(case.strategy(), lambda _: True)
        if any(np.asarray(x).dtype.kind == "f" for x in inputs):
            undeclared.add(case.op)
    assert not undeclared, f"ops taking floating inputs without an amp class: {sorted(undeclared)}"
