"""A job for ``python -m oneflow dump`` (it defines the job and runs nothing): x @ w with w split by columns, the
product's gradient annotated split by rows."""
import oneflow as flow
import oneflow.typing as tp


@flow.global_function(type="train")
def gradient_job(x: tp.Numpy.Placeholder((8, 6))) -> tp.Numpy:
    w = flow.get_variable("w", (6, 4), initializer=flow.random_normal_initializer(),
                          distribute=flow.distribute.split(1))
    y = flow.matmul(x, w).with_gradient_distribute(flow.distribute.split(0))
    loss = flow.math.reduce_sum(flow.math.sigmoid(y))
    flow.optimizer.SGD(flow.optimizer.PiecewiseConstantScheduler([], [0.1])).minimize(loss)
    return loss
