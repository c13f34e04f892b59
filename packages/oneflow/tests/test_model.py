"""``flow.model`` (legacy v0.4's object-style API): ``Model.fit`` trains, validates, checkpoints and calls back, in
the function style (job functions; the tests up to ``ObjectStyle`` below) and the object style (eager modules
trained by ``flow.optim``, Model's default)."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import oneflow as flow
from flowjob_core import ConfigError, JobDefinitionError

RNG = np.random.default_rng(0)
X = RNG.normal(size=(16, 4)).astype(np.float32)
TRUE_W = np.array([[1.0], [-2.0], [0.5], [3.0]], np.float32)
Y = X @ TRUE_W
TRAIN_STEP = "System-Train-TrainStep-Regression_Model_train_numpy_job_0"  # legacy's job name in the counter's


@pytest.fixture(autouse=True)
def fresh_session():
    flow.clear_default_session()
    yield
    flow.clear_default_session()


def sgd(lr: float = 0.1):
    return flow.optimizer.SGD(flow.optimizer.PiecewiseConstantScheduler([], [lr]), momentum=0)


class Regression(flow.model.Model):
    """Least squares on one weight, ``w`` starting at zero."""

    def __init__(self, lr: float = 0.1, **kwargs):
        super().__init__(is_deprecated_function_style=True, **kwargs)
        self.lr = lr

    def forward(self, x):
        w = flow.get_variable("w", shape=(4, 1), initializer=flow.zeros_initializer())
        return flow.matmul(x, w)

    def training_step(self, batch, optimizer_idx):
        x, y = batch
        return flow.math.reduce_mean(flow.math.square(self(x) - y))

    def validation_step(self, batch):
        (x,) = batch
        return self(x)

    def configure_optimizers(self):
        return sgd(self.lr)


class TrainData(flow.model.NumpyDataModule):
    def __init__(self):
        super().__init__()
        self.calls = []

    def forward(self, step_idx, optimizer_idx):
        self.calls.append((step_idx, optimizer_idx))
        return X, Y


class ValData(flow.model.NumpyDataModule):
    def forward(self, step_idx, optimizer_idx):
        return (X[:4],)


class Recorder(flow.model.Callback):
    def __init__(self):
        self.events = []

    def on_training_step_end(self, outputs, step_idx, optimizer_idx):
        self.events.append(("train", step_idx, optimizer_idx, outputs))

    def on_validation_step_end(self, outputs, step_idx):
        self.events.append(("validation", step_idx, None, outputs))

    def losses(self):
        return [float(outputs.numpy()) for kind, _, _, outputs in self.events if kind == "train"]


def training(data=None, exe_cfg=None):
    config = flow.model.TrainingConfig()
    config.config_data(data if data is not None else TrainData())
    if exe_cfg is not None:
        config.config_execution(exe_cfg)
    return config


def validation(interval):
    config = flow.model.ValidationConfig()
    config.config_data(ValData())
    config.config_step_interval(interval)
    return config


def weight() -> np.ndarray:
    return flow.get_all_variables()["w"].numpy()


def test_the_face_names():
    assert flow.Model is flow.model.Model
    assert flow.ExecutionConfig is flow.FunctionConfig
    assert {"Callback", "CheckpointConfig", "DataModule", "Model", "NumpyDataModule", "TrainingConfig",
            "ValidationConfig"} <= set(flow.model.__all__)
    assert "Model" in flow.__all__ and "model" in dir(flow)


def test_fit_trains_on_numpy_batches_and_calls_back_after_every_step():
    recorder, data = Recorder(), TrainData()
    Regression().fit(training_config=training(data), callbacks=recorder, max_steps=30)
    losses = recorder.losses()
    assert len(losses) == 30
    assert losses[-1] < 0.05 * losses[0]
    np.testing.assert_allclose(weight(), TRUE_W, atol=0.3)
    # the first batch (read while the job was built) feeds step 0; later steps read their own
    assert data.calls == [(0, 0)] + [(step, 0) for step in range(1, 30)]
    # the legacy job name, hence the legacy train-step counter
    assert flow.get_all_variables()[TRAIN_STEP].numpy() == 30


def test_the_first_loss_is_the_loss_at_the_initial_weights():
    recorder = Recorder()
    Regression().fit(training_config=training(), callbacks=[recorder], max_steps=1)
    np.testing.assert_allclose(recorder.losses()[0], np.mean(Y ** 2), rtol=1e-6)


def test_validation_runs_after_every_interval_th_step_with_the_weights_trained_so_far():
    recorder = Recorder()
    Regression().fit(training_config=training(), validation_config=validation(3), callbacks=recorder, max_steps=10)
    kinds = [(kind, step) for kind, step, _, _ in recorder.events]
    expected = []
    for step in range(10):
        expected.append(("train", step))
        if (step + 1) % 3 == 0:
            expected.append(("validation", step))
    assert kinds == expected
    last = recorder.events[-2]  # validation after step 8
    assert last[0] == "validation" and last[3].numpy().shape == (4, 1)
    assert np.abs(last[3].numpy()).sum() > 0  # the trained weight, not the zeros it started at


def test_validation_alone_runs_the_predict_job():
    recorder = Recorder()
    Regression().fit(validation_config=validation(1), callbacks=recorder, max_steps=2)
    assert [(kind, step) for kind, step, _, _ in recorder.events] == [("validation", 0), ("validation", 1)]
    np.testing.assert_array_equal(recorder.events[0][3].numpy(), np.zeros((4, 1), np.float32))  # untrained


def test_checkpoints_are_saved_in_legacy_layout_and_loaded_before_the_first_step(tmp_path: Path):
    saves = flow.model.CheckpointConfig()
    saves.config_save(dirpath=str(tmp_path / "model"), step_interval=5)
    Regression().fit(training_config=training(), checkpoint_config=saves, max_steps=10)
    final = weight()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model-4", "model-9"]
    folder = tmp_path / "model-4"
    assert (folder / "snapshot_done").is_file()
    assert {p.name for p in folder.iterdir() if p.is_dir()} == {"w", TRAIN_STEP}
    assert (folder / "w" / "out").stat().st_size == 4 * 4 and (folder / "w" / "meta").is_file()
    assert np.fromfile(folder / TRAIN_STEP / "out", np.int64) == [5]

    # loading step 4's checkpoint and training 5 more steps on the same batches gives step 9's weights
    loads = flow.model.CheckpointConfig()
    loads.config_load(dirpath=str(folder))
    Regression().fit(training_config=training(), checkpoint_config=loads, max_steps=5)
    np.testing.assert_array_equal(weight(), final)
    np.testing.assert_array_equal(weight(), flow.checkpoint.get(str(tmp_path / "model-9"))["w"].numpy())


def test_a_checkpoint_is_not_written_over(tmp_path: Path):
    (tmp_path / "model-0").mkdir()
    (tmp_path / "model-0" / "keep").write_text("mine")
    saves = flow.model.CheckpointConfig()
    saves.config_save(dirpath=str(tmp_path / "model"))
    with pytest.raises(Exception, match="model-0") as info:
        Regression().fit(training_config=training(), checkpoint_config=saves, max_steps=1)
    assert "checkpointing of step 0" in " ".join(getattr(info.value, "__notes__", []))
    assert (tmp_path / "model-0" / "keep").read_text() == "mine"


class TwoOptimizers(flow.model.Model):
    """A GAN-shaped model: one job per optimizer, each training its own variable; tuple outputs."""

    def __init__(self):
        super().__init__(is_deprecated_function_style=True)

    def training_step(self, batch, optimizer_idx):
        (x,) = batch
        name = ("a", "b")[optimizer_idx]
        v = flow.get_variable(name, shape=(3,), initializer=flow.constant_initializer(1.0))
        loss = flow.math.reduce_sum(flow.math.square(v - x))
        return (loss, v) if optimizer_idx == 0 else loss

    def configure_optimizers(self):
        return [sgd(0.1), sgd(0.2)]


class Ones(flow.model.NumpyDataModule):
    def forward(self, step_idx, optimizer_idx):
        return (np.full((3,), 2.0 + optimizer_idx, np.float32),)


def test_each_optimizer_has_its_job_and_callbacks_get_its_index_and_outputs():
    recorder = Recorder()
    TwoOptimizers().fit(training_config=training(Ones()), callbacks=[recorder, Recorder()], max_steps=2)
    assert [(kind, step, idx) for kind, step, idx, _ in recorder.events] == [
        ("train", 0, 0), ("train", 0, 1), ("train", 1, 0), ("train", 1, 1)]
    loss, value = recorder.events[0][3]  # training_step's tuple, each item a local blob
    assert float(loss.numpy()) == pytest.approx(3.0) and value.numpy().tolist() == [1.0, 1.0, 1.0]
    assert float(recorder.events[1][3].numpy()) == pytest.approx(12.0)  # ((1 - 3) ** 2) * 3
    assert float(recorder.events[1][3].mean()) == pytest.approx(12.0)  # numpy's attributes, as legacy
    variables = flow.get_all_variables()
    # a is trained towards 2 by the first job only, b towards 3 by the second
    np.testing.assert_allclose(variables["a"].numpy(), 1 + 0.2 + 0.16, rtol=1e-6)
    np.testing.assert_allclose(variables["b"].numpy(), 1 + 0.8 + 0.48, rtol=1e-6)


class Blobs(flow.model.DataModule):
    """A batch made of blobs inside the job (what a data reader does): targets are the inputs' row sums."""

    def forward(self, step_idx, optimizer_idx):
        x = flow.get_variable("x", shape=(16, 4), initializer=flow.random_normal_initializer(seed=1),
                              trainable=False)
        return x, flow.math.reduce_sum(x, axis=1, keepdims=True)


