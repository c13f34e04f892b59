"""The layout rules of flowjob-ops' records run on 2 ranks like one process (workers/rule_cases.py): softmax and
log-softmax along a class axis split over the ranks, a batched matmul split by its batch, convolutions split by
batch, by filters and by input channels. Their gradients are the gradient ops' own rules and boxing."""
import numpy as np
import pytest

from flowjob_core.testing.modules import sibling

ok, ranks = sibling(__file__, "mpirun").ok, sibling(__file__, "mpirun").ranks


def _both(case: str, tmp_path) -> str:
    """Trains ``case`` in one process and on 2 ranks, asserts they agree; returns the 2 ranks' planned job."""
    one, two = tmp_path / "one", tmp_path / "two"
    one.mkdir()
    two.mkdir()
    ok(ranks(0, "rule_cases.py", case, one, timeout=60))
    ok(ranks(2, "rule_cases.py", case, two, timeout=60))
    np.testing.assert_allclose(np.load(two / "value.npy"), np.load(one / "value.npy"), rtol=2e-5, atol=2e-6)
    return (two / "dump.txt").read_text()


def test_softmax_along_a_split_class_axis_reduces_its_max_and_sums_over_the_ranks(tmp_path):
    text = _both("softmax", tmp_path)
    assert "(7, 4):float32 S(1) = mpi_softmax_class_split(Matmul_2/out_0)" in text, text
    assert "(7, 4):float32 S(1) = mpi_log_softmax_class_split(" in text, text
    assert "(7, 4):float32 S(1) = mpi_softmax_grad_class_split(Softmax_3/out_0, " in text, text
    assert "(7, 4):float32 S(1) = mpi_log_softmax_grad_class_split(LogSoftmax_7/out_0, " in text, text


def test_a_batched_matmul_splits_its_batch(tmp_path):
    text = _both("batched", tmp_path)
    assert "Matmul_1/out_0: (2, 3, 2):float32 S(0) = matmul(Input_0-boxing/out_0, batched-weight/out)" in text, text
    assert "(2, 5, 2):float32 S(0) = matmul(Input_0-boxing/out_0, Sigmoid_2_grad" in text, text  # the weight's rows


def test_a_convolution_with_its_batch_split_is_data_parallel(tmp_path):
    text = _both("batch", tmp_path)
    assert "Conv2D_1/out_0: (2, 4, 6, 6):float32 S(0) = conv2d(Input_0-boxing/out_0, conv1-weight/out)" in text, text
    assert "Conv2D_3/out_0: (2, 3, 4, 4):float32 S(0) = conv2d(Relu_2/out_0, conv2-weight/out)" in text, text
    # d x of the second: this rank's rows (its x_shape their shape); the weights' gradients partial sums
    assert "(2, 4, 6, 6):float32 S(0) = conv2d_grad_data(" in text and "x_shape=(2, 4, 6, 6)" in text, text
    assert "Conv2D_3_grad_1/out_0: (3, 4, 3, 3):float32 P = conv2d_grad_filter(" in text, text
    assert "Conv2D_1_grad/out_0: (4, 2, 3, 3):float32 P = conv2d_grad_filter(" in text, text
    # the loss: each rank's rows' share of the mean, one scalar all-reduced (not the rows all-gathered)
    assert ("ReduceMean_5/out_0: (1,):float32 P = sharded_reduce_mean(Square_4/out_0) {axis=None, keepdims=False, "
            "shard_size=4, shard_start=0, shard_stop=2}") in text, text


@pytest.mark.parametrize("case", ["conv", "channels"])
def test_a_convolution_split_by_filters_gives_its_output_split_by_channels(case, tmp_path):
    text = _both(case, tmp_path)
    rows = 4 if case == "conv" else 3
    # the first convolution computes this rank's 2 of 4 output channels; its filters' gradient is this rank's
    assert f"Conv2D_1/out_0: ({rows}, 2, 6, 6):float32 S(1) = conv2d(Input_0/out, conv1-weight/out)" in text, text
    # the second contracts the 2 channels this rank holds into partial sums
    assert f"Conv2D_3/out_0: ({rows}, 3, 4, 4):float32 P = conv2d(Relu_2/out_0, conv2-weight-boxing/out_0)" in text
    if case == "channels":  # 3 rows cannot split: the gradients stay on the channels
        assert "Conv2D_3_grad/out_0: (3, 2, 6, 6):float32 S(1) = conv2d_grad_data(" in text, text
        assert "Conv2D_1_grad/out_0: (2, 2, 3, 3):float32 S(0) = conv2d_grad_filter(Input_0/out, " in text, text


