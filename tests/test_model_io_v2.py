"""Legacy v0.4 model I/O (the documentation's "model load and save" programs): flow.get_all_variables,
flow.load_variables (names the jobs lack skipped by default), flow.checkpoint.save/get, v0.3's flow.save/load,
and flow.train.CheckPoint under flow.config.enable_legacy_model_io(False)."""
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import oneflow as flow
import oneflow.typing as tp
from flowjob_core import CheckpointError, VariableError, get_default_session
from flowjob_core.api.model_io import CheckpointWarning

B, D, H, C = 8, 12, 16, 4
RNG = np.random.default_rng(7)
IMAGES = [RNG.standard_normal((B, D)).astype(np.float32) for _ in range(3)]
LABELS = [RNG.integers(0, C, B).astype(np.int32) for _ in range(3)]


@pytest.fixture(autouse=True)
def fresh_session():
    flow.clear_default_session()
    flow.config.enable_legacy_model_io(False)  # the documentation's first line for these interfaces
    yield
    flow.clear_default_session()


def mlp(x, extra_layer: bool = False):
    init = flow.truncated_normal(0.1)
    hidden = flow.layers.dense(x, H, activation=flow.nn.relu, kernel_initializer=init, name="dense1")
    out = flow.layers.dense(hidden, C, kernel_initializer=init, name="dense2")
    if extra_layer:
        out = flow.layers.dense(out, C, kernel_initializer=init, name="dense3")
    return out


def define_train(extra_layer: bool = False):
    @flow.global_function(type="train")
    def train_job(images: tp.Numpy.Placeholder((B, D)),
                  labels: tp.Numpy.Placeholder((B,), dtype=flow.int32)) -> tp.Numpy:
        loss = flow.nn.sparse_softmax_cross_entropy_with_logits(labels, mlp(images, extra_layer))
        flow.optimizer.SGD(flow.optimizer.PiecewiseConstantScheduler([], [0.1]), momentum=0).minimize(loss)
        return loss

    return train_job


def define_eval():
    @flow.global_function(type="predict")
    def eval_job(images: tp.Numpy.Placeholder((B, D))) -> tp.Numpy:
        return mlp(images)

    return eval_job


def numpy_mlp(values, x):
    hidden = np.maximum(x @ values["dense1-weight"].T + values["dense1-bias"], 0)
    return hidden @ values["dense2-weight"].T + values["dense2-bias"]


def train_and_save(path) -> dict:
    train_job = define_train()
    for images, labels in zip(IMAGES, LABELS):
        train_job(images, labels)
    flow.checkpoint.save(str(path))
    return {name: blob.numpy() for name, blob in flow.get_all_variables().items()}


def test_documented_load_variables_then_get_all_variables():
    @flow.global_function(type="predict")
    def job() -> tp.Numpy:
        return flow.get_variable("myblob", shape=(3, 3), initializer=flow.random_normal_initializer())

    flow.load_variables({"myblob": np.ones((3, 3)).astype(np.float32)})
    value = flow.get_all_variables()["myblob"].numpy()
    assert str(value) == "[[1. 1. 1.]\n [1. 1. 1.]\n [1. 1. 1.]]"  # what the documentation prints
    np.testing.assert_array_equal(job(), np.ones((3, 3), np.float32))


def test_get_all_variables_follows_training():
    train_job = define_train()
    blobs = flow.get_all_variables()
    assert set(blobs) == {"dense1-weight", "dense1-bias", "dense2-weight", "dense2-bias",
                          "System-Train-TrainStep-train_job"}
    weight = blobs["dense2-weight"]
    assert weight.shape == (C, H) and weight.dtype == np.float32
    before = weight.numpy()
    train_job(IMAGES[0], LABELS[0])
    after = weight.numpy()  # the same blob reads the trained value (the step is waited for)
    assert not np.array_equal(before, after)
    np.testing.assert_array_equal(np.asarray(weight), after)
    assert blobs["System-Train-TrainStep-train_job"].numpy().item() == 1


def test_predict_job_loads_the_train_jobs_checkpoint(tmp_path):
    """The documentation's eval program: a predict job loads what the train program saved, whose
    System-Train-TrainStep-train_job the predict job does not have."""
    trained = train_and_save(tmp_path / "mlp_models_1")
    assert sorted(os.listdir(tmp_path / "mlp_models_1")) == [
        "System-Train-TrainStep-train_job", "dense1-bias", "dense1-weight", "dense2-bias", "dense2-weight",
        "snapshot_done"]
    flow.clear_default_session()
    flow.config.enable_legacy_model_io(False)
    eval_job = define_eval()
    flow.load_variables(flow.checkpoint.get(str(tmp_path / "mlp_models_1")))
    probe = RNG.standard_normal((B, D)).astype(np.float32)
    np.testing.assert_allclose(eval_job(probe), numpy_mlp(trained, probe), rtol=1e-5, atol=1e-6)
    with pytest.raises(VariableError, match="no variable named 'System-Train-TrainStep-train_job'.*ignore_mismatch"):
        flow.load_variables(flow.checkpoint.get(str(tmp_path / "mlp_models_1")), ignore_mismatch=False)


