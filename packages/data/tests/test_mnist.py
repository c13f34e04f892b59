"""load_mnist: legacy shapes, dtypes, values, batching and argument errors."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from flowjob_data import DataUnavailableError, load_mnist
from flowjob_data.mnist import batch_split


def test_nchw_shapes_dtypes_values(npz_dir, arrays):
    (xtr, ytr), (xte, yte) = load_mnist(100, 50, out_dir=npz_dir)
    assert xtr.shape == (6, 100, 1, 28, 28) and xtr.dtype == np.float32
    assert ytr.shape == (6, 100) and ytr.dtype == np.int32
    assert xte.shape == (2, 50, 1, 28, 28) and xte.dtype == np.float32
    assert yte.shape == (2, 50) and yte.dtype == np.int32
    expected = arrays["x_train"].astype(np.float32) / np.float32(255)
    np.testing.assert_array_equal(xtr.reshape(600, 28, 28), expected)
    assert 0.0 <= xtr.min() and xtr.max() <= 1.0
    # No shuffling: batches are consecutive slices of the file's order.
    np.testing.assert_array_equal(ytr.reshape(-1), arrays["y_train"])
    np.testing.assert_array_equal(yte[1], arrays["y_test"][50:])


def test_nhwc_layout(npz_dir, arrays):
    (xtr, _), (xte, _) = load_mnist(50, 100, data_format="NHWC", out_dir=npz_dir)
    assert xtr.shape == (12, 50, 28, 28, 1)
    assert xte.shape == (1, 100, 28, 28, 1)
    np.testing.assert_array_equal(xte[0, 3, :, :, 0] * 255, arrays["x_test"][3].astype(np.float32))


def test_default_out_dir_prints_legacy_line(npz_dir, monkeypatch, capsys):
    monkeypatch.chdir(npz_dir)
    load_mnist()
    assert "File mnist.npz already exist, path: ./mnist.npz" in capsys.readouterr().out


@pytest.mark.parametrize("kw, name", [
    ({"train_batch_size": 7}, "train_batch_size"),
    ({"test_batch_size": 30}, "test_batch_size"),
])
def test_non_dividing_batch_size(npz_dir, kw, name):
    with pytest.raises(ValueError, match=name):
        load_mnist(out_dir=npz_dir, **kw)


@pytest.mark.parametrize("bad", [0, -100, 2.5, True, "100"])
def test_invalid_batch_size_fails_before_data_access(bad):
    # No file and no network: a data lookup would raise DataUnavailableError instead.
    with pytest.raises(ValueError, match="train_batch_size"):
        load_mnist(train_batch_size=bad, out_dir=None)


def test_unknown_data_format(npz_dir):
    with pytest.raises(ValueError, match="data_format"):
        load_mnist(data_format="CHWN", out_dir=npz_dir)


def test_unknown_data_format_fails_before_data_access():
    with pytest.raises(ValueError, match="data_format"):
        load_mnist(data_format="nchw", out_dir=None)


def test_no_source_at_all_is_a_clear_error(tmp_path):
    with pytest.raises(DataUnavailableError, match="mnist.npz"):
        load_mnist(out_dir=tmp_path)


@settings(max_examples=30, deadline=None)
@given(
    n_batches=st.integers(1, 6),
    batch=st.integers(1, 8),
    fmt=st.sampled_from(["NCHW", "NHWC"]),
    seed=st.integers(0, 2**16),
)
def test_batch_split_roundtrip(n_batches, batch, fmt, seed):
    rng = np.random.default_rng(seed)
    n = n_batches * batch
    x = rng.integers(0, 256, (n, 28, 28), dtype=np.uint8)
    y = rng.integers(0, 10, n, dtype=np.int64)
    images, labels = batch_split(x, y, batch, fmt)
    assert images.shape[:2] == (n_batches, batch) and labels.shape == (n_batches, batch)
    restored = np.rint(images.reshape(n, 28, 28) * 255).astype(np.uint8)
    np.testing.assert_array_equal(restored, x)
    np.testing.assert_array_equal(labels.reshape(-1), y)
