"""A legacy-style ``flow.unittest`` test file, written as a user would, runs under pytest and under
``python -m unittest``: the 1n1d class runs its jobs, the 1n2d class is skipped with the reason on a
one-device run and runs where the run has two devices (the legacy env var, or flow.config)."""
import os
import subprocess
import sys
import textwrap

import pytest

LEGACY_TEST = textwrap.dedent('''
    import unittest

    import numpy as np
    import oneflow as flow
    import oneflow.typing as tp

    {prelude}


    @flow.unittest.skip_unless_1n1d()
    class TestAdd(flow.unittest.TestCase):
        def test_add(test_case):
            @flow.global_function()
            def add_job(x: tp.Numpy.Placeholder((2, 3))) -> tp.Numpy:
                return x + x

            x = np.arange(6, dtype=np.float32).reshape(2, 3)
            test_case.assertTrue(np.array_equal(add_job(x), 2 * x))
            test_case.assertFalse(flow.eager_execution_enabled())

        def test_variable_starts_fresh(test_case):
            _train_twice(test_case)

        def test_variable_starts_fresh_again(test_case):
            _train_twice(test_case)  # 3.0 again: setUp cleared the session the other test trained in


    def _train_twice(test_case):
        @flow.global_function(type="train")
        def train_job() -> tp.Numpy:
            w = flow.get_variable("w", shape=(1,), initializer=flow.constant_initializer(3.0))
            flow.optimizer.SGD(flow.optimizer.PiecewiseConstantScheduler([], [1.0])).minimize(w)
            return w

        test_case.assertEqual([float(train_job()[0]) for _ in range(2)], [3.0, 2.0])


    @flow.unittest.skip_unless_1n2d()
    class TestTwoDevices(flow.unittest.TestCase):
        def test_mirrored(test_case):
            flow.config.cpu_device_num(2)

            @flow.global_function()
            def relu_job(x: tp.ListNumpy.Placeholder((2,))) -> tp.ListNumpy:
                return flow.math.relu(x)

            pieces = [np.array([-1.0, 2.0], np.float32), np.array([3.0, -4.0], np.float32)]
            out = relu_job(pieces)
            test_case.assertEqual(len(out), 2)
            test_case.assertTrue(np.array_equal(out[1], [3.0, 0.0]))


    @flow.unittest.skip_unless_2n1d()
    class TestTwoNodes(flow.unittest.TestCase):
        def test_never_here(test_case):
            test_case.fail("a 2-node test ran on one machine")


    if __name__ == "__main__":
        unittest.main()
''')


def _run(tmp_path, runner, prelude="", device_num=None):
    path = tmp_path / "test_legacy_style.py"
    path.write_text(LEGACY_TEST.format(prelude=prelude))
    env = {k: v for k, v in os.environ.items() if not k.startswith("ONEFLOW_TEST_")}
    if device_num is not None:
        env["ONEFLOW_TEST_DEVICE_NUM"] = str(device_num)
    args = {"pytest": ["-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider", path.name],
            "unittest": ["-m", "unittest", "-v", "test_legacy_style"]}[runner]
    run = subprocess.run([sys.executable, *args], cwd=tmp_path, env=env, capture_output=True, text=True,
                         timeout=180)
    return run.returncode, run.stdout + run.stderr


TWO_DEVICES = "needs 1 node(s) with 2 device(s) each; this run has 1 device(s)"
TWO_NODES = ("needs 2 node(s) with 1 device(s) each; this run has 1 node(s): start one rank per node with "
             "python -m oneflow launch -n 2 (flowjob-mpi)")


def test_under_pytest_one_device_skips_the_two_device_class_with_the_reason(tmp_path):
    rc, out = _run(tmp_path, "pytest")
    assert rc == 0, out
    assert "3 passed, 2 skipped" in out
    assert TWO_DEVICES in out and TWO_NODES in out


def test_under_unittest_one_device_skips_the_two_device_class_with_the_reason(tmp_path):
    rc, out = _run(tmp_path, "unittest")
    assert rc == 0, out
    assert "Ran 5 tests" in out and "OK (skipped=2)" in out
    assert "test_add (test_legacy_style.TestAdd" in out and TWO_DEVICES in out and TWO_NODES in out


@pytest.mark.parametrize("runner", ["pytest", "unittest"])
def test_the_legacy_env_var_gives_the_run_two_devices(tmp_path, runner):
    rc, out = _run(tmp_path, runner, device_num=2)
    assert rc == 0, out
    assert ("4 passed, 1 skipped" in out) if runner == "pytest" else ("OK (skipped=1)" in out)
    assert TWO_DEVICES not in out and TWO_NODES in out


def test_flow_config_before_the_classes_gives_the_run_two_devices(tmp_path):
    rc, out = _run(tmp_path, "unittest", prelude="flow.config.cpu_device_num(2)")
    assert rc == 0, out
    assert "test_mirrored (test_legacy_style.TestTwoDevices" in out and "OK (skipped=1)" in out


def test_a_failing_legacy_test_fails_the_run(tmp_path):
    # the runs above are green because the jobs compute what the tests assert, not by construction
    rc, out = _run(tmp_path, "unittest", prelude="np.array_equal = lambda a, b: False")
    assert rc != 0 and "FAILED (failures=1, skipped=2)" in out, out
