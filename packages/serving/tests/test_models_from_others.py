"""A saved model may come from anyone: serving it reads nothing outside its version folder, allocates nothing its
files do not hold, and every damaged or crafted byte is a SavedModelError naming the model, op and attribute;
saves leave no hidden folders behind a killed writer and two writers of one version end with one winner."""
from __future__ import annotations

import os
import random
import shutil
import subprocess
import sys
import textwrap
import time
import tracemalloc
from pathlib import Path
from typing import Iterator

import numpy as np
import pytest
from flowjob_core import CheckpointError, SavedModelError
from google.protobuf import text_format

import oneflow as flow
import oneflow.core.common.data_type_pb2 as data_type_pb
import oneflow.core.serving.saved_model_pb2 as saved_model_pb
import oneflow.typing as tp
from flowjob_serving import model_builder

DIGESTS = "saved_model.sha256"


@pytest.fixture(autouse=True)
def fresh() -> Iterator[None]:
    flow.clear_default_session()
    yield
    flow.clear_default_session()


def _save(folder: Path, version: int = 1) -> np.ndarray:
    """A small model: x (2, 6) -> (x * w) * 1.5 reshaped to (-1, 3); its output for ones."""
    @flow.global_function(type="predict")
    def small(x: tp.Numpy.Placeholder((2, 6))) -> tp.Numpy:
        w = flow.get_variable("w", (6,), initializer=flow.constant_initializer(2.0))
        return flow.reshape(flow.math.multiply(x * w, 1.5), (-1, 3))

    expected = small(np.ones((2, 6), np.float32))
    builder = flow.saved_model.ModelBuilder(str(folder)).ModelName("small").Version(version)
    builder.AddFunction(small).Finish()
    builder.Save()
    flow.clear_default_session()
    return expected


def _serve(folder: Path) -> np.ndarray:
    sess = flow.serving.InferenceSession()
    try:
        sess.load_saved_model(str(folder))
        sess.launch()
        (name,) = sess.list_inputs()
        return sess.run(sess.list_jobs()[0], **{name: np.ones((2, 6), np.float32)})[0]
    finally:
        sess.close()


def _proto(version: Path) -> saved_model_pb.SavedModel:
    proto = saved_model_pb.SavedModel()
    proto.ParseFromString((version / "saved_model.pb").read_bytes())
    return proto


def _rewrite(version: Path, proto: saved_model_pb.SavedModel) -> None:
    """Write the meta files as someone else would, without digests (a model flowjob did not write)."""
    (version / "saved_model.pb").write_bytes(proto.SerializeToString())
    (version / "saved_model.prototxt").write_text(text_format.MessageToString(proto))
    (version / DIGESTS).unlink(missing_ok=True)


# checkpoint_dir -------------------------------------------------------------
@pytest.mark.parametrize("kind", ["absolute", "parent", "symlink"])
def test_checkpoint_dir_outside_the_version_folder_is_refused(tmp_path: Path, kind: str) -> None:
    _save(tmp_path / "m")
    version = tmp_path / "m" / "1"
    elsewhere = tmp_path / "elsewhere"
    shutil.copytree(version / "variables", elsewhere)  # a complete checkpoint outside the model
    proto = _proto(version)
    if kind == "absolute":
        proto.checkpoint_dir = str(elsewhere)
    elif kind == "parent":
        proto.checkpoint_dir = "../../elsewhere"
    else:
        (version / "link").symlink_to(elsewhere, target_is_directory=True)
        proto.checkpoint_dir = "link"
    _rewrite(version, proto)
    with pytest.warns(UserWarning, match=DIGESTS), \
            pytest.raises(SavedModelError, match=r"checkpoint_dir .* outside its version folder"):
        _serve(tmp_path / "m")