def test_fine_tune_loads_the_backbone_and_initializes_the_new_layer(tmp_path):
    trained = train_and_save(tmp_path / "mlp_models_1")
    flow.clear_default_session()
    flow.config.enable_legacy_model_io(False)
    train_job = define_train(extra_layer=True)
    initial = {name: blob.numpy() for name, blob in flow.get_all_variables().items()}
    flow.load_variables(flow.checkpoint.get(str(tmp_path / "mlp_models_1")))
    now = {name: blob.numpy() for name, blob in flow.get_all_variables().items()}
    for name in trained:
        np.testing.assert_array_equal(now[name], trained[name])
    np.testing.assert_array_equal(now["dense3-weight"], initial["dense3-weight"])
    assert np.isfinite(train_job(IMAGES[0], LABELS[0])).all()
    flow.checkpoint.save(str(tmp_path / "mlp_ext_models_1"))
    assert "dense3-weight" in flow.checkpoint.get(str(tmp_path / "mlp_ext_models_1"))


def test_checkpoint_get_blobs(tmp_path):
    trained = train_and_save(tmp_path / "m")
    values = flow.checkpoint.get(str(tmp_path / "m"))
    blob = values["dense1-weight"]
    plain = blob.numpy()
    assert type(plain) is np.ndarray and plain.shape == (H, D) and plain.dtype == np.float32
    np.testing.assert_array_equal(plain, trained["dense1-weight"])
    assert blob.file_path == str(tmp_path / "m" / "dense1-weight" / "out")
    one = flow.checkpoint.get(str(tmp_path / "m" / "dense2-bias"))  # a variable's folder: that variable
    np.testing.assert_array_equal(one.numpy(), trained["dense2-bias"])
    with pytest.raises(CheckpointError, match="does not exist"):
        flow.checkpoint.get(str(tmp_path / "nowhere"))


def test_save_var_dict_and_v0_3_save_load(tmp_path):
    train_and_save(tmp_path / "all")
    blobs = flow.get_all_variables()
    flow.checkpoint.save(str(tmp_path / "part"), {"dense2-bias": blobs["dense2-bias"],
                                                  "extra": np.arange(6, dtype=np.int32).reshape(2, 3)})
    part = flow.checkpoint.get(str(tmp_path / "part"))
    assert sorted(part) == ["dense2-bias", "extra"]
    np.testing.assert_array_equal(part["extra"], np.arange(6).reshape(2, 3))
    assert (tmp_path / "part" / "extra" / "meta").read_text() == "shape {\n  dim: 2\n  dim: 3\n}\ndata_type: kInt32\n"
    flow.save(flow.get_all_variables(), str(tmp_path / "v03"))  # v0.3: (var_dict, path)
    loaded = flow.load(str(tmp_path / "v03"))
    assert sorted(loaded) == sorted(blobs)
    with pytest.raises(CheckpointError, match="not empty"):
        flow.checkpoint.save(str(tmp_path / "part"))
    with pytest.raises(CheckpointError, match="cannot save 'bad': dtype complex128"):
        flow.checkpoint.save(str(tmp_path / "bad"), {"bad": np.zeros(2, np.complex128)})
    assert not (tmp_path / "bad").exists()


def test_a_value_that_does_not_fit_is_refused_and_nothing_is_assigned():
    train_job = define_train()
    before = flow.get_all_variables()["dense1-bias"].numpy()
    with pytest.raises(VariableError, match=r"'dense2-bias' is \(4,\) float32, the value is \(5,\)"):
        flow.load_variables({"dense1-bias": np.ones(H, np.float32), "dense2-bias": np.ones(5, np.float32)})
    np.testing.assert_array_equal(flow.get_all_variables()["dense1-bias"].numpy(), before)
    assert np.isfinite(train_job(IMAGES[0], LABELS[0])).all()  # the session goes on