def test_a_data_module_of_blobs_is_called_inside_the_job():
    recorder = Recorder()
    Regression().fit(training_config=training(Blobs()), callbacks=recorder, max_steps=20)
    losses = recorder.losses()
    assert losses[-1] < 0.1 * losses[0]
    assert "System-Train-TrainStep-Regression_Model_train_job_0" in flow.get_all_variables()


def test_eager_execution_gives_the_lazy_losses_and_checkpoints(tmp_path: Path):
    lazy = Recorder()
    Regression().fit(training_config=training(), callbacks=lazy, max_steps=5)
    lazy_weight = weight()
    saves = flow.model.CheckpointConfig()
    saves.config_save(str(tmp_path / "eager"), step_interval=5)
    flow.enable_eager_execution(True)
    try:
        eager = Recorder()
        Regression().fit(training_config=training(), checkpoint_config=saves, callbacks=eager, max_steps=5)
        loads = flow.model.CheckpointConfig()
        loads.config_load(str(tmp_path / "eager-4"))
        Regression().fit(validation_config=validation(1), checkpoint_config=loads, callbacks=eager, max_steps=1)
    finally:
        flow.enable_eager_execution(False)
    assert eager.losses() == lazy.losses()
    np.testing.assert_allclose(eager.events[-1][3].numpy(), X[:4] @ lazy_weight, rtol=1e-6)  # the loaded weight


