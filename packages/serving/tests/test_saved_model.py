"""flow.saved_model writes legacy's saved-model layout; flow.serving loads it back (in this process and in a
fresh one) and gives the predict job's outputs; bad input is refused naming what is wrong."""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any, Iterator

import numpy as np
import pytest
from flowjob_core import CheckpointError, SavedModelError
from google.protobuf import text_format

import oneflow as flow
import oneflow.core.serving.saved_model_pb2 as saved_model_pb
import oneflow.typing as tp
from flowjob_serving import attr_values
from flowjob_serving.digests import SavedModelWarning

SHAPE = (4, 3, 6, 6)


@pytest.fixture(autouse=True)
def fresh() -> Iterator[None]:
    flow.clear_default_session()
    yield
    flow.clear_default_session()


def _model() -> tuple[Any, dict[str, str]]:
    """A small predict job (conv, batch norm, pooling, dense, two outputs) with random weights."""
    lbns: dict[str, str] = {}

    @flow.global_function(type="predict")
    def predict(x: tp.Numpy.Placeholder(SHAPE), scale: tp.Numpy.Placeholder((4, 1))) -> tp.Numpy:
        lbns["x"], lbns["scale"] = x.logical_blob_name, scale.logical_blob_name
        h = flow.layers.conv2d(x, 5, 3, padding="SAME", activation=flow.nn.relu,
                               kernel_initializer=flow.random_normal_initializer(seed=1))
        h = flow.layers.batch_normalization(h, training=False)
        h = flow.nn.avg_pool2d(h, 2, 2, "VALID")
        h = flow.reshape(h, (-1, 5 * 3 * 3))
        logits = flow.layers.dense(h, 7, kernel_initializer=flow.random_normal_initializer(seed=2)) * scale
        lbns["logits"] = logits.logical_blob_name
        probs = flow.nn.softmax(logits)
        lbns["probs"] = probs.logical_blob_name
        return probs

    return predict, lbns


def _inputs(batch: int = 4) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(0)
    return {"image": rng.standard_normal((batch, *SHAPE[1:])).astype(np.float32),
            "scale": rng.uniform(0.5, 2, (batch, 1)).astype(np.float32)}


def _save(path: Path, version: int = 1, signature: bool = True) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """Save the model (signature "classify": inputs image, scale; outputs probs, logits); its probs and inputs."""
    predict, lbns = _model()
    feeds = _inputs()
    expected = predict(feeds["image"], feeds["scale"])
    builder = flow.saved_model.ModelBuilder(str(path)).ModelName("tiny").Version(version)
    graph = builder.AddFunction(predict)
    if signature:
        (graph.AddSignature("classify").Input("image", lbns["x"]).Input("scale", lbns["scale"])
         .Output("probs", lbns["probs"]).Output("logits", lbns["logits"]))
    builder.Save()
    return expected, feeds


def test_layout_on_disk(tmp_path: Path) -> None:
    _save(tmp_path / "m", version=3)
    assert sorted(os.listdir(tmp_path / "m")) == ["3"]  # nothing hidden left beside it
    version = tmp_path / "m" / "3"
    assert sorted(os.listdir(version)) == ["saved_model.pb", "saved_model.prototxt", "saved_model.sha256", "variables"]
    assert (version / "variables" / "snapshot_done").is_file()
    names = sorted(os.listdir(version / "variables"))
    assert any(n.endswith("-weight") for n in names) and "BatchNorm-moving_mean" in names
    for name in names:
        if name != "snapshot_done":
            assert sorted(os.listdir(version / "variables" / name)) == ["meta", "out"]
    proto = saved_model_pb.SavedModel()
    proto.ParseFromString((version / "saved_model.pb").read_bytes())
    text = saved_model_pb.SavedModel()
    text_format.Merge((version / "saved_model.prototxt").read_text(), text)
    assert proto == text
    assert (proto.name, proto.version, proto.checkpoint_dir, proto.default_graph_name) == ("tiny", 3, "variables",
                                                                                          "predict")
    graph = proto.graphs["predict"]
    assert graph.default_signature_name == "classify"
    signature = graph.signatures["classify"]
    assert sorted(signature.inputs) == ["image", "scale"] and sorted(signature.outputs) == ["logits", "probs"]
    assert list(signature.inputs["image"].blob_conf.shape.dim) == list(SHAPE)
    kinds = [op.WhichOneof("op_type") for op in graph.op_list]
    assert kinds.count("input_conf") == 2 and kinds.count("return_conf") == 1 and "variable_conf" in kinds
    conv = next(op for op in graph.op_list if op.HasField("user_conf") and op.user_conf.op_type_name == "conv2d")
    assert conv.user_conf.attr["padding"].at_string == "SAME"


