"""Validation of mnist.npz files and the atomic, reproducible writer."""

import numpy as np
import pytest

from flowjob_data import CorruptDataError, load_mnist
from flowjob_data.npzfile import read_mnist_npz, write_npz_atomic


def _assert_names_path(excinfo, path):
    msg = str(excinfo.value)
    assert str(path) in msg and "delete" in msg


def test_garbage_file(tmp_path):
    path = tmp_path / "mnist.npz"
    path.write_bytes(b"this is not a zip file" * 10)
    with pytest.raises(CorruptDataError) as excinfo:
        load_mnist(out_dir=tmp_path)
    _assert_names_path(excinfo, path)


def test_truncated_file(npz_dir):
    path = npz_dir / "mnist.npz"
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    with pytest.raises(CorruptDataError) as excinfo:
        load_mnist(out_dir=npz_dir)
    _assert_names_path(excinfo, path)


@pytest.mark.parametrize("mutate, match", [
    (lambda a: a.pop("y_test"), "missing keys"),
    (lambda a: a.update(x_train=a["x_train"][:, :27]), "x_train"),
    (lambda a: a.update(x_test=a["x_test"].astype(np.float32)), "x_test"),
    (lambda a: a.update(y_train=a["y_train"][:-1]), "y_train"),
    (lambda a: a.update(y_test=a["y_test"] + 10), "labels outside"),
])
def test_wrong_content(tmp_path, arrays, mutate, match):
    mutate(arrays)
    path = tmp_path / "mnist.npz"
    np.savez(path, **arrays)
    with pytest.raises(CorruptDataError, match=match) as excinfo:
        read_mnist_npz(path)
    _assert_names_path(excinfo, path)


def test_writer_roundtrip_is_reproducible_and_clean(tmp_path, arrays):
    first, second = tmp_path / "a" / "mnist.npz", tmp_path / "b" / "mnist.npz"
    write_npz_atomic(first, arrays)
    write_npz_atomic(second, arrays)
    assert first.read_bytes() == second.read_bytes()
    assert sorted(p.name for p in first.parent.iterdir()) == ["mnist.npz"]
    loaded = read_mnist_npz(first)
    for key, value in arrays.items():
        np.testing.assert_array_equal(getattr(loaded, key), value)


def test_writer_leaves_nothing_on_failure(tmp_path, arrays):
    arrays["bad"] = np.array([object()], dtype=object)  # allow_pickle=False refuses it
    target = tmp_path / "mnist.npz"
    with pytest.raises(ValueError):
        write_npz_atomic(target, arrays)
    assert list(tmp_path.iterdir()) == []
