"""The conformance suite of flowjob_core.testing over every op of flowjob-ops (the table in op_cases.py):
gradients against central differences, forward values against numpy, and coverage of every op."""
from __future__ import annotations


from flowjob_core.testing import conformance_suite
from flowjob_core.testing.modules import sibling


test_op_gradients, test_op_forward, test_ops_covered = conformance_suite(sibling(__file__, "op_cases").CASES,
                                                                        plugin="ops")