def test_a_variable_file_linked_outside_is_refused(tmp_path: Path) -> None:
    _save(tmp_path / "m")
    version = tmp_path / "m" / "1"
    out = version / "variables" / "w" / "out"
    outside = tmp_path / "outside.bin"
    outside.write_bytes(out.read_bytes())
    out.unlink()
    out.symlink_to(outside)
    (version / DIGESTS).unlink()
    with pytest.warns(UserWarning, match=DIGESTS), \
            pytest.raises(SavedModelError, match=r"variable 'w': its file .* outside the version folder"):
        _serve(tmp_path / "m")


# variable sizes ------------------------------------------------------------
def test_a_declared_shape_the_file_does_not_hold_allocates_nothing(tmp_path: Path) -> None:
    _save(tmp_path / "m")
    version = tmp_path / "m" / "1"
    proto = _proto(version)
    for graph in proto.graphs.values():
        for op in graph.op_list:
            if op.HasField("variable_conf"):
                del op.variable_conf.shape.dim[:]
                op.variable_conf.shape.dim.append(2 ** 28)  # 1 GiB of float32; the file holds 24 bytes
    _rewrite(version, proto)
    tracemalloc.start()
    try:
        with pytest.warns(UserWarning, match=DIGESTS), \
                pytest.raises(SavedModelError, match=r"variable 'w': the op list declares shape \(268435456,\) "
                                                     r"float32 \(1073741824 bytes\), its file .* holds 24 bytes"):
            _serve(tmp_path / "m")
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 64 * 2 ** 20, f"{peak} bytes were allocated before the refusal"


# integrity and decoding -----------------------------------------------------
def test_digests_are_written_last_and_checked(tmp_path: Path) -> None:
    expected = _save(tmp_path / "m")
    version = tmp_path / "m" / "1"
    listed = sorted(line.split("  ", 1)[1] for line in (version / DIGESTS).read_text().splitlines())
    assert listed == ["saved_model.pb", "saved_model.prototxt", "variables/snapshot_done", "variables/w/meta",
                      "variables/w/out"]
    np.testing.assert_array_equal(_serve(tmp_path / "m"), expected)
    weights = version / "variables" / "w" / "out"
    weights.write_bytes(np.full(6, 3.0, np.float32).tobytes())  # the same size, other values
    with pytest.raises(SavedModelError, match=r"saved model .*: 'variables/w/out' does not match its digest"):
        _serve(tmp_path / "m")


def _scalar_op(proto: saved_model_pb.SavedModel):
    graph = proto.graphs["small"]
    return next(op for op in graph.op_list if op.HasField("user_conf") and "scalar" in op.user_conf.attr
                or op.HasField("user_conf") and any(v.WhichOneof("value") == "at_double"
                                                    for v in op.user_conf.attr.values()))


@pytest.mark.parametrize("literal", ["(1,", "__import__('os')", "[" * 400 + "]" * 400, "1" * 100_000, "{[]: 1}"])
def test_crafted_attribute_literals_are_saved_model_errors(tmp_path: Path, literal: str) -> None:
    _save(tmp_path / "m")
    version = tmp_path / "m" / "1"
    proto = _proto(version)
    op = _scalar_op(proto)
    key = next(k for k, v in op.user_conf.attr.items() if v.WhichOneof("value") == "at_double")
    op.user_conf.attr[key].at_string = "flowjob-literal:" + literal
    _rewrite(version, proto)
    with pytest.warns(UserWarning, match=DIGESTS), pytest.raises(SavedModelError) as caught:
        _serve(tmp_path / "m")
    assert type(caught.value) is SavedModelError
    message = str(caught.value)
    assert "saved model 'small'" in message and f"op {op.name!r}" in message and f"attribute {key!r}" in message


def test_an_unknown_data_type_attribute_is_a_saved_model_error(tmp_path: Path) -> None:
    _save(tmp_path / "m")
    version = tmp_path / "m" / "1"
    proto = _proto(version)
    op = _scalar_op(proto)
    op.user_conf.attr["dtype_crafted"].at_data_type = data_type_pb.DataType.Value("kChar")  # none flowjob runs
    _rewrite(version, proto)
    with pytest.warns(UserWarning, match=DIGESTS), \
            pytest.raises(SavedModelError, match=rf"op {op.name!r}.*attribute 'dtype_crafted': DataType 1 is not"):
        _serve(tmp_path / "m")


