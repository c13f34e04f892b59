"""The numerics check: with ``flow.config.enable_numerics_check(True)`` (or ``FLOWJOB_NUMERICS_CHECK=1``, or a
job's ``enable_numerics_check``) a step stops at the first op whose output holds NaN or an Inf that op made
without its record declaring it (``OpDef.compute.intended_inf``), or at a fed argument holding either, naming the op,
the job and the source line; the session stays usable; off, the step function is the plain one. Legacy's
``flow.config.enable_debug_mode`` checks no values."""
import numpy as np
import pytest

import oneflow as flow
import oneflow.typing as tp
from flowjob_core import FlowjobError, get_default_session
from flowjob_core.plan.numerics import NumericsError


@pytest.fixture(autouse=True)
def fresh_session():
    flow.clear_default_session()
    yield
    flow.clear_default_session()


def _line_of(marker: str) -> int:
    """The line of this file holding ``marker`` (the op a message must point at)."""
    with open(__file__) as fh:
        return next(i for i, line in enumerate(fh, 1) if marker in line and "_line_of" not in line)


def define_train(config=None):
    @flow.global_function(type="train", function_config=config)
    def train(images: tp.Numpy.Placeholder((4, 3))) -> tp.Numpy:
        w = flow.get_variable("w", shape=(3, 2), initializer=flow.constant_initializer(0.5))
        h = flow.matmul(images, w)
        root = flow.math.sqrt(h - 1.0, name="root")  # numerics: NaN where h < 1
        loss = flow.math.reduce_mean(root * root)
        flow.optimizer.SGD(flow.optimizer.PiecewiseConstantScheduler([], [0.1]), momentum=0).minimize(loss)
        return loss

    return train


def _w() -> np.ndarray:
    flow.sync_default_session()
    return get_default_session().variables.get("w").copy()


def test_nan_from_an_op_names_op_job_and_line_and_changes_no_variable():
    flow.config.enable_numerics_check(True)
    train = define_train()
    ok = np.full((4, 3), 2.0, np.float32)  # h = 3 > 1
    train(ok)
    before = _w()
    with pytest.raises(NumericsError) as excinfo, np.errstate(invalid="ignore"):
        train(np.zeros((4, 3), np.float32))  # h = 0: sqrt(-1)
    message = str(excinfo.value)
    assert "job 'train'" in message and "op 'root" in message
    assert f"{__file__}:{_line_of('numerics: NaN where')}" in message
    assert "8 NaN and 0 Inf among 8 values" in message
    np.testing.assert_array_equal(_w(), before)  # stopped before the update
    assert np.isfinite(train(ok)).all()  # the session goes on


def test_nan_in_a_fed_argument_names_the_argument_before_any_op_runs():
    flow.config.enable_numerics_check(True)
    train = define_train()
    train(np.full((4, 3), 2.0, np.float32))
    before = _w()
    images = np.full((4, 3), 2.0, np.float32)
    images[1, 2] = np.nan
    with pytest.raises(NumericsError, match=r"job 'train', argument 'images': the fed array holds 1 NaN and 0 Inf"):
        train(images)
    np.testing.assert_array_equal(_w(), before)


def test_inf_is_caught_too():
    flow.config.enable_numerics_check(True)

    @flow.global_function()
    def divide(x: tp.Numpy.Placeholder((3,)), y: tp.Numpy.Placeholder((3,))) -> tp.Numpy:
        return flow.math.divide(x, y, name="ratio")

    with np.errstate(divide="ignore"):
        with pytest.raises(NumericsError, match=r"op 'ratio' \(divide\).*0 NaN and 1 Inf among 3 values"):
            divide(np.ones(3, np.float32), np.array([1, 0, 2], np.float32))
    np.testing.assert_array_equal(divide(np.ones(3, np.float32), np.ones(3, np.float32)), np.ones(3))


def test_the_function_config_option_turns_it_on_for_one_job():
    cfg = flow.function_config()
    cfg.enable_numerics_check(True)
    checked = define_train(cfg)
    with pytest.raises(NumericsError, match="job 'train'"), np.errstate(invalid="ignore"):
        checked(np.zeros((4, 3), np.float32))

    @flow.global_function()
    def unchecked(x: tp.Numpy.Placeholder((2,))) -> tp.Numpy:
        return flow.math.sqrt(x)

    with np.errstate(invalid="ignore"):
        assert np.isnan(unchecked(np.array([-1.0, 4.0], np.float32))[0])  # NaN passes silently when off


