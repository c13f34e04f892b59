"""The layout signatures flowjob-ops declares (``flowjob_ops/layout_rules.py``) and the sharded pieces of a gather from
a row-split table (``records/sharded.py``): the ranks' pieces add up to the whole op."""
import numpy as np
import pytest

from flowjob_core import BlobSpec, OpBuildError
from flowjob_core.ir.layout import BROADCAST as B, PARTIAL_SUM as P, Signature, split, signatures_of
from flowjob_core.testing import run_op
from flowjob_ops import layout_rules
from flowjob_ops.records.catalog import record

F32, I32 = np.dtype(np.float32), np.dtype(np.int32)
RNG = np.random.default_rng(5)
TABLE = RNG.standard_normal((6, 3)).astype(np.float32)
IDS = np.array([[0, 5, 2], [3, 3, 1]], dtype=np.int32)


def test_a_row_split_table_gathers_partial_sums_that_add_up_to_the_gather():
    pieces = [run_op("sharded_gather", [TABLE[start:start + 2], IDS], {"axis": 0, "shard_start": start,
                                                                        "shard_stop": start + 2})[0]
              for start in (0, 2, 4)]
    np.testing.assert_array_equal(pieces[1][0, 2], TABLE[2])
    np.testing.assert_array_equal(pieces[1][0, 0], np.zeros(3))  # row 0 is another rank's
    np.testing.assert_allclose(sum(pieces), TABLE[IDS])


def test_the_gradient_of_a_row_split_table_is_each_rank_s_rows():
    dy = RNG.standard_normal((2, 3, 3)).astype(np.float32)
    (whole,) = run_op("gather_grad", [IDS, dy], {"axis": 0, "shape": (6, 3)})
    rows = [run_op("sharded_gather_grad", [IDS, dy], {"axis": 0, "shape": (6, 3), "shard_start": s,
                                                       "shard_stop": s + 3})[0] for s in (0, 3)]
    np.testing.assert_allclose(np.concatenate(rows), whole)
    assert whole[3].any()  # id 3 twice: summed
    with pytest.raises(OpBuildError, match=r"rows \[4, 8\) are not inside axis 0 of \(6, 3\)"):
        run_op("sharded_gather_grad", [IDS, dy], {"axis": 0, "shape": (6, 3), "shard_start": 4, "shard_stop": 8})
    with pytest.raises(OpBuildError, match="must hold the 2 rows of the piece"):
        run_op("sharded_gather", [TABLE[:2], IDS], {"axis": 0, "shard_start": 0, "shard_stop": 3})


def test_matmul_splits_rows_columns_or_the_contracted_axis():
    a, b = BlobSpec((4, 6), F32), BlobSpec((6, 8), F32)
    assert layout_rules.matmul([a, b], {})[:3] == [Signature((split(0), B), (split(0),)),
                                                   Signature((B, split(1)), (split(1),)),
                                                   Signature((split(1), split(0)), (P,))]
    # transposed operands: the same roles on their other axes
    at, bt = BlobSpec((6, 4), F32), BlobSpec((8, 6), F32)
    assert layout_rules.matmul([at, bt], {"transpose_a": True, "transpose_b": True})[:3] == [
        Signature((split(1), B), (split(0),)), Signature((B, split(0)), (split(1),)),
        Signature((split(0), split(1)), (P,))]


def test_batched_matmul_splits_its_batch_axes_and_carries_the_matrix_rules_to_the_last_two():
    a, b = BlobSpec((2, 3, 4, 6), F32), BlobSpec((3, 6, 8), F32)  # b broadcast over a's first batch axis
    sigs = layout_rules.matmul([a, b], {})
    assert sigs[:2] == [Signature((split(0), B), (split(0),)), Signature((split(1), split(0)), (split(1),))]
    assert sigs[2:5] == [Signature((split(2), B), (split(2),)), Signature((B, split(2)), (split(3),)),
                         Signature((split(3), split(1)), (P,))]
    at = BlobSpec((2, 6, 4), F32)  # transposed a: its rows are its last axis
    assert Signature((split(2), B), (split(1),)) in layout_rules.matmul([at, BlobSpec((6, 8), F32)],
                                                                         {"transpose_a": True})
    assert layout_rules.matmul([BlobSpec((1, 4, 6), F32), BlobSpec((5, 6, 8), F32)], {})[0] == \
        Signature((B, split(0)), (split(0),))  # a batch axis of size 1 broadcasts
    assert layout_rules.matmul([BlobSpec((6,), F32), b], {}) == []  # a vector: runs whole
    # every batched signature runs: the pieces' product is the product's piece
    x, y = RNG.standard_normal((2, 3, 4, 6)), RNG.standard_normal((3, 6, 8))
    whole = x @ y
    np.testing.assert_allclose(x[1:] @ y, whole[1:])
    np.testing.assert_allclose(x[:, 1:] @ y[1:], whole[:, 1:])
    np.testing.assert_allclose(x[..., :3] @ y[:, :3] + x[..., 3:] @ y[:, 3:], whole)


