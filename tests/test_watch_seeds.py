"""The watch programs of the seed documents, run unchanged in a fresh interpreter each.

A fresh process matters: the legacy names (``Dense_6``) come from one process-wide counter.
Random inputs make the printed numbers vary; the tests check the relation the documents show.
"""
import re
import subprocess
import sys

import numpy as np
import pytest

# 000 test_watch.py (tp.Numpy handler)
SEED_000_TEST_WATCH = '''
# test_watch.py
import numpy as np
import oneflow as flow
import oneflow.typing as tp


def watch_handler(y: tp.Numpy):
    print("out:", y)


@flow.global_function()
def ReluJob(x: tp.Numpy.Placeholder((5,))) -> None:
    y = flow.nn.relu(x)
    flow.watch(y, watch_handler)


flow.config.gpu_device_num(1)
data = np.random.uniform(-1, 1, 5).astype(np.float32)
print("in:", data)
ReluJob(data)
'''

# 001 test_watch.py (version 0.1: FixedTensorDef default, unannotated handler, .ndarray())
SEED_001_TEST_WATCH = '''
# test_watch.py
import numpy as np
import oneflow as flow

def cb(y):
    print("out", y.ndarray())

@flow.global_function()
def ReluJob(x=flow.FixedTensorDef((10,))):
    y = flow.nn.relu(x)
    flow.watch(y, cb)

flow.config.gpu_device_num(1)
data = np.random.uniform(-1, 1, 10).astype(np.float32)
print("in: ", data)
ReluJob(data)
'''

# 001 test_watch_diff.py
SEED_001_TEST_WATCH_DIFF = '''
import numpy as np
import oneflow as flow

def get_cb(bn):
    def cb(x):
        blob = x.ndarray()
        print(bn, blob.shape, blob.dtype)
        # print(blob)
    return cb

def get_train_config():
    config = flow.function_config()
    config.default_data_type(flow.float)
    config.train.primary_lr(0.1)
    config.train.model_update_conf({"naive_conf": {}})
    return config

@flow.global_function(get_train_config())
def train_job(images=flow.FixedTensorDef((8, 1, 28, 28), dtype=flow.float),
              labels=flow.FixedTensorDef((8,), dtype=flow.int32)):
    initializer = flow.truncated_normal(0.1)
    reshape = flow.reshape(images, [images.shape[0], -1])
    hidden = flow.layers.dense(reshape, 512, activation=flow.nn.relu, kernel_initializer=initializer)
    logits = flow.layers.dense(hidden, 10, kernel_initializer=initializer)
    loss = flow.nn.sparse_softmax_cross_entropy_with_logits(labels, logits)
    flow.losses.add_loss(loss)

    flow.watch(logits, get_cb("logits"))
    flow.watch_diff(logits, get_cb("logits_grad"))

    return loss

flow.train.CheckPoint().init()
images = np.random.uniform(-10, 10, (8, 1, 28, 28)).astype(np.float32)
labels = np.random.randint(-10, 10, (8,)).astype(np.int32)
loss = train_job(images, labels).get().mean()
'''

# 001 test_watch_scope.py
SEED_001_TEST_WATCH_SCOPE = '''
import numpy as np
import oneflow as flow

def get_train_config():
    config = flow.function_config()
    config.default_data_type(flow.float)
    config.train.primary_lr(0.1)
    config.train.model_update_conf({"naive_conf": {}})
    return config

tensor_watched = {}
tensor_grad_watched = {}

@flow.global_function(get_train_config())
def train_job(images=flow.FixedTensorDef((8, 1, 28, 28), dtype=flow.float),
              labels=flow.FixedTensorDef((8,), dtype=flow.int32)):
    initializer = flow.truncated_normal(0.1)
    reshape = flow.reshape(images, [images.shape[0], -1])
    hidden = flow.layers.dense(reshape, 512, activation=flow.nn.relu, kernel_initializer=initializer)
    with flow.watch_scope(tensor_watched, tensor_grad_watched):
        logits = flow.layers.dense(hidden, 10, kernel_initializer=initializer)
    loss = flow.nn.sparse_softmax_cross_entropy_with_logits(labels, logits)
    flow.losses.add_loss(loss)

    return loss

flow.train.CheckPoint().init()
images = np.random.uniform(-10, 10, (8, 1, 28, 28)).astype(np.float32)
labels = np.random.randint(-10, 10, (8,)).astype(np.int32)
loss = train_job(images, labels).get().mean()

print("view watched tensors")
for lbn, tensor_data in tensor_watched.items():
    print(lbn)
    #print(tensor_data["blob"].ndarray())
    #print(tensor_data["blob_def"])

print("view watched grad tensors")
for lbn, tensor_data in tensor_grad_watched.items():
    print(lbn)
    #print(tensor_data["blob"].ndarray())
    #print(tensor_data["blob_def"])
'''


def run_program(source, tmp_path):
    path = tmp_path / "program.py"
    path.write_text(source)
    result = subprocess.run([sys.executable, str(path)], capture_output=True, text=True, timeout=300,
                            cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    return result.stdout


def _array(text):
    return np.array(text.replace("[", " ").replace("]", " ").split(), dtype=np.float32)


@pytest.mark.parametrize("source, in_prompt, out_prompt, size", [
    (SEED_000_TEST_WATCH, "in:", "out:", 5),
    (SEED_001_TEST_WATCH, "in: ", "out", 10),
], ids=["000", "001"])
def test_test_watch_prints_the_input_then_its_relu(source, in_prompt, out_prompt, size, tmp_path):
    out = run_program(source, tmp_path)
    match = re.fullmatch(rf"{re.escape(in_prompt)} (\[.*?\])\n{re.escape(out_prompt)} (\[.*?\])\n", out, re.S)
    assert match, out
    data, relu = _array(match.group(1)), _array(match.group(2))
    assert data.shape == relu.shape == (size,)
    np.testing.assert_array_equal(relu, np.maximum(data, 0))


def test_test_watch_diff_prints_shapes_and_dtypes(tmp_path):
    assert run_program(SEED_001_TEST_WATCH_DIFF, tmp_path) == ("logits (8, 10) float32\n"
                                                               "logits_grad (8, 10) float32\n")


def test_test_watch_scope_prints_the_documented_keys(tmp_path):
    # the document's sample output says "blobs" where its program prints "tensors"; the keys are exact
    assert run_program(SEED_001_TEST_WATCH_SCOPE, tmp_path).splitlines() == [
        "view watched tensors",
        "Dense_6-bias/out",
        "Dense_6-weight/out",
        "Dense_6_matmul/out_0",
        "Dense_6_bias_add/out_0",
        "view watched grad tensors",
        "Dense_6_matmul/out_0",
        "Dense_6_bias_add/out_0",
        "Dense_6-bias/out",
        "Dense_6-weight/out",
    ]