def test_a_layer_norm_with_its_rows_split_normalizes_each_rank_s_rows(tmp_path):
    text = _both("layer_norm", tmp_path)
    assert ("LayerNorm-moments/mean: (4, 1):float32 S(0), LayerNorm-moments/variance: (4, 1):float32 S(0) = "
            "moments(Matmul_1/out_0)") in text, text
    assert "LayerNorm/out_0: (4, 5):float32 S(0) = batch_norm(Matmul_1/out_0, LayerNorm-moments/mean" in text, text
    # gamma's and beta's gradients: each rank's rows summed, then all-reduced for the broadcast variables
    assert "LayerNorm_grad/out_3: (1, 5):float32 P = batch_norm_grad(" in text, text
    assert "LayerNorm_grad_unbroadcast/out_0: (1, 5):float32 P = unbroadcast(" in text, text
    assert "(4, 5):float32 S(0) = moments_grad(" in text and "(4, 5):float32 S(0) = add_n(" in text, text


def test_a_batch_norm_with_its_batch_split_takes_the_whole_batch_s_statistics(tmp_path):
    text = _both("batch_norm", tmp_path)  # the moving mean and variance too: every variable is compared
    assert ("BatchNorm/y: (4, 4):float32 S(0), BatchNorm/mean: (4,):float32 B, BatchNorm/variance: (4,):float32 B = "
            "mpi_batch_norm_train_rows_split(Matmul_1/out_0, ") in text, text
    assert ("BatchNorm_grad/out_0: (4, 4):float32 S(0), BatchNorm_grad/out_1: (4,):float32 B, BatchNorm_grad/out_2: "
            "(4,):float32 B = mpi_batch_norm_train_grad_rows_split(") in text, text


def test_a_batch_norm_with_its_channels_split_normalizes_each_rank_s_channels(tmp_path):
    text = _both("batch_norm_channels", tmp_path)
    assert ("BatchNorm/y: (7, 2):float32 S(1), BatchNorm/mean: (2,):float32 S(0), BatchNorm/variance: (2,):float32 "
            "S(0) = batch_norm_train(") in text, text


def test_a_softmax_cross_entropy_over_split_classes_gives_partial_losses(tmp_path):
    text = _both("cross_entropy", tmp_path)
    assert ("SoftmaxCrossEntropy_3/out_0: (7,):float32 P, SoftmaxCrossEntropy_3/out_1: (7, 4):float32 S(1) = "
            "mpi_softmax_cross_entropy_class_split(") in text, text
    assert "SoftmaxCrossEntropy_3_grad/out_0: (7, 4):float32 S(1) = softmax_cross_entropy_grad(" in text, text


def test_a_face_head_normalizes_each_rank_s_classes_and_moves_nothing_but_the_loss(tmp_path):
    text = _both("l2_normalize", tmp_path)
    assert ("L2Normalize_2/out_0: (4, 5):float32 S(0), L2Normalize_2/out_1: (4, 1):float32 S(0) = "
            "l2_normalize(fc7-weight/out)") in text, text
    assert "L2Normalize_2_grad/out_0: (4, 5):float32 S(0) = l2_normalize_grad(" in text, text
    assert "-boxing" not in text, text  # the classes stay on their rank, forward and backward


def test_pooling_keeps_the_channels_a_split_convolution_made(tmp_path):
    text = _both("pool", tmp_path)
    assert "MaxPool2D_3/out_0: (3, 2, 4, 4):float32 S(1) = max_pool2d(Relu_2/out_0)" in text, text
    assert "AvgPool2D_4/out_0: (3, 2, 2, 2):float32 S(1) = avg_pool2d(MaxPool2D_3/out_0)" in text, text
    # the average's gradient is given its piece's x_shape
    assert "(3, 2, 4, 4):float32 S(1) = avg_pool2d_grad(" in text and "x_shape=(3, 2, 4, 4)" in text, text


def test_concat_slice_and_their_gradients_keep_the_rows_split(tmp_path):
    text = _both("concat", tmp_path)
    assert "Concat_3/out_0: (4, 5):float32 S(0) = concat(Matmul_1/out_0, Matmul_2/out_0) {axis=1}" in text, text
    assert "(4, 3):float32 S(0) = slice(Concat_3/out_0) {begin=(None, 1), size=(None, 3)}" in text, text
    assert "(4, 5):float32 S(0) = slice_grad(" in text and "shape=(4, 5)" in text, text
    assert "Concat_3_grad/out_0: (4, 3):float32 S(0), Concat_3_grad/out_1: (4, 2):float32 S(0) = split(" in text
