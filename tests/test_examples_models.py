"""The benchmark-model examples (examples/cnn_benchmark, wide_deep.py, dcgan.py) run as scripts with
reduced flags, each in its own process; and the legacy behaviours the v0.4 benchmark scripts rely on."""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import oneflow as flow
import oneflow.typing as tp
from flowjob_core.testing.modules import sibling

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def test_legacy_internal_distribute_module_is_importable() -> None:
    # DCGAN's layers.py imports it by path
    import oneflow.python.framework.distribute as distribute_util

    assert distribute_util.split(1) == flow.distribute.split(1)
    assert distribute_util.broadcast() == flow.distribute.broadcast()


def test_conv2d_transpose_takes_the_filters_channels_when_output_shape_disagrees() -> None:
    flow.clear_default_session()
    x = np.random.default_rng(0).normal(size=(2, 4, 3, 3)).astype(np.float32)

    @flow.global_function()
    def job(v: tp.Numpy.Placeholder((2, 4, 3, 3))) -> tp.Numpy:
        w = flow.get_variable("w", shape=(4, 2, 3, 3), initializer=flow.constant_initializer(1.0))
        # channels 4 (value's) where the filter makes 2: legacy v0.2 used the filter's
        return flow.nn.conv2d_transpose(v, w, output_shape=(2, 4, 6, 6), strides=2, padding="SAME")

    with pytest.warns(UserWarning, match=r"conv2d_transpose.*filter has 2"):
        out = job(x)
    assert out.shape == (2, 2, 6, 6)
    # every output pixel sums the input channels under a ones filter: both output channels agree
    np.testing.assert_allclose(out[:, 0], out[:, 1])
    assert abs(out.sum()) > 0


def test_conv2d_transpose_still_refuses_a_wrong_batch() -> None:
    flow.clear_default_session()

    @flow.global_function()
    def job(v: tp.Numpy.Placeholder((2, 4, 3, 3))) -> tp.Numpy:
        w = flow.get_variable("w", shape=(4, 2, 3, 3), initializer=flow.constant_initializer(1.0))
        return flow.nn.conv2d_transpose(v, w, output_shape=(3, 2, 6, 6), strides=2, padding="SAME")

    with pytest.raises(Exception, match=r"job 'job'.*batch must be value's \(2\)"):
        job(np.zeros((2, 4, 3, 3), np.float32))


def test_sigmoid_cross_entropy_takes_int32_click_labels_and_trains() -> None:
    flow.clear_default_session()
    rng = np.random.default_rng(1)
    feats = rng.normal(size=(32, 4)).astype(np.float32)
    labels = (feats[:, :1] > 0).astype(np.int32)

    @flow.global_function(type="train")
    def job(x: tp.Numpy.Placeholder((32, 4)), y: tp.Numpy.Placeholder((32, 1), dtype=flow.int32)) -> tp.Numpy:
        logits = flow.layers.dense(x, 1, name="fc")
        loss = flow.math.reduce_mean(flow.nn.sigmoid_cross_entropy_with_logits(labels=y, logits=logits))
        flow.optimizer.SGD(flow.optimizer.PiecewiseConstantScheduler([], [0.5])).minimize(loss)
        return loss

    losses = [float(job(feats, labels)) for _ in range(20)]
    assert np.isfinite(losses).all() and losses[-1] < 0.5 * losses[0]


# the examples, each in its own process with reduced flags ------------------------------------------
def run_example(args: list[str], cwd: Path, timeout: float = 300) -> str:
    env = dict(os.environ, FLOWJOB_DATA_HOME=str(cwd / "no-cache"))  # only ./mnist.npz may be used
    proc = subprocess.run([sys.executable, *args], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=timeout)
    assert proc.returncode == 0, f"{args[0]} failed ({proc.returncode}):\n{proc.stdout[-3000:]}\n{proc.stderr[-5000:]}"
    return proc.stdout