def _flip(data: bytes, rng: random.Random) -> bytes:
    flipped = bytearray(data)
    bit = rng.randrange(len(flipped) * 8)
    flipped[bit // 8] ^= 1 << (bit % 8)
    return bytes(flipped)


def test_bit_flips_are_refused_never_served(tmp_path: Path) -> None:
    """With its digests, every flipped bit of saved_model.pb is a SavedModelError: no bare exception, and no
    model served that differs from the one saved (legacy's scalar 1.5 becoming 1.5 + 2**-12 included)."""
    _save(tmp_path / "m")
    version = tmp_path / "m" / "1"
    (version / "saved_model.prototxt").unlink()
    original = (version / "saved_model.pb").read_bytes()
    rng = random.Random(40)
    for _ in range(150):
        (version / "saved_model.pb").write_bytes(_flip(original, rng))
        with pytest.raises(SavedModelError, match="saved_model.pb"):
            _serve(tmp_path / "m")


def test_bit_flips_without_digests_raise_only_named_errors(tmp_path: Path) -> None:
    """A model without digests (from elsewhere): a flipped bit may go unseen, but what is seen is a SavedModelError
    (or the CheckpointError of a variable the flipped list no longer matches), never a bare exception."""
    expected = _save(tmp_path / "m")
    version = tmp_path / "m" / "1"
    (version / "saved_model.prototxt").unlink()
    (version / DIGESTS).unlink()
    original = (version / "saved_model.pb").read_bytes()
    rng = random.Random(41)
    refused = 0
    for _ in range(150):
        (version / "saved_model.pb").write_bytes(_flip(original, rng))
        flow.clear_default_session()
        try:
            with pytest.warns(UserWarning, match=DIGESTS):
                result = _serve(tmp_path / "m")
        except (SavedModelError, CheckpointError):
            refused += 1
            continue
        assert isinstance(result, np.ndarray)
    assert refused > 0
    (version / "saved_model.pb").write_bytes(original)
    with pytest.warns(UserWarning, match=DIGESTS):
        np.testing.assert_array_equal(_serve(tmp_path / "m"), expected)


# killed and concurrent writers --------------------------------------------------
def test_a_killed_save_leaves_nothing_behind_the_next_save_or_load(tmp_path: Path) -> None:
    program = textwrap.dedent(f"""
        import os
        import numpy as np, oneflow as flow, oneflow.typing as tp
        from flowjob_serving import model_builder

        @flow.global_function(type="predict")
        def small(x: tp.Numpy.Placeholder((2, 6))) -> tp.Numpy:
            return x * flow.get_variable("w", (6,), initializer=flow.constant_initializer(2.0))

        def killed(path, data):
            os._exit(3)  # as a kill mid-way: the variables are written, the meta files not

        model_builder._write_file = killed
        builder = flow.saved_model.ModelBuilder({str(tmp_path / "m")!r}).ModelName("small").Version(1)
        builder.AddFunction(small).Finish()
        builder.Save()
    """)
    done = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, timeout=120)
    assert done.returncode == 3, done.stderr
    hidden = [e for e in os.listdir(tmp_path / "m") if e.startswith(".1.") and e.endswith(".tmp")]
    assert len(hidden) == 1 and os.listdir(tmp_path / "m") == hidden, os.listdir(tmp_path / "m")
    _save(tmp_path / "m", version=2)
    assert sorted(os.listdir(tmp_path / "m")) == ["2"]
    # and a load cleans up as well
    done = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, timeout=120)
    assert done.returncode == 3, done.stderr
    assert len(os.listdir(tmp_path / "m")) == 2
    _serve(tmp_path / "m")
    assert sorted(os.listdir(tmp_path / "m")) == ["2"]


