"""Symbolic links inside a checkpoint folder: a variable folder or ``out`` file that is a link is read
through it by ``flow.checkpoint.get`` and ``flow.train.CheckPoint().load`` alike, as legacy read them
(``os.path.isfile`` on ``<name>/out``, which follows links); a link that loops back is not followed."""
import os
import shutil

import numpy as np
import pytest

import oneflow as flow
import oneflow.typing as tp
from flowjob_core import get_default_session

VALUES = {"w": np.arange(6, dtype=np.float32).reshape(2, 3), "b": np.array([0.5, -1.0, 2.0], np.float32)}


@pytest.fixture(autouse=True)
def fresh_session():
    flow.clear_default_session()
    yield
    flow.clear_default_session()


def define_job():
    @flow.global_function(type="predict")
    def affine(x: tp.Numpy.Placeholder((1, 2))) -> tp.Numpy:
        w = flow.get_variable("w", shape=(2, 3), initializer=flow.zeros_initializer())
        b = flow.get_variable("b", shape=(3,), initializer=flow.zeros_initializer())
        return flow.matmul(x, w) + b

    return affine


@pytest.fixture
def linked(tmp_path):
    """A saved checkpoint whose folder ``w`` lives elsewhere behind a link, and whose ``b/out`` is a link."""
    define_job()
    flow.load_variables(VALUES)
    path = tmp_path / "model"
    flow.checkpoint.save(str(path))
    shutil.move(str(path / "w"), str(tmp_path / "shared_w"))
    os.symlink(tmp_path / "shared_w", path / "w", target_is_directory=True)
    os.replace(path / "b" / "out", tmp_path / "b.out")
    os.symlink(tmp_path / "b.out", path / "b" / "out")
    flow.clear_default_session()
    return path


def test_get_reads_a_linked_variable_folder_and_out_file(linked):
    got = flow.checkpoint.get(str(linked))
    assert sorted(got) == ["b", "w"]
    for name, value in VALUES.items():
        np.testing.assert_array_equal(got[name].numpy(), value)


def test_load_and_get_agree_on_a_linked_folder(linked):
    affine = define_job()
    flow.train.CheckPoint().load(str(linked))
    store = get_default_session().variables
    got = flow.checkpoint.get(str(linked))
    for name in VALUES:
        np.testing.assert_array_equal(store.get(name), got[name])
    np.testing.assert_allclose(affine(np.ones((1, 2), np.float32)), VALUES["w"].sum(0, keepdims=True) + VALUES["b"])


def test_a_link_that_loops_back_is_not_followed(linked):
    os.symlink(linked, linked / "w" / "again", target_is_directory=True)  # inside the linked folder, back to the root
    assert sorted(flow.checkpoint.get(str(linked))) == ["b", "w"]