def test_reductions_over_a_split_axis_give_partial_sums():
    x = BlobSpec((4, 6, 2), F32)
    sigs = layout_rules.reduce_sum([x], {"axis": [1], "keepdims": False})
    assert sigs == [Signature((split(0),), (split(0),)), Signature((split(1),), (P,)),
                    Signature((split(2),), (split(1),)), Signature((P,), (P,))]
    assert Signature((split(1),), (P,)) not in layout_rules.reduce_mean([x], {"axis": [1], "keepdims": False})


def test_the_records_declare_their_rules_and_others_run_whole():
    table, ids = BlobSpec((6, 3), F32), BlobSpec((2, 3), I32)
    out = BlobSpec((2, 3, 3), F32)
    sigs = signatures_of(record("gather"), [table, ids], [out], {"axis": 0})
    assert sigs[0] == Signature((split(0), B), (P,), local_op="sharded_gather")
    assert sigs[-1] == Signature((B, B), (B,))
    x = BlobSpec((4, 6), F32)
    assert signatures_of(record("top_k"), [x], [x], {"k": 1}) == [Signature((B,), (B,))]  # no rule: runs whole
    assert signatures_of(record("softmax"), [x], [x], {"axis": -1}) == [
        Signature((split(0),), (split(0),)), Signature((split(1),), (split(1),), local_op="mpi_softmax_class_split"),
        Signature((B,), (B,))]
    labels, logits = BlobSpec((4,), I32), x
    assert signatures_of(record("sparse_softmax_cross_entropy"), [labels, logits], [labels, logits], {})[0] == \
        Signature((split(0), split(0)), (split(0), split(0)))
    assert signatures_of(record("bias_add"), [x, BlobSpec((6,), F32)], [x], {})[:2] == [
        Signature((split(0), B), (split(0),)), Signature((split(1), split(0)), (split(1),))]


def test_softmax_and_its_gradients_split_the_normalized_axis_through_flowjob_mpi_pieces():
    x = BlobSpec((4, 6, 8), F32)
    for op, local in [("softmax", "mpi_softmax_class_split"), ("log_softmax", "mpi_log_softmax_class_split")]:
        assert signatures_of(record(op), [x], [x], {"axis": 1})[:3] == [
            Signature((split(0),), (split(0),)), Signature((split(2),), (split(2),)),
            Signature((split(1),), (split(1),), local_op=local)]
        assert signatures_of(record(f"{op}_grad"), [x, x], [x], {"axis": -1})[2] == \
            Signature((split(2), split(2)), (split(2),), local_op=local.replace("_class", "_grad_class"))


def test_a_convolution_splits_its_batch_or_its_filters():
    x, w = BlobSpec((4, 3, 8, 8), F32), BlobSpec((6, 3, 3, 3), F32)
    y = BlobSpec((4, 6, 6, 6), F32)
    assert signatures_of(record("conv2d"), [x, w], [y], {})[:3] == [
        Signature((split(0), B), (split(0),)), Signature((B, split(0)), (split(1),)),
        Signature((split(1), split(1)), (P,))]  # the input channels contracted: partial sums
    last = signatures_of(record("conv2d"), [BlobSpec((4, 8, 8, 3), F32), BlobSpec((6, 3, 3, 3), F32)],
                         [BlobSpec((4, 6, 6, 6), F32)], {"data_format": "NHWC"})
    assert last[1] == Signature((B, split(0)), (split(3),))  # channels last: the output's last axis
    grouped = signatures_of(record("conv2d"), [BlobSpec((4, 6, 8, 8), F32), w], [y], {"groups": 2})
    assert Signature((B, split(0)), (split(1),)) not in grouped  # a rank's filters would read others' channels
    assert signatures_of(record("conv2d_grad_data"), [y, w], [x], {"x_shape": x.shape})[:3] == [
        Signature((split(0), B), (split(0),), shape_attrs=(("x_shape", 0),)), Signature((split(1), split(0)), (P,)),
        Signature((B, split(1)), (split(1),), shape_attrs=(("x_shape", 0),))]
    assert signatures_of(record("conv2d_grad_filter"), [x, y], [w], {"w_shape": w.shape})[:3] == [
        Signature((split(0), split(0)), (P,)), Signature((B, split(1)), (split(0),), shape_attrs=(("w_shape", 0),)),
        Signature((split(1), B), (split(1),), shape_attrs=(("w_shape", 0),))]
    assert signatures_of(record("conv3d"), [BlobSpec((2, 3, 4, 4, 4), F32), BlobSpec((4, 3, 1, 1, 1), F32)],
                         [BlobSpec((2, 4, 4, 4, 4), F32)], {})[1] == Signature((B, split(0)), (split(1),))