@pytest.mark.filterwarnings("ignore:overflow encountered:RuntimeWarning", "ignore:invalid value:RuntimeWarning")
def test_the_execution_config_reaches_the_jobs():
    cfg = flow.ExecutionConfig()
    cfg.default_data_type(flow.float)
    cfg.enable_numerics_check(True)

    class Diverges(flow.model.NumpyDataModule):
        def forward(self, step_idx, optimizer_idx):
            return X * np.float32(1e30), Y

    with pytest.raises(Exception, match="Regression_Model_train_numpy_job_0") as info:
        Regression().fit(training_config=training(Diverges(), cfg), max_steps=3)
    assert type(info.value).__name__ == "NumericsError"
    assert "training of step" in " ".join(info.value.__notes__)


# bad configuration: each error names what is wrong -------------------------------------------------------
def test_setters_check_their_argument():
    with pytest.raises(TypeError, match=r"TrainingConfig.config_data: data must be a flow.model.DataModule"):
        flow.model.TrainingConfig().config_data(X)
    with pytest.raises(TypeError, match=r"ValidationConfig.config_execution: exe_cfg must come from"):
        flow.model.ValidationConfig().config_execution({})
    with pytest.raises(ValueError, match=r"config_step_interval: step_interval must be an int > 0, got 0"):
        flow.model.ValidationConfig().config_step_interval(0)
    with pytest.raises(TypeError, match=r"CheckpointConfig.config_save: dirpath must be a folder path, got None"):
        flow.model.CheckpointConfig().config_save()
    with pytest.raises(ValueError, match=r"config_save: step_interval must be an int > 0, got 1.5"):
        flow.model.CheckpointConfig().config_save("ck", step_interval=1.5)
    with pytest.raises(TypeError, match=r"CheckpointConfig.config_load: dirpath"):
        flow.model.CheckpointConfig().config_load()


