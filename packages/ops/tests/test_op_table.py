"""The conformance suite of flowjob_core.testing over every op of flowjob-ops (the table in op_cases.py):
gradients against central differences, forward values against numpy, and coverage of every op."""
from __future__ import annotations

import importlib.util
import pathlib
import sys

from flowjob_core.testing import conformance_suite


def _load_cases() -> list:
    name = "_flowjob_ops_tests_op_cases"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, pathlib.Path(__file__).resolve().with_name("op_cases.py"))
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name].CASES


test_op_gradients, test_op_forward, test_ops_covered = conformance_suite(_load_cases(), plugin="ops")