def test_the_function_option_overrides_the_session_choice():
    flow.config.enable_numerics_check(True)
    cfg = flow.function_config()
    cfg.enable_numerics_check(False)

    @flow.global_function(function_config=cfg)
    def job(x: tp.Numpy.Placeholder((2,))) -> tp.Numpy:
        return flow.math.sqrt(x)

    with np.errstate(invalid="ignore"):
        assert np.isnan(job(np.array([-1.0, 4.0], np.float32))[0])


def test_off_the_step_function_is_the_generated_one():
    train = define_train()
    plain = train.plan()
    generated = getattr(plain.step, "generated", plain.step)  # a recording backend's step keeps the generated one
    assert generated.__code__.co_filename.startswith("<flowjob plan")
    flow.clear_default_session()
    flow.config.enable_numerics_check(True)
    checked = define_train().plan()
    assert not checked.step.__code__.co_filename.startswith("<flowjob plan")
    assert checked.source.startswith("def step(feeds):")  # the same kind of straight-line code, kernels wrapped
    # the elementwise ops stay apart under the check, so a NaN is named on its own op, not on a chain
    assert "elementwise_chain" in {n.op for n in plain.order}
    assert "elementwise_chain" not in {n.op for n in checked.order}


def test_a_bad_option_value_is_refused_by_name():
    with pytest.raises(FlowjobError, match="enable_numerics_check expects a bool"):
        flow.function_config().enable_numerics_check("yes")


def test_a_smaller_dynamic_feed_is_checked_too():
    flow.config.enable_numerics_check(True)

    @flow.global_function()
    def root(x: tp.ListNumpy.Placeholder((6,))) -> tp.ListNumpy:
        return flow.math.sqrt(x, name="root")

    np.testing.assert_array_equal(root([np.full(6, 4.0, np.float32)])[0], np.full(6, 2.0))
    with np.errstate(invalid="ignore"):
        with pytest.raises(NumericsError, match=r"op 'root' \(sqrt\).*1 NaN and 0 Inf among 4 values"):
            root([np.array([1, 4, -1, 9], np.float32)])  # the step specialised for 4 values checks as well
    np.testing.assert_array_equal(root([np.array([1, 4], np.float32)])[0], [1, 2])


@pytest.mark.parametrize("blas_fusion", ["1", "0"])  # the update fused into the weight gradient's GEMM, and not
def test_an_update_that_overflows_its_variable_stops_that_step(monkeypatch, blas_fusion):
    monkeypatch.setenv("FLOWJOB_DEVICE", "cpu")  # the BLAS-fused update is the cpu backend's
    monkeypatch.setenv("FLOWJOB_BLAS_FUSION", blas_fusion)
    flow.config.enable_numerics_check(True)

    @flow.global_function(type="train")
    def train(images: tp.Numpy.Placeholder((4, 3))) -> tp.Numpy:
        w = flow.get_variable("w", shape=(3, 2), initializer=flow.constant_initializer(0.5))
        loss = flow.math.reduce_sum(flow.matmul(images, w))
        flow.optimizer.SGD(flow.optimizer.PiecewiseConstantScheduler([], [1e38]), momentum=0).minimize(loss)
        return loss

    with pytest.raises(NumericsError) as excinfo, np.errstate(over="ignore"):
        train(np.ones((4, 3), np.float32))  # w - 1e38 * 4 overflows float32 in this very step
    message = str(excinfo.value)
    assert "job 'train'" in message and "in place" in message and "'w" in message
    assert "6 Inf among 6 values" in message
    ops = [n.op for n in train.plan().order]
    assert ("optim_sgd_matmul_update" in ops) == (blas_fusion == "1" and "optim_sgd_update" not in ops)


def test_with_fusion_on_a_nan_is_named_on_the_member_op_not_the_chain(monkeypatch):
    monkeypatch.setenv("FLOWJOB_FUSION", "1")
    flow.config.enable_numerics_check(True)

    @flow.global_function()
    def chain(x: tp.Numpy.Placeholder((4,))) -> tp.Numpy:
        shifted = x + 1.0  # a chain would start here: ScalarAdd
        logged = flow.math.log(shifted, name="the_log")  # numerics: NaN where x < -1
        return flow.math.exp(logged) * 2.0

    with pytest.raises(NumericsError) as excinfo, np.errstate(invalid="ignore"):
        chain(np.array([-3.0, 0.0, 1.0, 2.0], np.float32))
    message = str(excinfo.value)
    assert "op 'the_log' (log)" in message
    assert f"{__file__}:{_line_of('numerics: NaN where x < -1')}" in message