@pytest.mark.examples
def test_cnn_benchmark_resnet50_trains_on_synthetic_data_and_saves_snapshots(tmp_path: Path) -> None:
    out = run_example([str(EXAMPLES / "cnn_benchmark" / "train.py"), "--model", "resnet50", "--image_size", "32",
                       "--base_width", "8", "--num_classes", "10", "--num_examples", "32",
                       "--batch_size_per_device", "8", "--num_val_examples", "8", "--val_batch_size_per_device", "4",
                       "--num_epochs", "2", "--warmup_epochs", "0.5", "--learning_rate", "1.0",
                       "--loss_print_every_n_iter", "2", "--model_save_dir", "snap", "--log_dir", "log"], tmp_path)
    train = re.findall(r"^train: epoch (\d), iter (\d), loss: (\S+), top_1: (\S+), samples/s: (\S+)$", out, re.M)
    assert [(e, i) for e, i, *_ in train] == [("0", "2"), ("0", "4"), ("1", "2"), ("1", "4")], out
    losses = [float(t[2]) for t in train]
    # the synthetic labels are all class 0: a network that learns anything drives the loss down
    assert np.isfinite(losses).all() and losses[-1] < 0.5 * losses[0], out
    assert all(float(t[4]) > 0 for t in train)
    assert len(re.findall(r"^validation: epoch \d, top_1: [\d.]+, samples/s: [\d.]+$", out, re.M)) == 2, out
    for epoch in (0, 1):
        snapshot = tmp_path / "snap" / f"snapshot_epoch_{epoch}"
        assert (snapshot / "Resnet-conv1-weight" / "out").is_file(), sorted(p.name for p in snapshot.iterdir())
    assert any((tmp_path / "log").iterdir())  # flow.env.log_dir wrote the run's log there


@pytest.mark.examples
def test_cnn_benchmark_restores_a_snapshot_with_piecewise_decay(tmp_path: Path) -> None:
    common = [str(EXAMPLES / "cnn_benchmark" / "train.py"), "--model", "resnet18", "--image_size", "32",
              "--base_width", "4", "--num_classes", "10", "--num_examples", "8", "--batch_size_per_device", "4",
              "--num_val_examples", "4", "--val_batch_size_per_device", "4", "--num_epochs", "1",
              "--warmup_epochs", "0", "--lr_decay", "piecewise", "--lr_decay_epochs", "0.5",
              "--loss_print_every_n_iter", "1", "--channel_last", "true"]
    run_example([*common, "--model_save_dir", "first"], tmp_path)
    out = run_example([*common, "--model_save_dir", "second", "--model_load_dir", "first/snapshot_epoch_0"], tmp_path)
    assert "restored the snapshot first/snapshot_epoch_0" in out
    assert (tmp_path / "second" / "snapshot_epoch_0").is_dir()


@pytest.mark.examples
@pytest.mark.parametrize("fmt", ["ofrecord", "numpy"])
def test_wide_deep_learns_the_synthetic_clicks(tmp_path: Path, fmt: str) -> None:
    out = run_example([str(EXAMPLES / "wide_deep.py"), "--dataset_format", fmt, "--data_dir", "wdl",
                       "--batch_size", "64", "--max_iter", "60", "--loss_print_every_n_iter", "20",
                       "--eval_interval", "60",
                       "--wide_vocab_size", "1000", "--deep_vocab_size", "1000", "--hidden_size", "32",
                       "--hidden_units_num", "2", "--num_train_examples", "2048", "--num_eval_examples", "512",
                       "--learning_rate", "0.01", "--model_save_dir", "snap"], tmp_path)
    losses = [float(m) for m in re.findall(r"^iter \d+ loss (\S+)$", out, re.M)]
    assert len(losses) == 3 and np.isfinite(losses).all() and losses[-1] < losses[0], out
    auc = float(re.search(r"^iter 60 eval_loss \S+ eval_auc (\S+)$", out, re.M).group(1))
    assert auc > 0.6, out  # the clicks follow the first dense feature and the parity of the wide ids
    assert (tmp_path / "snap" / "wide_embedding" / "out").is_file()
    if fmt == "ofrecord":
        assert (tmp_path / "wdl" / "train" / "part-00000").is_file()


