"""Train a small classifier briefly, export it with flow.saved_model and serve it with flow.serving.

Written as a legacy OneFlow v0.4 program: a train job and a predict job share the variables, the
predict job is saved with a signature (input "features", output "probs") as
``<folder>/1/saved_model.pb`` + ``variables/``, then, after the session is cleared, an
``InferenceSession`` loads it back and must give the predict job's outputs. The second part reads
the ``.prototxt`` itself and compiles the graph for another batch size, as legacy's serving tests do.

    python saved_model_serving.py [folder]        (default: ./saved_models, replaced if present)
"""
import os
import shutil
import sys

import google.protobuf.text_format as text_format
import numpy as np

import oneflow as flow
import oneflow.core.serving.saved_model_pb2 as saved_model_pb
import oneflow.typing as tp

BATCH = 32
FEATURES = 4
CLASSES = 3


def make_data(n, seed):
    """Three clusters in four dimensions: a class is its cluster."""
    rng = np.random.RandomState(seed)
    labels = rng.randint(0, CLASSES, n).astype(np.int32)
    centers = np.eye(CLASSES, FEATURES, dtype=np.float32) * 3.0
    features = centers[labels] + rng.normal(0, 0.7, (n, FEATURES)).astype(np.float32)
    return features, labels


def classifier(features, trainable=True):
    hidden = flow.layers.dense(features, 16, activation=flow.nn.relu, name="hidden", trainable=trainable,
                               kernel_initializer=flow.random_uniform_initializer(-0.5, 0.5))
    return flow.layers.dense(hidden, CLASSES, name="logits", trainable=trainable,
                             kernel_initializer=flow.random_uniform_initializer(-0.5, 0.5))


@flow.global_function(type="train")
def train_job(features: tp.Numpy.Placeholder((BATCH, FEATURES)),
              labels: tp.Numpy.Placeholder((BATCH,), dtype=flow.int32)) -> tp.Numpy:
    logits = classifier(features)
    loss = flow.nn.sparse_softmax_cross_entropy_with_logits(labels, logits)
    flow.optimizer.SGD(flow.optimizer.PiecewiseConstantScheduler([], [0.1]), momentum=0.9).minimize(loss)
    return loss


signature_lbns = {}


@flow.global_function(type="predict")
def predict(features: tp.Numpy.Placeholder((BATCH, FEATURES))) -> tp.Numpy:
    signature_lbns["features"] = features.logical_blob_name
    probs = flow.nn.softmax(classifier(features, trainable=False))
    signature_lbns["probs"] = probs.logical_blob_name
    return probs


def main(folder):
    if os.path.isdir(folder):
        shutil.rmtree(folder)
    features, labels = make_data(BATCH * 20, seed=0)
    for epoch in range(3):
        for i in range(0, len(labels), BATCH):
            loss = train_job(features[i:i + BATCH], labels[i:i + BATCH])
        print("epoch {} loss {:.4f}".format(epoch, float(loss.mean())))

    test_features, test_labels = make_data(BATCH, seed=1)
    expected = predict(test_features)
    print("accuracy: {:.1f}%".format(100.0 * float((expected.argmax(1) == test_labels).mean())))

    builder = flow.saved_model.ModelBuilder(folder).ModelName("clusters").Version(1)
    signature = builder.AddFunction(predict).AddSignature("classify")
    signature.Input("features", signature_lbns["features"]).Output("probs", signature_lbns["probs"])
    builder.Save()
    print("saved:", sorted(os.listdir(os.path.join(folder, "1"))))

    flow.clear_default_session()  # the served model owes nothing to this session

    sess = flow.serving.InferenceSession()
    sess.load_saved_model(folder)
    sess.launch()
    job_name = sess.list_jobs()[0]
    print("job:", job_name, "inputs:", sess.list_inputs(), "outputs:", sess.list_outputs())
    print("input info:", sess.input_info("features", job_name))
    (probs,) = sess.run(job_name, features=test_features)
    print("served outputs match:", bool(np.allclose(probs, expected, rtol=1e-5, atol=1e-6)))
    sess.close()

    # legacy's lower-level way: read the model's text form, compile its default graph for batch 8
    model = saved_model_pb.SavedModel()
    with open(os.path.join(folder, "1", "saved_model.prototxt"), "rb") as f:
        text_format.Merge(f.read(), model)
    graph_def = model.graphs[model.default_graph_name]
    sess = flow.serving.InferenceSession()
    sess.set_checkpoint_path(os.path.join(folder, "1", model.checkpoint_dir))
    with sess.open(model.default_graph_name, graph_def.signatures[graph_def.default_signature_name], 8):
        sess.compile(graph_def.op_list)
    sess.launch()
    (probs8,) = sess.run(model.default_graph_name, features=test_features[:8])
    print("batch 8 outputs match:", bool(np.allclose(probs8, expected[:8], rtol=1e-5, atol=1e-6)))
    sess.close()


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "saved_models")
