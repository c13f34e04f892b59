"""The oneflow face: explicit re-exports, lazy optional names and ``python -m oneflow info``.

The seed programs themselves run in tests/test_examples_training.py."""
import os
import subprocess
import sys

import numpy as np
import pytest

import oneflow as flow
from flowjob_core import MissingPackageError
from oneflow import _lazy
from oneflow._exports import LazyNamespace, Source, export, ops

def test_info_lists_plugins_backends_and_ops():
    run = subprocess.run([sys.executable, "-m", "oneflow", "info"], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    out = run.stdout
    for expected in ("flowjob-core", "plugins:", "core-ops", "flowjob_add_ops", "backends:", "cpu", "numpy",
                     "ops: "):
        assert expected in out


def test_info_shows_the_switches_and_the_allocator_tuning_in_effect():
    env = os.environ | {"FLOWJOB_MALLOC_TUNING": "0", "FLOWJOB_FUSION": "off"}
    out = subprocess.run([sys.executable, "-m", "oneflow", "info"], capture_output=True, text=True, timeout=120,
                         env=env, check=True).stdout
    assert "allocator tuning: off" in out
    rows = {line.split()[0]: line.split()[1] for line in out.splitlines() if line.startswith("  FLOWJOB_")}
    assert rows["FLOWJOB_FUSION"] == "0" and rows["FLOWJOB_MALLOC_TUNING"] == "0"
    assert {"FLOWJOB_CONV_ALGORITHM", "FLOWJOB_PLUGINS", "FLOWJOB_DEVICE"} <= set(rows)


def test_info_shows_the_one_thread_count_in_effect():
    env = os.environ | {"FLOWJOB_HOST_THREADS": "3"}
    out = subprocess.run([sys.executable, "-m", "oneflow", "info"], capture_output=True, text=True, timeout=120,
                         env=env, check=True).stdout
    (line,) = [line for line in out.splitlines() if line.startswith("threads per step:")]
    assert line.startswith("threads per step: 3 of ") and "FLOWJOB_HOST_THREADS" in line and "BLAS: " in line


def test_names_are_explicit_re_exports():
    from flowjob_core import global_function
    assert flow.global_function is global_function
    assert flow.float is np.dtype(np.float32) and flow.int32 is np.dtype(np.int32)
    assert "watch" in dir(flow)


def test_unknown_name_is_an_attribute_error():
    with pytest.raises(AttributeError, match="no attribute 'nonexistent'"):
        flow.nonexistent  # noqa: B018 - the failing access is the point


def test_missing_distribution_is_named():
    with pytest.raises(MissingPackageError, match="needs the flowjob-fancy distribution.*pip install flowjob-fancy"):
        _lazy.require("flowjob_not_a_real_package", "flowjob-fancy", "flow.fancy")


def test_a_name_while_a_distribution_is_missing_names_what_to_install():
    space = LazyNamespace("oneflow", [], sources=(Source("flowjob_not_a_real_package", "flowjob-fancy"),), aliases={})
    assert space.names() == [] and space.missing() == ["flowjob-fancy"]
    with pytest.raises(MissingPackageError, match="no attribute 'fancy'.*pip install flowjob-fancy"):
        space.resolve("fancy")
    with pytest.raises(AttributeError):  # private probes (copy, pickle, hasattr) stay plain
        space.resolve("__wrapped__")


def test_a_legacy_name_of_a_missing_distribution_names_that_distribution():
    space = LazyNamespace("oneflow", [], aliases={}, sources=(
        ops("array", "flow"),
        Source("flowjob_not_a_real_package", "flowjob-fancy", legacy=("fancy",))))
    with pytest.raises(MissingPackageError, match=r"oneflow\.fancy needs the flowjob-fancy distribution, which is "
                                                  r"not installed: pip install flowjob-fancy"):
        space.resolve("fancy")
    assert space.resolve("reshape") is flow.reshape


def test_face_has_no_session_at_import():
    code = "import oneflow, flowjob_core.runtime.session as s; print(s._default is None)"
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert run.stdout.strip() == "True"


# the face's tables come from the packages' __all__ -------------------------------------------------
def _namespaces():
    """(face namespace, its sources) for the top level and every face submodule."""
    yield flow, flow._NAMESPACE.sources
    for name in flow._NAMESPACE.submodules():
        module = getattr(flow, name)
        for source in getattr(module, "SOURCES", ()):
            yield module, (source,)


def test_every_name_of_every_source_reaches_its_face_namespace():
    checked = 0
    for face, sources in _namespaces():
        for source in sources:
            module = source.load("test")
            assert source.names() == source.names_of(module), source.module  # the static read agrees
            for name in source.names_of(module):
                assert getattr(face, name) is getattr(module, name), f"{face.__name__}.{name}"
                assert name in face.__all__ and name in dir(face)
                checked += 1
    assert checked > 100
    assert flow.math.greater is flow.math.__dict__["greater"] and flow.reshape.__module__ == "flowjob_ops.api.array"


def test_no_face_name_is_provided_twice_or_listed_by_hand():
    sourced = [n for s in flow._NAMESPACE.sources for n in s.names()]
    assert len(sourced) == len(set(sourced))
    by_hand = (set(flow.__all__) - set(flow._NAMESPACE.names())) | set(flow._NAMESPACE.aliases) | set(
        flow._NAMESPACE.submodules())
    assert not by_hand & set(sourced)
    assert len(flow.__all__) == len(set(flow.__all__))
    # the face's own source spells no sourced name as a string, but for the few legacy names a source
    # declares for the missing-distribution error: the packages' __all__ is the one list
    import ast
    import inspect
    legacy = {n for s in flow._NAMESPACE.sources for n in s.legacy}
    assert legacy <= set(sourced)
    literals = {n.value for n in ast.walk(ast.parse(inspect.getsource(flow))) if isinstance(n, ast.Constant)}
    assert not (literals - legacy) & set(sourced)


def test_the_face_lists_optional_names_without_importing_them():
    code = ("import sys, oneflow as flow; names = dir(flow) + flow.__all__; "
            "print('watch' in names, 'optimizer' in names, "
            "[m for m in ('flowjob_watch', 'flowjob_optim', 'flowjob_data') if m in sys.modules])")
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == "True True []"


def test_star_import_gives_every_listed_name():
    namespace: dict = {}
    exec("from oneflow import *", namespace)
    assert {"reshape", "watch", "zeros_initializer", "math", "FixedTensorDef", "global_function"} <= set(namespace)


def test_a_face_module_keeps_the_names_of_its_installed_sources_when_another_is_missing():
    namespace: dict = {}
    names = export(namespace, "flow.demo", Source("json", "json-dist"),
                   Source("flowjob_not_installed_xyz", "flowjob-xyz", legacy=("reader",)))
    assert "dumps" in names and namespace["dumps"] is __import__("json").dumps
    getattr_ = namespace["__getattr__"]
    with pytest.raises(MissingPackageError, match=r"flow.demo.reader needs the flowjob-xyz distribution.*pip install"):
        getattr_("reader")
    with pytest.raises(MissingPackageError, match="may come from a distribution that is not installed: pip install "
                                                  "flowjob-xyz"):
        getattr_("other")
    with pytest.raises(AttributeError):
        getattr_("__wrapped__")
    with pytest.raises(MissingPackageError, match="flow.demo needs the flowjob-xyz distribution"):
        export({}, "flow.demo", Source("flowjob_not_installed_xyz", "flowjob-xyz"))


def test_a_namespaced_source_gives_that_namespace_read_without_importing_its_module():
    from oneflow._exports import _literal_names

    source = ops("sorting", "flow")
    module = source.load("test")
    assert _literal_names(source._path(), "flow") == tuple(module.NAMESPACES["flow"]) == source.names()
    assert set(source.names()) < set(module.__all__)  # flow.math.top_k is not a top-level name
    assert _literal_names(source._path(), "flow.nn") is None
