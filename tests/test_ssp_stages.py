"""function_config.enable_ssp and flow.experimental.scope.config: each trainable variable is read through a
stale-synchronous proxy, as old as its scope's stage says, while the optimizer updates the variable itself."""
from __future__ import annotations

import numpy as np
import pytest

import oneflow as flow
import oneflow.typing as tp
from flowjob_core import ConfigError


@pytest.fixture(autouse=True)
def fresh_session():
    flow.clear_default_session()
    yield
    flow.clear_default_session()


def _ssp():
    cfg = flow.FunctionConfig()
    cfg.enable_ssp(True)
    return cfg


def _variable(name: str, stages: int | None, stage: int | None):
    scope = (flow.experimental.scope.config(ssp_num_stages=stages, ssp_stage_id=stage) if stages is not None
             else flow.experimental.scope.config())
    with scope:
        return flow.get_variable(name, shape=(2,), initializer=flow.constant_initializer(0.0))


def test_each_stage_reads_its_variable_as_old_as_its_stage_says():
    @flow.global_function(type="train", function_config=_ssp())
    def step() -> tp.Numpy:
        first = _variable("first", 3, 0)  # 3 updates old
        last = _variable("last", 3, 2)  # 1 update old
        loss = first + last
        # d loss / d variable = 1/2 per element: each update adds 1
        flow.optimizer.SGD(flow.optimizer.PiecewiseConstantScheduler([], [-2.0]), momentum=0).minimize(loss)
        return loss

    seen = [float(step()[0]) for _ in range(6)]
    # after k updates each variable holds k; first shows max(k - 2, 0) at call k, last max(k, 0) ... as legacy
    first = [0, 0, 0, 1, 2, 3]
    last = [0, 1, 2, 3, 4, 5]
    assert seen == [a + b for a, b in zip(first, last)]
    variables = flow.get_all_variables()
    np.testing.assert_array_equal(variables["first"].numpy(), [6, 6])  # the updates reach the variables
    assert variables["first_ssp_variable_proxy-SspBuffer"].numpy().shape == (3, 2)
    assert variables["last_ssp_variable_proxy-SspBuffer"].numpy().shape == (1, 2)


def test_the_proxy_stands_in_everywhere_but_in_the_update():
    @flow.global_function(type="train", function_config=_ssp())
    def step(x: tp.Numpy.Placeholder((2,))) -> tp.Numpy:
        w = _variable("w", 2, 0)
        loss = w * x
        flow.optimizer.SGD(flow.optimizer.PiecewiseConstantScheduler([], [0.1]), momentum=0).minimize(loss)
        return loss

    step(np.ones(2, np.float32))
    job = step.plan().job
    readers = [n for n in job.nodes if "w/out" in n.inputs]
    assert sorted(n.op for n in readers) == ["optim_sgd_update", "ssp_variable_proxy"]
    (proxy,) = [n for n in readers if n.op == "ssp_variable_proxy"]
    assert proxy.name == "w_ssp_variable_proxy"


def test_without_enable_ssp_the_scope_attributes_change_nothing():
    @flow.global_function(type="train")
    def step() -> tp.Numpy:
        w = _variable("w", 4, 0)
        flow.optimizer.SGD(flow.optimizer.PiecewiseConstantScheduler([], [-2.0]), momentum=0).minimize(w)
        return w

    assert [float(step()[0]) for _ in range(3)] == [0.0, 1.0, 2.0]


def test_a_variable_without_a_stage_is_refused_naming_it():
    @flow.global_function(type="train", function_config=_ssp())
    def step() -> tp.Numpy:
        w = _variable("w", None, None)
        flow.optimizer.SGD(flow.optimizer.PiecewiseConstantScheduler([], [0.1]), momentum=0).minimize(w)
        return w

    with pytest.raises(ConfigError, match=r"job 'step': function_config\.enable_ssp\(True\) reads trainable "
                                          r"variable 'w'.*ssp_num_stages=-1, ssp_stage_id=-1"):
        step()


def test_eager_mode_reads_the_variables_as_they_are_with_a_warning():
    # legacy's eager jobs skipped the rewrite
    @flow.global_function(type="train", function_config=_ssp())
    def step() -> tp.Numpy:
        w = _variable("w", 4, 0)
        flow.optimizer.SGD(flow.optimizer.PiecewiseConstantScheduler([], [-2.0]), momentum=0).minimize(w)
        return w

    flow.enable_eager_execution(True)
    try:
        with pytest.warns(UserWarning, match=r"job 'step': function_config\.enable_ssp\(True\) has no effect"):
            seen = [float(step()[0]) for _ in range(3)]
    finally:
        flow.enable_eager_execution(False)
    assert seen == [0.0, 1.0, 2.0]