def _gpt2_attention(q, k, v, n_ctx):
    # GPT-2's attention as the model zoo wrote it: the causal mask fills with -inf on purpose
    w = flow.matmul(q, k, transpose_b=True)
    w = flow.math.fused_scale_tril(w, fill_value=float("-inf"), scale=1.0 / np.sqrt(n_ctx))
    w = flow.nn.softmax(w, axis=-1)
    return flow.matmul(w, v)


def _define_gpt2_block(config=None):
    @flow.global_function(type="train", function_config=config)
    def gpt2_block(x: tp.Numpy.Placeholder((2, 4, 8))) -> tp.Numpy:
        def project(name):
            w = flow.get_variable(f"{name}-weight", shape=(8, 8), initializer=flow.random_normal_initializer(0.02))
            return flow.reshape(flow.matmul(flow.reshape(x, (8, 8)), w), (2, 4, 8))

        q, k, v = project("q"), project("k"), project("v")
        a = _gpt2_attention(q, k, v, 8)
        loss = flow.math.reduce_mean(a * a)
        flow.optimizer.SGD(flow.optimizer.PiecewiseConstantScheduler([], [0.1]), momentum=0).minimize(loss)
        return loss

    return gpt2_block


X_GPT = np.random.default_rng(4).standard_normal((2, 4, 8)).astype(np.float32)


def test_legacy_debug_mode_checks_no_values():
    flow.config.enable_debug_mode(True)
    assert np.isfinite(_define_gpt2_block()(X_GPT)).all()  # the -inf mask is legacy's own

    @flow.global_function()
    def root(x: tp.Numpy.Placeholder((2,))) -> tp.Numpy:
        return flow.math.sqrt(x)

    with np.errstate(invalid="ignore"):
        assert np.isnan(root(np.array([-1.0, 4.0], np.float32))[0])


@pytest.mark.parametrize("how", ["flow.config", "environment", "function_config"])
def test_an_inf_an_op_makes_on_purpose_passes_the_check(monkeypatch, how):
    config = None
    if how == "flow.config":
        flow.config.enable_numerics_check(True)
    elif how == "environment":
        monkeypatch.setenv("FLOWJOB_NUMERICS_CHECK", "1")
    else:
        config = flow.function_config()
        config.enable_numerics_check(True)
    train = _define_gpt2_block(config)
    assert np.isfinite(train(X_GPT)).all()
    assert not train.plan().step.__code__.co_filename.startswith("<flowjob plan")  # the check is on

    @flow.global_function(function_config=config)
    def masked(x: tp.Numpy.Placeholder((3, 3))) -> tp.Numpy:
        mask = flow.math.tril(x, fill_value=float("-inf"))  # an intended -inf, passed on by the ops after it
        return flow.math.reduce_max(flow.reshape(mask, (9,)) + 1.0, axis=0, keepdims=True)

    np.testing.assert_array_equal(masked(np.ones((3, 3), np.float32)), [2.0])

    @flow.global_function(function_config=config)
    def overflows(x: tp.Numpy.Placeholder((2,))) -> tp.Numpy:
        return flow.math.exp(x, name="the_exp")  # an Inf nobody meant

    with pytest.raises(NumericsError, match=r"op 'the_exp' \(exp\).*0 NaN and 1 Inf"), np.errstate(over="ignore"):
        overflows(np.array([1.0, 1000.0], np.float32))


def test_the_switch_is_read_and_a_bad_value_named(monkeypatch):
    monkeypatch.setenv("FLOWJOB_NUMERICS_CHECK", "maybe")
    with pytest.raises(FlowjobError, match="FLOWJOB_NUMERICS_CHECK='maybe'"):
        define_train()(np.ones((4, 3), np.float32))
    monkeypatch.setenv("FLOWJOB_NUMERICS_CHECK", "1")
    flow.clear_default_session()
    flow.config.enable_numerics_check(False)  # the session's choice overrides the switch
    with np.errstate(invalid="ignore"):
        assert np.isnan(define_train()(np.zeros((4, 3), np.float32))).all()