def test_normalizations_split_the_axes_their_statistics_keep():
    x, stat, param = BlobSpec((8, 5), F32), BlobSpec((8, 1), F32), BlobSpec((1, 5), F32)
    assert signatures_of(record("moments"), [x], [stat, stat], {"axes": (1,), "keepdims": True})[0] == \
        Signature((split(0),), (split(0), split(0)))
    assert layout_rules.moments([x], {"axes": (0,), "keepdims": False}) == [Signature((split(1),), (split(0),) * 2)]
    # a layer norm's batch_norm: x and its statistics by rows, gamma and beta whole
    attrs = {"epsilon": 1e-5, "with_scale": True, "with_offset": True}
    assert signatures_of(record("batch_norm"), [x, stat, stat, param, param], [x], attrs)[:2] == [
        Signature((split(0), split(0), split(0), B, B), (split(0),)),
        Signature((split(1), B, B, split(1), split(1)), (split(1),))]
    # its gradient: gamma's is each rank's rows summed, partial sums
    grads = signatures_of(record("batch_norm_grad"), [x, stat, stat, param, x], [x, stat, stat, param],
                          {"epsilon": 1e-5, "with_scale": True})
    assert grads[0] == Signature((split(0), split(0), split(0), B, split(0)), (split(0), split(0), split(0), P))
    assert grads[1] == Signature((split(1), B, B, split(1), split(1)), (split(1), P, P, split(1)))


def test_activations_split_any_axis_and_a_transpose_moves_its_split():
    x = BlobSpec((4, 6), F32)
    for op, inputs in [("sigmoid", [x]), ("sigmoid_grad", [x, x]), ("gelu", [x]), ("tanh_grad", [x, x]),
                       ("leaky_relu", [x]), ("cast", [x])]:
        assert signatures_of(record(op), inputs, [x], {"alpha": 0.1, "dtype": "float32"})[:2] == [
            Signature((split(0),) * len(inputs), (split(0),)), Signature((split(1),) * len(inputs), (split(1),))], op
    cube = BlobSpec((2, 3, 4), F32)
    assert layout_rules.transpose([cube], {"perm": (2, 0, 1)}) == [
        Signature((split(2),), (split(0),)), Signature((split(0),), (split(1),)), Signature((split(1),), (split(2),)),
        Signature((P,), (P,))]
    assert layout_rules.transpose([x], {})[0] == Signature((split(1),), (split(0),))  # reversed by default


def test_a_train_mode_batch_norm_splits_its_rows_through_flowjob_mpi_or_its_channels_alone():
    x, channel = BlobSpec((8, 4, 3), F32), BlobSpec((4,), F32)
    attrs = {"axis": 1, "epsilon": 1e-3, "with_scale": True, "with_offset": True}
    sigs = signatures_of(record("batch_norm_train"), [x, channel, channel], [x, channel, channel], attrs)
    rows = "mpi_batch_norm_train_rows_split"
    assert sigs[:3] == [Signature((split(0), B, B), (split(0), B, B), local_op=rows),
                        Signature((split(2), B, B), (split(2), B, B), local_op=rows),
                        Signature((split(1), split(0), split(0)), (split(1), split(0), split(0)))]
    grads = signatures_of(record("batch_norm_train_grad"), [x, channel, channel, channel, x], [x, channel, channel],
                          attrs)
    assert grads[0] == Signature((split(0), B, B, B, split(0)), (split(0), B, B),
                                 local_op="mpi_batch_norm_train_grad_rows_split")
    assert grads[2] == Signature((split(1), split(0), split(0), split(0), split(1)), (split(1), split(0), split(0)))