def test_fit_names_the_argument_that_is_wrong():
    with pytest.raises(ConfigError, match=r"Regression.fit: training_config is not valid: data is not set"):
        Regression().fit(training_config=flow.model.TrainingConfig())
    bad_interval = validation(2)
    bad_interval.step_interval = -1
    with pytest.raises(ConfigError, match=r"validation_config is not valid: step_interval must be an int > 0"):
        Regression().fit(validation_config=bad_interval)
    with pytest.raises(TypeError, match=r"validation_config must be a flow.model.ValidationConfig, got TrainingConfig"):
        Regression().fit(validation_config=training())
    with pytest.raises(TypeError, match=r"callbacks must be a flow.model.Callback or a list of them"):
        Regression().fit(training_config=training(), callbacks=[Recorder(), print])
    with pytest.raises(ValueError, match=r"max_steps must be an int >= 0, got -1"):
        Regression().fit(training_config=training(), max_steps=-1)


def test_the_model_must_define_what_the_configs_ask_for():
    class NoSteps(flow.model.Model):
        def __init__(self):
            super().__init__(is_deprecated_function_style=True)

    with pytest.raises(ConfigError, match=r"NoSteps.fit: training_config is given but NoSteps does not define "
                                          r"training_step"):
        NoSteps().fit(training_config=training())
    with pytest.raises(ConfigError, match=r"validation_config is given but NoSteps does not define validation_step"):
        NoSteps().fit(validation_config=validation(1))

    class NotAnOptimizer(Regression):
        def configure_optimizers(self):
            return [sgd(), "adam"]

    with pytest.raises(TypeError, match=r"NotAnOptimizer.configure_optimizers must return a flow.optimizer optimizer "
                                        r"or a list or tuple of them, got list holding str"):
        NotAnOptimizer().fit(training_config=training())

    class NoLoss(Regression):
        def training_step(self, batch, optimizer_idx):
            return None

    with pytest.raises(TypeError, match=r"NoLoss.training_step must return the loss blob"):
        NoLoss().fit(training_config=training())


def test_numpy_batches_must_be_tuples_of_arrays():
    class Listed(flow.model.NumpyDataModule):
        def forward(self, step_idx, optimizer_idx):
            return [X, Y]

    with pytest.raises(TypeError, match=r"Listed\(0, 0\) \(a flow.model.NumpyDataModule\) must return a tuple"):
        Regression().fit(training_config=training(Listed()))

    class Scalars(flow.model.NumpyDataModule):
        def forward(self, step_idx, optimizer_idx):
            return X, 1.0

    with pytest.raises(TypeError, match=r"Scalars .* item 1 is float, not a numpy array"):
        Regression().fit(training_config=training(Scalars()))

    class Booleans(flow.model.NumpyDataModule):
        def forward(self, step_idx, optimizer_idx):
            return X, Y > 0

    with pytest.raises(JobDefinitionError, match=r"Booleans .* item 1 cannot be a job input .*bool"):
        Regression().fit(training_config=training(Booleans()))


def test_fit_without_configs_warns_and_does_nothing():
    with pytest.warns(UserWarning, match=r"Regression.fit does nothing"):
        Regression().fit(max_steps=3)


# the object style (Model's default): eager modules, flow.optim ---------------------------------------------
PARA = RNG.normal(size=(2, 3)).astype(np.float32)


class CustomModule(flow.nn.Module):
    def __init__(self):
        super().__init__()
        self.w = flow.nn.Parameter(flow.Tensor(PARA))

    def forward(self, x):
        return x + self.w


class EagerModel(flow.Model):
    """Legacy's own object-style test: the loss is sum(x + w), so plain SGD at lr 1 takes 1 from w per step."""

    def __init__(self):
        super().__init__()
        self.m = CustomModule()

    def forward(self, x):
        return self.m(x)

    def training_step(self, batch, **kwargs):
        return (self(batch).sum(), list(self.m.parameters())[0])

    def configure_optimizers(self):
        return flow.optim.SGD([{"params": list(self.m.parameters()), "lr": 1.0, "momentum": 0.0, "scale": 1.0}])

    def validation_step(self, batch):
        return self(batch)


