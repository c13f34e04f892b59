"""A two-stage program for ``python -m oneflow dump`` (its body is never run): stage 1 on "0:0", stage 2 on "0:1"."""
import oneflow as flow
import oneflow.typing as tp

flow.config.gpu_device_num(2)  # without a GPU backend: one warning, the job runs on the CPU


@flow.global_function(type="train")
def train_job(images: tp.Numpy.Placeholder((8, 6)), labels: tp.Numpy.Placeholder((8,), dtype=flow.int32)) -> tp.Numpy:
    with flow.scope.placement("gpu", "0:0"):
        hidden = flow.layers.dense(images, 5, activation=flow.nn.relu, name="stage1")
    with flow.scope.placement("gpu", "0:1"):
        logits = flow.layers.dense(hidden, 4, name="stage2")
        loss = flow.nn.sparse_softmax_cross_entropy_with_logits(labels, logits, name="loss")
    flow.optimizer.SGD(flow.optimizer.PiecewiseConstantScheduler([], [0.1]), momentum=0.9).minimize(loss)
    return loss


if __name__ == "__main__":
    raise SystemExit("python -m oneflow dump placed_script.py: this program is only dumped")