def test_a_softmax_cross_entropy_with_probability_labels_splits_rows_or_classes():
    logits, loss = BlobSpec((4, 6), F32), BlobSpec((4,), F32)
    assert signatures_of(record("softmax_cross_entropy"), [logits, logits], [loss, logits], {})[:2] == [
        Signature((split(0), split(0)), (split(0), split(0))),
        Signature((split(1), split(1)), (P, split(1)), local_op="mpi_softmax_cross_entropy_class_split")]
    assert signatures_of(record("softmax_cross_entropy_grad"), [logits, logits, loss], [logits], {})[:2] == [
        Signature((split(0),) * 3, (split(0),)), Signature((split(1), split(1), B), (split(1),))]


def test_l2_normalize_splits_any_axis_but_the_normalized_one():
    weight, norms = BlobSpec((8, 5), F32), BlobSpec((8, 1), F32)
    attrs = {"axis": 1, "epsilon": 1e-12}
    assert signatures_of(record("l2_normalize"), [weight], [weight, norms], attrs) == [
        Signature((split(0),), (split(0), split(0))), Signature((B,), (B, B))]
    assert signatures_of(record("l2_normalize_grad"), [weight, weight, norms], [weight], attrs)[0] == \
        Signature((split(0),) * 3, (split(0),))


def test_pooling_splits_its_batch_or_its_channels():
    x, y = BlobSpec((4, 6, 8, 8), F32), BlobSpec((4, 6, 4, 4), F32)
    attrs = {"ksize": 2, "strides": 2, "padding": "VALID"}
    assert signatures_of(record("max_pool2d"), [x], [y], attrs)[:2] == [
        Signature((split(0),), (split(0),)), Signature((split(1),), (split(1),))]
    assert signatures_of(record("max_pool2d_grad"), [x, y, y], [x], attrs)[1] == \
        Signature((split(1),) * 3, (split(1),))
    assert signatures_of(record("avg_pool2d_grad"), [y], [x], {**attrs, "x_shape": x.shape})[0] == \
        Signature((split(0),), (split(0),), shape_attrs=(("x_shape", 0),))
    last = signatures_of(record("max_pool2d"), [BlobSpec((4, 8, 8, 6), F32)], [BlobSpec((4, 4, 4, 6), F32)],
                         {**attrs, "data_format": "NHWC"})
    assert last[1] == Signature((split(3),), (split(3),))


def test_a_mean_over_a_split_axis_gives_partial_sums_that_add_up_to_the_mean():
    x = BlobSpec((4, 6, 2), F32)
    assert Signature((split(1),), (P,), local_op="sharded_reduce_mean") in layout_rules.reduce_mean(
        [x], {"axis": [1, 2], "keepdims": False})
    value = RNG.standard_normal((4, 6, 2)).astype(np.float32)
    pieces = [run_op("sharded_reduce_mean", [value[:, s:s + 2]], {"axis": [1, 2], "keepdims": True,
                                                                   "shard_start": s, "shard_stop": s + 2,
                                                                   "shard_size": 6})[0] for s in (0, 2, 4)]
    np.testing.assert_allclose(sum(pieces), value.mean(axis=(1, 2), keepdims=True), rtol=1e-6)
    with pytest.raises(OpBuildError, match="sharded_reduce_mean: shard_start 4, shard_stop 8"):
        run_op("sharded_reduce_mean", [value], {"axis": None, "shard_start": 4, "shard_stop": 8, "shard_size": 6})


def test_concat_and_split_keep_a_split_off_their_axis():
    a, b, joined = BlobSpec((8, 3), F32), BlobSpec((8, 2), F32), BlobSpec((8, 5), F32)
    assert signatures_of(record("concat"), [a, b], [joined], {"axis": 1}) == [
        Signature((split(0), split(0)), (split(0),)), Signature((P, P), (P,)), Signature((B, B), (B,))]
    assert signatures_of(record("split"), [joined], [a, b], {"axis": 1, "sizes": (3, 2)})[:2] == [
        Signature((split(0),), (split(0), split(0))), Signature((P,), (P, P))]


def test_a_slice_keeps_a_split_on_an_axis_it_takes_whole():
    x, box = BlobSpec((8, 6), F32), BlobSpec((8, 2), F32)
    attrs = {"begin": [None, 1], "size": [-1, 2]}
    assert signatures_of(record("slice"), [x], [box], attrs) == [
        Signature((split(0),), (split(0),)), Signature((P,), (P,)), Signature((B,), (B,))]
    assert signatures_of(record("slice_grad"), [box], [x], {**attrs, "shape": (8, 6)})[0] == \
        Signature((split(0),), (split(0),), shape_attrs=(("shape", 0),))
    assert signatures_of(record("slice"), [x], [BlobSpec((4, 2), F32)], {"begin": [2, 1], "size": [4, 2]})[0] == \
        Signature((P,), (P,))  # the rows cut too: no split