class TensorOnes(flow.model.DataModule):
    def forward(self, step_idx=0, optimizer_idx=0):
        return flow.Tensor(np.ones((2, 3), np.float32))


class Snapshots(Recorder):
    """Legacy's OutputMonitor: reads the outputs' values when called (the parameter after the step)."""

    def on_training_step_end(self, outputs, step_idx, optimizer_idx):
        self.events.append(("train", step_idx, optimizer_idx, tuple(o.numpy() for o in outputs)))

    def on_validation_step_end(self, outputs, step_idx):
        self.events.append(("validation", step_idx, outputs.requires_grad, outputs.numpy()))


def object_training(data=None):
    config = flow.model.TrainingConfig()
    config.config_data(data if data is not None else TensorOnes())
    return config


def object_validation(interval=1):
    config = flow.model.ValidationConfig()
    config.config_data(TensorOnes())
    config.config_step_interval(interval)
    return config


def test_the_object_style_trains_validates_and_checkpoints_as_legacys_test(tmp_path: Path):
    recorder = Snapshots()
    saves = flow.model.CheckpointConfig()
    saves.config_save(dirpath=str(tmp_path / "model"), step_interval=5)
    model = EagerModel()
    model.fit(training_config=object_training(), validation_config=object_validation(), checkpoint_config=saves,
              callbacks=recorder, max_steps=10)
    trains = [e for e in recorder.events if e[0] == "train"]
    validations = [e for e in recorder.events if e[0] == "validation"]
    assert [e[1] for e in trains] == list(range(10)) and [e[1] for e in validations] == list(range(10))
    for step, (_, _, optimizer_idx, (loss, w)) in enumerate(trains):
        assert optimizer_idx == 0
        np.testing.assert_allclose(loss, np.sum(1 + PARA - step), rtol=1e-5)  # the loss before the step
        np.testing.assert_allclose(w, PARA - step - 1, rtol=1e-5, atol=1e-5)  # the parameter after it
    for step, (_, _, requires_grad, outputs) in enumerate(validations):  # after the step's update, without graph
        np.testing.assert_allclose(outputs, 1 + PARA - step - 1, rtol=1e-5, atol=1e-5)
        assert requires_grad is False
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model-4", "model-9"]
    folder = tmp_path / "model-4"
    assert (folder / "snapshot_done").is_file() and {p.name for p in folder.iterdir() if p.is_dir()} == {"m.w"}
    np.testing.assert_allclose(np.fromfile(folder / "m.w" / "out", np.float32).reshape(2, 3), PARA - 5, rtol=1e-5)

    # legacy's check: a new model loading step 4's folder holds step 9's parameter plus 5
    loaded = EagerModel()
    loaded.load_state_dict(flow.load(str(folder)))
    np.testing.assert_allclose(model.m.w.numpy(), loaded.m.w.numpy() - 5, rtol=1e-5, atol=1e-5)


def test_the_object_style_loads_the_checkpoint_before_the_first_step(tmp_path: Path):
    flow.save(EagerModel().state_dict(), str(tmp_path / "start"))  # PARA
    model = EagerModel()
    model.m.w.copy_(np.zeros((2, 3), np.float32))
    loads = flow.model.CheckpointConfig()
    loads.config_load(dirpath=str(tmp_path / "start"))
    recorder = Snapshots()
    model.fit(training_config=object_training(), checkpoint_config=loads, callbacks=recorder, max_steps=2)
    np.testing.assert_allclose(recorder.events[0][3][0], np.sum(1 + PARA), rtol=1e-5)
    np.testing.assert_allclose(model.m.w.numpy(), PARA - 2, rtol=1e-5, atol=1e-5)

    class Renamed(EagerModel):
        def __init__(self):
            super().__init__()
            self.other = CustomModule()

    with pytest.raises(RuntimeError, match=r"missing key\(s\) in state_dict: 'other.w'"):
        Renamed().fit(training_config=object_training(), checkpoint_config=loads, max_steps=1)