@pytest.mark.examples
def test_dcgan_trains_both_jobs_on_mnist(tmp_path: Path) -> None:
    sibling(__file__, "test_examples_training").synthetic_mnist(tmp_path)
    out = run_example([str(EXAMPLES / "dcgan.py"), "-b", "50", "--max_batches", "20", "--print_every", "10",
                       "--width", "8", "-lr", "0.001", "-save", "ckpt"], tmp_path)
    lines = re.findall(r"^epoch 1 batch (\d+) d_loss (\S+) g_loss (\S+)$", out, re.M)
    assert [b for b, _, _ in lines] == ["10", "20"], out
    assert np.isfinite([float(x) for _, d, g in lines for x in (d, g)]).all()
    grid = np.load(tmp_path / "ckpt" / "samples.npy")
    assert grid.shape == (112, 112) and grid.min() >= -1 and grid.max() <= 1
    assert (tmp_path / "ckpt" / "model" / "g_fc-weight" / "out").is_file()


def test_unique_ids_split_by_argwhere_and_scattered_back_train_both_tables() -> None:
    # the v0.4 hybrid-embedding Wide&Deep pattern: frequent ids (< HF) in one table, the rest in another;
    # argwhere's data-dependent rows end at the scatter into the static per-unique-id buffer
    flow.clear_default_session()
    hf, vocab, width = 4, 10, 3
    ids = np.array([[1, 7], [7, 2], [9, 1]], np.int32)
    hf_init = np.arange(hf * width, dtype=np.float32).reshape(hf, width)
    lf_init = 100 + np.arange((vocab - hf) * width, dtype=np.float32).reshape(vocab - hf, width)

    @flow.global_function(type="train")
    def job(x: tp.Numpy.Placeholder((3, 2), dtype=flow.int32)) -> tp.Numpy:
        flat = flow.flatten(x)
        unique_ids, unique_idx, _, _ = flow.experimental.unique_with_counts(flat)
        limit = flow.constant(hf, dtype=flow.int32)
        hf_rows = flow.argwhere(flow.math.less(unique_ids, limit))
        lf_rows = flow.argwhere(flow.math.greater_equal(unique_ids, limit))
        hf_table = flow.get_variable("hf", shape=(hf, width), initializer=flow.zeros_initializer())
        lf_table = flow.get_variable("lf", shape=(vocab - hf, width), initializer=flow.zeros_initializer())
        hf_emb = flow.gather(hf_table, flow.gather_nd(unique_ids, hf_rows))
        lf_emb = flow.gather(lf_table, flow.gather_nd(unique_ids, lf_rows) - limit)
        buf = flow.reshape(flow.zeros_like(unique_ids, dtype=flow.float), (-1, 1)) * \
            flow.constant(0.0, dtype=flow.float, shape=(1, width))
        buf = flow.tensor_scatter_nd_update(buf, hf_rows, hf_emb)
        buf = flow.tensor_scatter_nd_update(buf, lf_rows, lf_emb)
        emb = flow.reshape(flow.cast_to_static_shape(flow.gather(buf, unique_idx)), (3, 2 * width))
        loss = flow.math.reduce_sum(emb, axis=[1], keepdims=True)
        flow.optimizer.SGD(flow.optimizer.PiecewiseConstantScheduler([], [1.0]), momentum=0).minimize(loss)
        return emb

    flow.load_variables({"hf": hf_init, "lf": lf_init})
    got = job(ids)
    table = np.concatenate([hf_init, lf_init])
    np.testing.assert_array_equal(got, table[ids].reshape(3, 2 * width))
    # d(sum of loss)/d(row) = number of lookups of that row (scaled 1/3 by the mean over 3 losses)
    counts = np.bincount(ids.ravel(), minlength=vocab).astype(np.float32)[:, None] / 3
    variables = flow.get_all_variables()
    np.testing.assert_allclose(variables["hf"].numpy(), hf_init - counts[:hf], rtol=1e-6)
    np.testing.assert_allclose(variables["lf"].numpy(), lf_init - counts[hf:], rtol=1e-6)
