"""The pass: state variable names, ordering, the version-0.1 train config and clear errors."""
import numpy as np
import pytest

from flowjob_core import ConfigError, FlowjobError, FunctionConfig, OpBuildError, add_loss, apply, get_variable
from flowjob_optim import api as opt
from flowjob_optim import train_step_name


def mse_job(toy, make_optimizer=None, minimize=True):
    def train(x: toy.Array((2,))) -> toy.Sync:
        w = get_variable("w", shape=(2,), initializer=lambda s, d, r: np.ones(s, d))
        loss = apply("toy_square", [apply("toy_sub", [w, x])])
        if minimize:
            make_optimizer().minimize(loss)
        else:
            add_loss(loss)
        return w

    return train


def sgd(momentum=0.0):
    return opt.SGD(opt.PiecewiseConstantScheduler([], [0.5]), momentum=momentum)


def test_state_variables_are_session_variables_named_as_legacy(define, toy, session):
    job = define(mse_job(toy, lambda: opt.Adam(opt.PiecewiseConstantScheduler([], [0.1]), do_bias_correction=True)))
    job(np.zeros(2, np.float32))
    names = set(session.variables.names())
    assert {"w", "w-m", "w-v", "w-beta1_t", "w-beta2_t", "System-Train-TrainStep-train"} <= names
    step = session.variables["System-Train-TrainStep-train"]
    assert step.spec.shape == (1,) and step.spec.dtype == np.int64 and not step.trainable
    assert session.variables["w-beta1_t"].spec.shape == (1,)
    assert train_step_name("train") == "System-Train-TrainStep-train"


def test_returned_variable_is_the_value_before_the_update(define, toy, session):
    job = define(mse_job(toy, sgd))
    before = job(np.zeros(2, np.float32))
    after = session.variables.get("w")
    assert before.tolist() == [1.0, 1.0]
    assert after.tolist() == [0.5, 0.5]  # grad 2 * w / 2 = 1, lr 0.5
    assert job(np.zeros(2, np.float32)).tolist() == [0.5, 0.5]


def test_update_nodes_run_after_every_reader(define, toy, session):
    job = define(mse_job(toy, lambda: sgd(0.9)))
    job(np.zeros(2, np.float32))
    order = [n.op for n in job.plan().order]
    first_update = order.index("optim_momentum_update")
    assert order.index("return") < first_update
    assert order[-1] == "optim_train_step_increment"
    assert order.index("optim_learning_rate") < order.index("optim_train_step_increment")


def test_version_0_1_train_config(define, toy, session):
    cfg = FunctionConfig()
    cfg.train.primary_lr(0.5)
    cfg.train.model_update_conf({"momentum_conf": {"beta": 0.5}})
    job = define(mse_job(toy, minimize=False), config=cfg)
    job(np.zeros(2, np.float32))
    job(np.zeros(2, np.float32))
    # m1 = -0.5 * 1 -> w 0.5; g = 0.5, m2 = 0.5 * -0.5 - 0.25 = -0.5 -> w 0.0
    assert session.variables.get("w").tolist() == [0.0, 0.0]
    assert session.variables.get("w-momentum").tolist() == [-0.5, -0.5]


def test_version_0_1_naive_conf_with_decay_and_clip(define, toy, session):
    cfg = FunctionConfig()
    cfg.train.primary_lr(1.0)
    cfg.train.model_update_conf({
        "naive_conf": {},
        "learning_rate_decay": {"piecewise_scaling_conf": {"boundaries": [0], "scales": [1.0, 0.5]}},
        "clip_conf": {"clip_by_global_norm": {"clip_norm": 0.5}},
    })
    job = define(mse_job(toy, minimize=False), config=cfg)
    job(np.zeros(2, np.float32))  # g = (1, 1), norm sqrt 2 -> clipped to 0.5; lr 1
    np.testing.assert_allclose(session.variables.get("w"), 1 - 0.5 / np.sqrt(2), rtol=1e-6)
    assert "w-momentum" not in session.variables


