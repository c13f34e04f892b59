"""``flow.unittest`` and ``flow.eager_execution_enabled`` in process: counts, skip reasons, setUp."""
import io
import unittest
import warnings

import pytest

import oneflow as flow
from flowjob_core import get_default_session
from flowjob_core.errors import ConfigError


@pytest.fixture(autouse=True)
def fresh_session(monkeypatch):
    for var in ("ONEFLOW_TEST_DEVICE_NUM", "ONEFLOW_TEST_NODE_LIST", "ONEFLOW_TEST_ENABLE_EAGER"):
        monkeypatch.delenv(var, raising=False)
    flow.clear_default_session()
    yield
    flow.clear_default_session()


def _skip_reason(decorator):
    """The reason a decorator skips a class with, or None when the class runs."""
    cls = decorator(type("Probe", (flow.unittest.TestCase,), {"test_x": lambda self: None}))
    return cls.__dict__.get("__unittest_skip_why__") if cls.__dict__.get("__unittest_skip__") else None


def test_lazy_mode_only():
    assert flow.eager_execution_enabled() is False
    assert "eager_execution_enabled" in flow.__all__ and "unittest" in dir(flow)


def test_device_num_follows_the_session_config():
    assert flow.unittest.env.device_num() == 1
    flow.config.cpu_device_num(4)
    assert flow.unittest.env.device_num() == 4
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # gpu_device_num on a CPU machine warns once
        flow.config.gpu_device_num(2)  # legacy: gpu_device_num wins when asked for
    assert flow.unittest.env.device_num() == 2


def test_device_num_env_var_wins_and_is_checked(monkeypatch):
    flow.config.cpu_device_num(4)
    monkeypatch.setenv("ONEFLOW_TEST_DEVICE_NUM", "2")
    assert flow.unittest.env.device_num() == 2
    for bad in ("two", "0", "-1"):
        monkeypatch.setenv("ONEFLOW_TEST_DEVICE_NUM", bad)
        with pytest.raises(ConfigError, match=rf"device_num: ONEFLOW_TEST_DEVICE_NUM must be a positive integer, "
                                              rf"got '{bad}'"):
            flow.unittest.env.device_num()


def test_one_node_whatever_the_node_list_says(monkeypatch):
    assert not flow.unittest.env.has_node_list() and flow.unittest.env.node_size() == 1
    with pytest.raises(ConfigError, match="ONEFLOW_TEST_NODE_LIST is not set"):
        flow.unittest.env.node_list()
    monkeypatch.setenv("ONEFLOW_TEST_NODE_LIST", "10.0.0.1,10.0.0.2")
    assert flow.unittest.env.has_node_list() and flow.unittest.env.node_list() == ["10.0.0.1", "10.0.0.2"]
    assert flow.unittest.env.node_size() == 1
    assert "python -m oneflow launch -n 2" in _skip_reason(flow.unittest.skip_unless_2n1d())


def test_skip_reasons_name_what_is_missing():
    assert _skip_reason(flow.unittest.skip_unless_1n1d()) is None
    reason = _skip_reason(flow.unittest.skip_unless_1n2d())
    assert reason.startswith("needs 1 node(s) with 2 device(s) each; this run has 1 device(s): "
                             "set ONEFLOW_TEST_DEVICE_NUM=2 or call flow.config.cpu_device_num(2)")
    assert "one machine" not in reason  # the node count is not what is missing
    reason = _skip_reason(flow.unittest.skip_unless_2n4d())
    assert "1 node(s)" in reason and "ONEFLOW_TEST_DEVICE_NUM=4" in reason


@pytest.mark.parametrize("count, runs", [(1, {"1n1d"}), (2, {"1n1d", "1n2d"}), (4, {"1n1d", "1n2d", "1n4d"})])
def test_a_test_runs_where_the_run_has_at_least_its_devices(count, runs):
    flow.config.cpu_device_num(count)
    decorators = {"1n1d": flow.unittest.skip_unless_1n1d, "1n2d": flow.unittest.skip_unless_1n2d,
                  "1n4d": flow.unittest.skip_unless_1n4d, "2n1d": flow.unittest.skip_unless_2n1d,
                  "2n2d": flow.unittest.skip_unless_2n2d, "2n4d": flow.unittest.skip_unless_2n4d}
    assert {name for name, make in decorators.items() if _skip_reason(make()) is None} == runs


def test_decorates_a_method_too():
    @flow.unittest.skip_unless_1n4d()
    def test_method():
        pass

    with pytest.raises(unittest.SkipTest, match="needs 1 node"):
        test_method()


def test_setup_starts_a_fresh_session():
    flow.config.cpu_device_num(2)
    before = get_default_session()
    case = flow.unittest.TestCase()
    case.setUp()
    assert get_default_session() is not before and flow.unittest.env.device_num() == 1


def test_setup_refuses_an_eager_run(monkeypatch):
    monkeypatch.setenv("ONEFLOW_TEST_ENABLE_EAGER", "1")
    assert flow.unittest.env.eager_execution_enabled()
    with pytest.raises(ConfigError, match="ONEFLOW_TEST_ENABLE_EAGER=1 asks for eager execution"):
        flow.unittest.TestCase().setUp()


def test_register_test_cases_builds_a_class_per_file_filtered_by_nodes(tmp_path):
    (tmp_path / "test_small.py").write_text(
        "import oneflow as flow\n"
        "def test_one(test_case):\n    test_case.assertEqual(1, 1)\n"
        "@flow.unittest.num_nodes_required(2)\n"
        "def test_two(test_case):\n    pass\n"
        "def helper():\n    pass\n")
    (tmp_path / "notes.py").write_text("def test_never(test_case): pass\n")
    scope = {}
    flow.unittest.register_test_cases(scope, str(tmp_path), lambda nodes: nodes == 1)
    assert list(scope) == ["test_small"]
    cls = scope["test_small"]
    assert issubclass(cls, unittest.TestCase) and hasattr(cls, "test_one") and not hasattr(cls, "test_two")
    result = unittest.TextTestRunner(stream=io.StringIO()).run(
        unittest.defaultTestLoader.loadTestsFromTestCase(cls))
    assert result.wasSuccessful() and result.testsRun == 1
    scope.clear()
    flow.unittest.register_test_cases(scope, str(tmp_path), lambda nodes: nodes >= 2)
    assert hasattr(scope["test_small"], "test_two") and not hasattr(scope["test_small"], "test_one")
    with pytest.raises(ConfigError, match="is not a folder"):
        flow.unittest.register_test_cases(scope, str(tmp_path / "missing"), lambda nodes: True)
    with pytest.raises(ConfigError, match="num_nodes must be an int >= 1"):
        flow.unittest.num_nodes_required(0)


def test_typing_check_enabled_reads_its_variable(monkeypatch):
    monkeypatch.delenv("ONEFLOW_TEST_ENABLE_TYPING_CHECK", raising=False)
    assert flow.unittest.env.typing_check_enabled() is False
    monkeypatch.setenv("ONEFLOW_TEST_ENABLE_TYPING_CHECK", "1")
    assert flow.unittest.env.typing_check_enabled() is True