class Regressor(flow.model.Model):
    """Least squares on numpy batches: the data module's arrays reach training_step as they are."""

    def __init__(self, optimizers=None):
        super().__init__()
        self.w = flow.nn.Parameter(flow.Tensor(np.zeros((4, 1), np.float32)))
        self.modes = []
        self.make = optimizers or (lambda params: flow.optim.SGD(params, lr=0.1, momentum=0.5))

    def forward(self, x):
        return x.matmul(self.w)

    def training_step(self, batch, optimizer_idx):
        x, y = batch
        assert isinstance(x, np.ndarray)
        d = self(flow.Tensor(x)) - flow.Tensor(y)
        return (d * d).mean()

    def validation_step(self, batch):
        self.modes.append(self.training)
        (x,) = batch
        return self(flow.Tensor(x))

    def configure_optimizers(self):
        return self.make(self.parameters())


def test_the_object_style_learns_from_numpy_batches_and_keeps_the_mode():
    recorder = Recorder()
    data = TrainData()
    model = Regressor().eval()
    model.fit(training_config=training(data), validation_config=validation(10), callbacks=recorder, max_steps=40)
    losses = [float(e[3].numpy()) for e in recorder.events if e[0] == "train"]
    assert losses[0] == pytest.approx(float(np.mean(Y ** 2)), rel=1e-5)
    assert losses[-1] < 0.01 * losses[0]
    np.testing.assert_allclose(model.w.numpy(), TRUE_W, atol=0.1)
    assert data.calls == [(step, 0) for step in range(40)]  # every step reads its batch
    assert model.modes == [True] * 4 and model.training is False  # legacy validated in training mode, then restored


def test_each_object_style_optimizer_has_its_pass():
    class TwoParts(flow.model.Model):
        def __init__(self):
            super().__init__()
            self.a = flow.nn.Parameter(flow.Tensor(np.ones(3, np.float32)))
            self.b = flow.nn.Parameter(flow.Tensor(np.ones(3, np.float32)))

        def training_step(self, batch, optimizer_idx):
            v = (self.a, self.b)[optimizer_idx]
            d = v - flow.Tensor(batch[0])
            return (d * d).sum()

        def configure_optimizers(self):
            return [flow.optim.SGD([self.a], lr=0.1), flow.optim.Adam([self.b], lr=0.1)]

    recorder = Recorder()
    model = TwoParts()
    model.fit(training_config=training(Ones3()), callbacks=recorder, max_steps=2)
    assert [(kind, step, idx) for kind, step, idx, _ in recorder.events] == [
        ("train", 0, 0), ("train", 0, 1), ("train", 1, 0), ("train", 1, 1)]
    np.testing.assert_allclose(model.a.numpy(), 1 + 0.2 + 0.16, rtol=1e-6)  # towards 2 by SGD only
    assert np.all(model.b.numpy() > 1.1)  # towards 3 by Adam only


class Ones3(flow.model.NumpyDataModule):
    def forward(self, step_idx, optimizer_idx):
        return (np.full((3,), 2.0 + optimizer_idx, np.float32),)


def test_the_object_style_names_what_is_wrong():
    with pytest.raises(TypeError, match=r"Regressor.configure_optimizers must return a flow.optim optimizer or a "
                                        r"list or tuple of them, got SGD \(the object style, Model's default; "
                                        r"flow.optimizer optimizers need is_deprecated_function_style=True\)"):
        Regressor(lambda params: sgd()).fit(training_config=training())

    class NoTensor(Regressor):
        def training_step(self, batch, optimizer_idx):
            return float(np.mean(batch[1]))

    with pytest.raises(TypeError, match=r"NoTensor.training_step must return the loss \(a flow.Tensor\)") as info:
        NoTensor().fit(training_config=training())
    assert "training of step 0" in " ".join(info.value.__notes__)

    class Detached(Regressor):
        def training_step(self, batch, optimizer_idx):
            with flow.no_grad():
                return super().training_step(batch, optimizer_idx)

    with pytest.raises(TypeError, match=r"Detached.training_step returned a loss that does not require a gradient"):
        Detached().fit(training_config=training())


def test_a_function_style_model_is_refused_flow_optim_optimizers():
    model = Regression()
    model.configure_optimizers = lambda: flow.optim.SGD([flow.nn.Parameter(flow.Tensor([1.0]))])
    with pytest.raises(TypeError, match=r"must return a flow.optimizer optimizer or a list or tuple of them, got "
                                        r"SGD \(is_deprecated_function_style=True\)"):
        model.fit(training_config=training())