def test_version_0_1_adam_conf(define, toy, session):
    cfg = FunctionConfig()
    cfg.train.primary_lr(0.1)
    cfg.train.model_update_conf({"adam_conf": {"beta1": 0.5}})
    job = define(mse_job(toy, minimize=False), config=cfg)
    job(np.zeros(2, np.float32))
    # m = 0.5, v = 0.001: w = 1 - 0.1 * 0.5 / sqrt(0.001)
    # float32 arithmetic, as legacy: 1 - 0.999 is 1.00000e-3 only to about 5e-5
    np.testing.assert_allclose(session.variables.get("w"), 1 - 0.1 * 0.5 / (np.sqrt(0.001) + 1e-8), rtol=1e-4)


@pytest.mark.parametrize("conf, message", [
    ({"naive_conf": {}, "momentum_conf": {}}, "exactly one of"),
    ({"sgd_conf": {}}, "unknown field"),
    ({"momentum_conf": {"betta": 0.9}}, "unknown field"),
    ({"naive_conf": {}, "warmup_conf": {"linear_conf": {"warmup_batches": 3}}}, "start_multiplier"),
])
def test_version_0_1_bad_conf_names_the_job_and_field(define, toy, conf, message):
    cfg = FunctionConfig()
    cfg.train.primary_lr(0.1)
    cfg.train.model_update_conf(conf)
    job = define(mse_job(toy, minimize=False), config=cfg)
    with pytest.raises(ConfigError, match=message) as info:
        job(np.zeros(2, np.float32))
    assert "'train'" in str(info.value)


def test_version_0_1_needs_both_settings(define, toy):
    cfg = FunctionConfig()
    cfg.train.primary_lr(0.1)
    job = define(mse_job(toy, minimize=False), config=cfg)
    with pytest.raises(ConfigError, match="train.model_update_conf"):
        job(np.zeros(2, np.float32))


def test_train_job_without_optimizer_names_the_job(define, toy):
    job = define(mse_job(toy, minimize=False))
    with pytest.raises(FlowjobError, match="train job 'train' has a loss but no optimizer"):
        job(np.zeros(2, np.float32))


def test_minimize_in_a_predict_job_trains_it_with_a_warning(define, toy, session):
    # legacy's minimize set the job's train conf, which replaced its predict conf
    job = define(mse_job(toy, sgd), type="predict")
    with pytest.warns(UserWarning, match="job 'train' is declared type='predict' and calls SGD.minimize"):
        before = job(np.zeros(2, np.float32))
    assert before.tolist() == [1.0, 1.0]
    assert session.variables.get("w").tolist() == [0.5, 0.5]  # updated as the train job's test above
    assert job.ensure_traced().type == "train"


def test_add_loss_in_a_predict_job_stays_an_error(define, toy):
    # legacy's add_loss checked the job's train conf, which only minimize set
    job = define(mse_job(toy, minimize=False), type="predict")
    with pytest.raises(FlowjobError, match="job 'train': add_loss/minimize needs type='train'"):
        job(np.zeros(2, np.float32))


def test_minimize_outside_a_job_is_a_clear_error():
    with pytest.raises(FlowjobError, match="only valid inside a @flow.global_function body"):
        sgd().minimize(None)


def test_two_optimizers_in_one_job_are_refused(define, toy):
    def train(x: toy.Array((2,))) -> toy.Sync:
        w = get_variable("w", shape=(2,))
        loss = apply("toy_sub", [w, x])
        sgd().minimize(loss)
        sgd().minimize(loss)
        return w

    with pytest.raises(FlowjobError, match="2 different optimizers"):
        define(train)(np.zeros(2, np.float32))


def test_the_same_optimizer_may_minimize_several_losses(define, toy, session):
    def train(x: toy.Array((2,))) -> toy.Sync:
        w = get_variable("w", shape=(2,))
        optimizer = sgd()
        optimizer.minimize([apply("toy_mul", [w, x])])
        optimizer.minimize(apply("toy_mul", [w, x]))
        return w

    define(train)(np.ones(2, np.float32))
    # two losses of two elements: raw gradient 2 per element, scaled by 1/4, lr 0.5
    assert session.variables.get("w").tolist() == [-0.25, -0.25]