def test_two_writers_of_one_version_one_wins(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The other writer renames its version in after this one's existence check: this one's rename is refused
    with a SavedModelError naming the version, the winner's folder is untouched and nothing hidden is left."""
    winner = tmp_path / "winner"
    _save(winner)
    rename = os.rename

    def after_the_other_writer(src, dst, *args, **kwargs):
        if str(dst).endswith(os.path.join("m", "1")) and not os.path.exists(dst):
            shutil.copytree(winner / "1", dst)  # the other process's complete version, renamed in just now
        return rename(src, dst, *args, **kwargs)

    monkeypatch.setattr(model_builder.os, "rename", after_the_other_writer)
    (tmp_path / "m").mkdir()
    with pytest.raises(SavedModelError, match=r"saved model 'small': version 1 was saved by another writer"):
        _save(tmp_path / "m")
    monkeypatch.undo()
    assert sorted(os.listdir(tmp_path / "m")) == ["1"]
    assert (tmp_path / "m" / "1" / "saved_model.pb").read_bytes() == (winner / "1" / "saved_model.pb").read_bytes()


# another batch size ---------------------------------------------------------
def test_a_shape_traced_for_the_old_batch_is_named(tmp_path: Path) -> None:
    @flow.global_function(type="predict")
    def rows(x: tp.Numpy.Placeholder((4, 6))) -> tp.Numpy:
        return flow.reshape(x, (4, -1))

    builder = flow.saved_model.ModelBuilder(str(tmp_path / "m")).ModelName("rows").Version(1)
    builder.AddFunction(rows).Finish()
    builder.Save()
    flow.clear_default_session()
    proto = _proto(tmp_path / "m" / "1")
    sess = flow.serving.InferenceSession()
    sess.set_checkpoint_path(str(tmp_path / "m" / "1" / "variables"))
    with sess.open("rows", batch_size=2):
        sess.compile(proto.graphs["rows"].op_list)
    with pytest.raises(SavedModelError, match=r"op '.*' \(reshape\) was traced for batch 4 and is served for batch 2 "
                                              r"\(input '.*'\): its attribute shape=\(4, -1\) holds the traced batch"):
        sess.launch()
    sess.close()


def test_two_processes_saving_one_version_at_once(tmp_path: Path) -> None:
    """Real writers racing (started together, several rounds): each round one saves, the other fails with a
    SavedModelError naming the version, never a raw OSError; nothing hidden is left."""
    program = textwrap.dedent("""
        import sys, time
        import oneflow as flow, oneflow.typing as tp
        from flowjob_core import SavedModelError

        @flow.global_function(type="predict")
        def small(x: tp.Numpy.Placeholder((2, 6))) -> tp.Numpy:
            return x * flow.get_variable("w", (6,), initializer=flow.constant_initializer(2.0))

        builder = flow.saved_model.ModelBuilder(sys.argv[1]).ModelName("small").Version(1)
        builder.AddFunction(small).Finish()
        small.ensure_traced()
        while time.time() < float(sys.argv[2]):  # both start saving at the same instant
            time.sleep(0.001)
        try:
            builder.Save()
        except SavedModelError as exc:
            print("refused:", exc)
            sys.exit(5)
    """)
    for round_ in range(3):
        folder = tmp_path / f"m{round_}"
        start = time.time() + 4.0
        procs = [subprocess.Popen([sys.executable, "-c", program, str(folder), str(start)], stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, text=True) for _ in range(2)]
        outcomes = [(p.wait(timeout=120), *p.communicate()) for p in procs]
        codes = sorted(code for code, _, _ in outcomes)
        assert codes == [0, 5], outcomes
        refused = next(out for code, out, _ in outcomes if code == 5)
        assert "version 1" in refused, refused
        assert sorted(os.listdir(folder)) == ["1"]
