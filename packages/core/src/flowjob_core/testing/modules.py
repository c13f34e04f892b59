"""Loading a test folder's helper modules by path.

Tests run with ``--import-mode=importlib`` (several packages have ``tests/`` folders with
the same file names), so a test module cannot ``import`` a sibling helper; ``sibling``
loads it once per path.
"""
from __future__ import annotations

import hashlib
import importlib.util
import pathlib
import sys
from types import ModuleType


def sibling(test_file: str, stem: str) -> ModuleType:
    """The module ``<stem>.py`` next to ``test_file`` (pass ``__file__``), loaded once."""
    path = pathlib.Path(test_file).resolve().with_name(f"{stem}.py")
    name = f"_flowjob_test_{hashlib.sha1(str(path).encode()).hexdigest()[:10]}_{stem}"
    module = sys.modules.get(name)
    if module is None:
        spec = importlib.util.spec_from_file_location(name, path)
        if spec is None or spec.loader is None:
            raise ImportError(f"cannot load test helper {path}")
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module  # before executing: dataclasses and pickling look it up
        spec.loader.exec_module(module)
    return module
