"""conv2d_bias_pool's gradient: the pooling gradient must see the recomputed activation's own
maxima, not the fused kernel's output (which can round differently; found by the op table's
randomized gradient test)."""
import numpy as np

from flowjob_core.testing import check_grads

CONV_POOL_ATTRS = dict(padding="SAME", strides=[1, 1], dilation_rate=[1, 1], data_format="NCHW",
                       pool_ksize=[1, 1], pool_strides=[1, 1], pool_padding="VALID")


def test_gradient_where_the_fused_sum_rounds_differently_from_the_recomputed_one() -> None:
    x = np.full((1, 1, 1, 4), 0.99999)
    w = np.array([[[[-0.625, 0.4375, 0.4375]]]])
    for activation in (None, "relu"):
        check_grads("conv2d_bias_pool", [x, w, np.full(1, 0.5)], CONV_POOL_ATTRS | {"activation": activation})