def test_round_trip_in_this_process(tmp_path: Path) -> None:
    expected, feeds = _save(tmp_path / "m")
    flow.clear_default_session()
    sess = flow.serving.InferenceSession()
    sess.load_saved_model(str(tmp_path / "m"))
    sess.launch()
    assert sess.list_jobs() == ["predict"]
    assert sess.list_inputs() == ("image", "scale") and sess.list_outputs() == ("logits", "probs")
    assert sess.list_signatures() == ["classify"]
    assert sess.input_info("image") == {"shape": SHAPE, "dtype": np.dtype(np.float32)}
    assert sess.output_info("probs", "predict")["shape"] == (4, 7)
    logits, probs = sess.run("predict", **feeds)
    np.testing.assert_allclose(probs, expected, rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(_softmax(logits), probs, rtol=1e-5, atol=1e-6)  # the signature's other output
    sess.close()
    sess.close()  # again: nothing left to do


def _softmax(x: np.ndarray) -> np.ndarray:
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def test_round_trip_in_a_fresh_process(tmp_path: Path) -> None:
    expected, feeds = _save(tmp_path / "m", signature=False)
    np.savez(tmp_path / "feeds.npz", **feeds)
    program = textwrap.dedent(f"""
        import numpy as np, oneflow as flow
        feeds = np.load({str(tmp_path / 'feeds.npz')!r})
        sess = flow.serving.InferenceSession()
        sess.load_saved_model({str(tmp_path / 'm')!r}, model_version=1)
        sess.launch()
        names = sess.list_inputs()
        (out,) = sess.run(sess.list_jobs()[0], **dict(zip(names, [feeds["image"], feeds["scale"]])))
        np.save({str(tmp_path / 'out.npy')!r}, out)
        print(names, sess.list_outputs())
        sess.close()
    """)
    proc = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.startswith("('Input_")  # without a signature: legacy's op names
    assert "('Return_" in proc.stdout
    np.testing.assert_allclose(np.load(tmp_path / "out.npy"), expected, rtol=1e-6, atol=1e-7)


def test_latest_version_and_batch_size(tmp_path: Path) -> None:
    _save(tmp_path / "m", version=1)
    flow.clear_default_session()
    expected, feeds = _save(tmp_path / "m", version=12)
    flow.clear_default_session()
    proto = saved_model_pb.SavedModel()
    proto.ParseFromString((tmp_path / "m" / "12" / "saved_model.pb").read_bytes())
    sess = flow.serving.InferenceSession(_cpu())
    sess.set_checkpoint_path(str(tmp_path / "m" / "12" / "variables"))
    graph = proto.graphs["predict"]
    with sess.open("predict", graph.signatures["classify"], batch_size=2):
        sess.compile(graph.op_list)
    sess.launch()
    assert sess.input_info("image")["shape"] == (2, *SHAPE[1:])
    _, probs = sess.run("predict", image=feeds["image"][:2], scale=feeds["scale"][:2])
    np.testing.assert_allclose(probs, expected[:2], rtol=1e-6, atol=1e-7)
    sess.close()
    sess = flow.serving.InferenceSession()
    sess.load_saved_model(str(tmp_path / "m"), flow.serving.ModelVersionPolicy.LATEST)
    sess.launch()
    np.testing.assert_allclose(sess.run("predict", **feeds)[1], expected, rtol=1e-6, atol=1e-7)
    sess.close()


def _cpu() -> Any:
    option = flow.serving.SessionOption()
    option.device_tag = "cpu"
    return option


def test_sessions_are_apart(tmp_path: Path) -> None:
    """An inference session leaves the default session's jobs and variables alone, and closing it too."""
    _, feeds = _save(tmp_path / "m")
    predict = flow.get_all_variables()
    sess = flow.serving.InferenceSession()
    sess.load_saved_model(str(tmp_path / "m"))
    sess.launch()
    sess.close()
    assert sorted(flow.get_all_variables()) == sorted(predict)
    with pytest.raises(SavedModelError, match="CLOSED"):
        sess.run("predict", **feeds)


def test_run_refuses_bad_inputs(tmp_path: Path) -> None:
    _, feeds = _save(tmp_path / "m")
    sess = flow.serving.InferenceSession()
    with pytest.raises(SavedModelError, match=r"launch\(\) first"):
        sess.list_inputs()
    sess.load_saved_model(str(tmp_path / "m"))
    sess.launch()
    with pytest.raises(SavedModelError, match=r"no job 'nope'; its jobs: \['predict'\]"):
        sess.run("nope", **feeds)
    with pytest.raises(SavedModelError, match=r"unknown input\(s\) \['imag'\]; its inputs are \['image', 'scale'\]"):
        sess.run("predict", imag=feeds["image"], scale=feeds["scale"])
    with pytest.raises(SavedModelError, match="input 'scale' is absent"):
        sess.run("predict", image=feeds["image"])
    with pytest.raises(SavedModelError, match=r"input 'image' must be \(4, 3, 6, 6\) float32, got \(2, 3, 6, 6\)"):
        sess.run("predict", image=feeds["image"][:2], scale=feeds["scale"])
    with pytest.raises(SavedModelError, match="input 'image' must be .* float32, got .* float64"):
        sess.run("predict", image=feeds["image"].astype(np.float64), scale=feeds["scale"])
    with pytest.raises(SavedModelError, match="must be a numpy.ndarray, got list"):
        sess.run("predict", image=feeds["image"].tolist(), scale=feeds["scale"])
    with pytest.raises(SavedModelError, match="no input 'probs'"):
        sess.input_info("probs")
    sess.close()


def test_load_refuses_what_is_not_there(tmp_path: Path) -> None:
    sess = flow.serving.InferenceSession()
    with pytest.raises(SavedModelError, match="does not exist or is not a folder"):
        sess.load_saved_model(str(tmp_path / "absent"))
    (tmp_path / "empty").mkdir()
    with pytest.raises(SavedModelError, match="holds no version"):
        sess.load_saved_model(str(tmp_path / "empty"))
    _save(tmp_path / "m", version=2)
    with pytest.raises(SavedModelError, match=r"version 5 .* does not exist; its versions: \[2\]"):
        sess.load_saved_model(str(tmp_path / "m"), model_version=5)
    with pytest.raises(SavedModelError, match="model_version must be an int or"):
        sess.load_saved_model(str(tmp_path / "m"), model_version="latest")
    with pytest.raises(SavedModelError, match=r"no graph 'other'; its graphs: \['predict'\]"):
        sess.load_saved_model(str(tmp_path / "m"), graph_name="other")
    with pytest.raises(SavedModelError, match=r"no signature 'regress'; its signatures: \['classify'\]"):
        sess.load_saved_model(str(tmp_path / "m"), signature_name="regress")
    with pytest.raises(SavedModelError, match="neither other.pb nor other.prototxt"):
        sess.load_saved_model(str(tmp_path / "m"), saved_model_meta_file_basename="other")
    with pytest.raises(SavedModelError, match="checkpoint path is not set"):
        sess.launch()
    (tmp_path / "m" / "2" / "saved_model.pb").write_bytes(b"\xff\xff\xff")
    (tmp_path / "m" / "2" / "saved_model.prototxt").unlink()
    with pytest.raises(SavedModelError, match="'saved_model.pb' does not match its digest"):
        sess.load_saved_model(str(tmp_path / "m"))
    (tmp_path / "m" / "2" / "saved_model.sha256").unlink()  # as a model from elsewhere: no digests
    with pytest.raises(SavedModelError, match="cannot read its meta file"), pytest.warns(SavedModelWarning):
        sess.load_saved_model(str(tmp_path / "m"))
    sess.close()


def test_launch_refuses_a_checkpoint_without_the_variables(tmp_path: Path) -> None:
    _save(tmp_path / "m")
    for entry in (tmp_path / "m" / "1" / "variables").iterdir():
        if entry.name.startswith("Dense"):
            for file in entry.iterdir():
                file.unlink()
            entry.rmdir()
    (tmp_path / "m" / "1" / "saved_model.sha256").unlink()  # else the digests name the missing files at once
    sess = flow.serving.InferenceSession()
    with pytest.warns(SavedModelWarning, match="has no saved_model.sha256"):
        sess.load_saved_model(str(tmp_path / "m"))
    with pytest.raises(CheckpointError, match="lacks .* variables .*Dense"):
        sess.launch()
    sess.close()


def test_builder_refusals(tmp_path: Path) -> None:
    predict, lbns = _model()
    predict.ensure_traced()  # the body runs: lbns filled
    builder = flow.saved_model.ModelBuilder(str(tmp_path / "m")).ModelName("tiny")
    with pytest.raises(SavedModelError, match="expected a @flow.global_function job"):
        builder.AddFunction(lambda x: x)
    graph = builder.AddFunction(predict)
    with pytest.raises(SavedModelError, match="'predict' is already added"):
        builder.AddFunction(predict)
    with pytest.raises(SavedModelError, match="version is not set"):
        builder.Save()
    builder.Version(1)
    signature = graph.AddSignature("s")
    with pytest.raises(SavedModelError, match="signature 's' already exists"):
        graph.AddSignature("s")
    with pytest.raises(SavedModelError, match="is not a logical blob name"):
        signature.Input("image", "no-slash")
    signature.Input("image", lbns["probs"])
    with pytest.raises(SavedModelError, match="input 'image': .* is not an input of job 'predict'"):
        builder.Save()
    assert not (tmp_path / "m" / "1").exists()


def test_save_never_replaces_a_version(tmp_path: Path) -> None:
    _save(tmp_path / "m", version=1)
    before = (tmp_path / "m" / "1" / "saved_model.pb").read_bytes()
    with pytest.raises(SavedModelError, match="version 1 exists already"):
        _save(tmp_path / "m", version=1)
    assert (tmp_path / "m" / "1" / "saved_model.pb").read_bytes() == before
    assert sorted(os.listdir(tmp_path / "m")) == ["1"]


def test_train_jobs_are_refused(tmp_path: Path) -> None:
    @flow.global_function(type="train")
    def train(x: tp.Numpy.Placeholder((2, 3))) -> tp.Numpy:
        loss = flow.math.reduce_mean(flow.layers.dense(x, 1))
        flow.optimizer.SGD(flow.optimizer.PiecewiseConstantScheduler([], [0.1])).minimize(loss)
        return loss

    builder = flow.saved_model.ModelBuilder(str(tmp_path / "m")).ModelName("t").Version(1)
    builder.AddFunction(train)
    with pytest.raises(SavedModelError, match="'train' is a train job: a saved model holds predict jobs"):
        builder.Save()


@pytest.mark.parametrize("value", [True, 3, -2**40, 0.1, float("inf"), "SAME", np.dtype(np.int32), (1, -1), (),
                                   None, (0.5, 2.0), ((0, 0), (1, 2)), [1, 2], {"a": (1,)}, "flowjob-literal:x"])
def test_attribute_values_come_back(value: Any) -> None:
    back = attr_values.decode(attr_values.encode(value, "op 'x', attribute 'a'"), "op 'x', attribute 'a'")
    assert back == value and type(back) is type(value)


def test_attribute_values_that_cannot_be_saved() -> None:
    with pytest.raises(SavedModelError, match=r"op 'x', attribute 'a': the value array\(\[1\]\)"):
        attr_values.encode(np.array([1]), "op 'x', attribute 'a'")
    with pytest.raises(SavedModelError, match="nan"):
        attr_values.encode((float("nan"),), "op 'x', attribute 'a'")


def test_two_graphs_and_defaults(tmp_path: Path) -> None:
    predict, lbns = _model()
    feeds = _inputs()
    probs = predict(feeds["image"], feeds["scale"])

    @flow.global_function(type="predict")
    def doubled(x: tp.Numpy.Placeholder((4, 1))) -> tp.Numpy:
        return x * 2

    builder = flow.saved_model.ModelBuilder(str(tmp_path / "m")).ModelName("two").Version(1)
    graph = builder.AddFunction(predict)
    graph.AddSignature("first").Input("image", lbns["x"]).Input("scale", lbns["scale"]).Output("out", lbns["probs"])
    graph.AddSignature("second").Input("image", lbns["x"]).Input("scale", lbns["scale"]).AsDefault()
    builder.AddFunction(doubled).AsDefault()
    with pytest.raises(SavedModelError, match="the name '(image|scale)' is used twice"):
        builder.Save()
    del graph.proto.signatures["second"]
    graph.proto.default_signature_name = "first"
    builder.Save()
    flow.clear_default_session()
    sess = flow.serving.InferenceSession()
    sess.load_saved_model(str(tmp_path / "m"))  # the default graph: doubled
    sess.launch()
    assert sess.list_jobs() == ["doubled"]
    np.testing.assert_array_equal(sess.run("doubled", **{sess.list_inputs()[0]: feeds["scale"]})[0], feeds["scale"] * 2)
    sess.close()
    sess = flow.serving.InferenceSession()
    sess.load_saved_model(str(tmp_path / "m"), graph_name="predict")
    sess.launch()
    assert sess.list_signatures() == ["first"] and sess.list_outputs() == ("out",)
    np.testing.assert_allclose(sess.run("predict", **feeds)[0], probs, rtol=1e-6, atol=1e-7)
    sess.close()