def test_bad_arguments_fail_when_the_optimizer_is_made():
    with pytest.raises(TypeError, match="lr_scheduler must be a schedule"):
        opt.SGD(0.1)
    with pytest.raises(TypeError, match="grad_clipping"):
        opt.SGD(opt.PiecewiseConstantScheduler([], [0.1]), grad_clipping=1.0)
    with pytest.raises(ValueError, match="clip_norm must be positive"):
        opt.grad_clipping.by_global_norm(0)


def test_integer_trainable_variables_are_refused(define, toy):
    def train(x: toy.Array((2,))) -> toy.Sync:
        w = get_variable("w", shape=(2,), dtype=np.int32)
        opt.SGD(opt.PiecewiseConstantScheduler([], [0.1]), momentum=0).minimize(apply("toy_mul", [x, w]))
        return w

    with pytest.raises(OpBuildError, match="job 'train', op 'w_optimizer'.*only floating variables can be trained"):
        define(train)(np.ones(2, np.float32))


def test_untrainable_variables_are_not_updated(define, toy, session):
    def train(x: toy.Array((2,))) -> toy.Sync:
        w = get_variable("w", shape=(2,), trainable=False)
        v = get_variable("v", shape=(2,))
        opt.SGD(opt.PiecewiseConstantScheduler([], [1.0]), momentum=0).minimize(
            apply("toy_mul", [apply("toy_sub", [v, w]), x]))
        return w

    define(train)(np.ones(2, np.float32))
    assert session.variables.get("w").tolist() == [0.0, 0.0]
    assert session.variables.get("v").tolist() == [-0.5, -0.5]


def test_optimizer_names_the_schedule_error_source(define, toy):
    def train(x: toy.Array((2,))) -> toy.Sync:
        w = get_variable("w", shape=(2,))
        opt.SGD(opt.CustomScheduler("nope/out"), momentum=0).minimize(apply("toy_mul", [w, x]))
        return w

    with pytest.raises(FlowjobError, match="'nope/out' is not a blob of this job"):
        define(train)(np.ones(2, np.float32))


def test_variables_argument_limits_what_is_updated(define, toy, session):
    def train(x: toy.Array((2,))) -> toy.Sync:
        w = get_variable("w", shape=(2,))
        v = get_variable("v", shape=(2,))
        opt.SGD(opt.PiecewiseConstantScheduler([], [1.0]), momentum=0, variables=["v"]).minimize(
            apply("toy_mul", [apply("toy_sub", [v, w]), x]))
        return w

    define(train)(np.ones(2, np.float32))
    assert session.variables.get("w").tolist() == [0.0, 0.0]
    assert session.variables.get("v").tolist() == [-0.5, -0.5]


def test_version_0_1_secondary_lr_and_l2_apply_to_biases(define, toy, session):
    cfg = FunctionConfig()
    cfg.train.primary_lr(1.0)
    cfg.train.secondary_lr(0.5)
    cfg.train.weight_l2(1.0)
    cfg.train.model_update_conf({"naive_conf": {}})

    def train(x: toy.Array((2,))) -> toy.Sync:
        w = get_variable("dense-weight", shape=(2,), initializer=lambda s, d, r: np.ones(s, d))
        b = get_variable("dense-bias", shape=(2,), initializer=lambda s, d, r: np.ones(s, d))
        add_loss(apply("toy_mul", [apply("toy_sub", [w, b]), x]))
        return w

    define(train, config=cfg)(np.ones(2, np.float32))
    # gradients +-0.5; the weight also gets its L2 term 1.0 * w
    assert session.variables.get("dense-weight").tolist() == [-0.5, -0.5]
    assert session.variables.get("dense-bias").tolist() == [1.25, 1.25]