def test_checkpoint_object_under_model_io_v2(tmp_path):
    trained = train_and_save(tmp_path / "m")
    flow.train.CheckPoint().init()  # v2: nothing to initialize, trained values stay
    now = {name: blob.numpy() for name, blob in flow.get_all_variables().items()}
    assert all(np.array_equal(now[n], trained[n]) for n in trained)

    flow.clear_default_session()
    flow.config.enable_legacy_model_io(False)
    define_train(extra_layer=True)
    initial = flow.get_all_variables()["dense3-bias"].numpy() + 0
    flow.load_variables({"dense3-bias": np.full(C, 7, np.float32)})
    with pytest.warns(CheckpointWarning) as caught:
        flow.train.CheckPoint().load(str(tmp_path / "m"))
    assert sorted(str(w.message).split("'")[3] for w in caught) == ["dense3-bias", "dense3-weight"]
    assert all(str(w.message).endswith("it keeps its value") for w in caught)
    np.testing.assert_array_equal(flow.get_all_variables()["dense3-bias"].numpy(), np.full(C, 7, np.float32))
    assert not np.array_equal(initial, np.full(C, 7, np.float32))


def test_checkpoint_object_with_legacy_model_io(tmp_path):
    flow.config.enable_legacy_model_io(True)
    trained = train_and_save(tmp_path / "m")
    flow.train.CheckPoint().init()  # legacy: every variable back to its initializer
    assert flow.get_all_variables()["System-Train-TrainStep-train_job"].numpy().item() == 0
    assert not np.array_equal(flow.get_all_variables()["dense1-weight"].numpy(), trained["dense1-weight"])


def test_documented_script_runs_unchanged(tmp_path):
    """The train program then the eval program, each a fresh process, as the documentation runs them."""
    common = textwrap.dedent(f"""
        import numpy as np
        import oneflow as flow
        import oneflow.typing as tp
        flow.config.enable_legacy_model_io(False)
        B, D = {B}, {D}
        rng = np.random.default_rng(0)
        def mlp(x):
            init = flow.truncated_normal(0.1)
            hidden = flow.layers.dense(x, 16, activation=flow.nn.relu, kernel_initializer=init, name="dense1")
            return flow.layers.dense(hidden, 4, kernel_initializer=init, name="dense2")
    """)
    train = common + textwrap.dedent("""
        @flow.global_function(type="train")
        def train_job(images: tp.Numpy.Placeholder((B, D)),
                      labels: tp.Numpy.Placeholder((B,), dtype=flow.int32)) -> tp.Numpy:
            loss = flow.nn.sparse_softmax_cross_entropy_with_logits(labels, mlp(images))
            flow.optimizer.SGD(flow.optimizer.PiecewiseConstantScheduler([], [0.1]), momentum=0).minimize(loss)
            return loss
        for i in range(3):
            train_job(rng.standard_normal((B, D)).astype(np.float32), rng.integers(0, 4, B).astype(np.int32))
        flow.checkpoint.save("./mlp_models_1")
    """)
    evaluate = common + textwrap.dedent("""
        @flow.global_function(type="predict")
        def eval_job(images: tp.Numpy.Placeholder((B, D))) -> tp.Numpy:
            return mlp(images)
        flow.load_variables(flow.checkpoint.get("./mlp_models_1"))
        print(eval_job(np.ones((B, D), np.float32)).shape)
    """)
    for script in (train, evaluate):
        done = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, capture_output=True, text=True)
        assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == f"({B}, 4)"
    assert (tmp_path / "mlp_models_1" / "System-Train-TrainStep-train_job" / "out").is_file()


def test_the_session_variables_match_get_all_variables():
    define_train()
    blobs = flow.get_all_variables()
    store = get_default_session().variables
    assert sorted(blobs) == sorted(store.names())


def test_trainable_is_each_jobs_own_flag():
    """Legacy test_get_variable: a predict job declares the variable first with trainable=False; the train
    job declaring it trainable still updates it (each job's variable op carried its own flag)."""
    shape = (2, 3)

    def var(trainable: bool = False):
        return flow.get_variable("var", shape=shape, dtype=flow.float, trainable=trainable,
                                 initializer=flow.random_uniform_initializer())

    @flow.global_function("train")
    def train(x: tp.Numpy.Placeholder(shape)) -> tp.Numpy:
        v = var(trainable=True)
        flow.optimizer.SGD(flow.optimizer.PiecewiseConstantScheduler([], [1e-2]), momentum=0).minimize(v + x)
        return v

    @flow.global_function()
    def read() -> tp.Numpy:
        return var()

    before = read()
    np.testing.assert_array_equal(train(np.ones(shape, np.float32)), before)
    # the loss's gradient is 1 per element, scaled by 1/elements as legacy did
    np.testing.assert_allclose(read(), before - 1e-2 / before.size, rtol=1e-6)
