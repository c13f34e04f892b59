"""Layouts as data (``flowjob_core.ir.layout``): values, signatures and their choice, the job recording what the
body declared, its printing and verification, and the variable store holding a split variable's shard."""
import numpy as np
import pytest

from flowjob_core import BlobSpec, Elementwise, OpDef, Session, VariableError, get_variable
from flowjob_core.ir import distribute, layout
from flowjob_core.ir.job import Job, Node
from flowjob_core.ir.layout import BROADCAST, PARTIAL_SUM, Shard, Signature, split
from flowjob_core.passes.pipeline import PassContext, VerificationError, verify
from flowjob_core.runtime.variables import VariableStore
from flowjob_core.trace.builder import JobBuilder
from flowjob_core.backends.numpy_backend import make_backend

F32 = np.dtype(np.float32)


def test_layout_values_print_as_legacy_wrote_them():
    assert [str(split(1)), str(BROADCAST), str(PARTIAL_SUM)] == ["S(1)", "B", "P"]
    assert layout.from_distribute(distribute.split(0)) == split(0)
    assert layout.from_distribute(distribute.broadcast()) == BROADCAST
    assert layout.from_distribute(distribute.auto()) is None
    with pytest.raises(ValueError, match="split takes an int axis"):
        layout.Layout("split")
    with pytest.raises(ValueError, match="split, broadcast or partial_sum"):
        layout.Layout("mirrored")


def test_a_split_must_fit_the_shape_and_divide_evenly():
    spec = BlobSpec((6, 4), F32)
    with pytest.raises(ValueError, match=r"job 'j', value 'x': split axis 2 is out of range .*\(6, 4\)"):
        layout.check(split(2), spec, "job 'j', value 'x'")
    assert layout.shard_of(split(0), spec, 1, 2, "w") == Shard(0, 3, 6)
    assert layout.shard_of(BROADCAST, spec, 1, 2, "w") is None
    with pytest.raises(ValueError, match=r"variable 'w': axis 1 of shape \(6, 4\) \(4\) does not split evenly over 3"):
        layout.shard_of(split(1), spec, 0, 3, "variable 'w'")


def test_signatures_default_to_running_whole_and_elementwise_ops_split_any_axis():
    x, row = BlobSpec((4, 6), F32), BlobSpec((6,), F32)
    plain = OpDef("toy", lambda ins, attrs: [ins[0]])
    assert layout.signatures_of(plain, [x], [x], {}) == [Signature((BROADCAST,), (BROADCAST,))]
    added = OpDef("toy_add", lambda ins, attrs: [ins[0]], elementwise=Elementwise("add", arity=2))
    sigs = layout.signatures_of(added, [x, row], [x], {})
    assert sigs == [Signature((split(0), BROADCAST), (split(0),)), Signature((split(1), split(0)), (split(1),)),
                    Signature((BROADCAST, BROADCAST), (BROADCAST,))]


def test_the_choice_moves_fewest_bytes_and_ties_go_to_the_first_listed():
    x = BlobSpec((8, 8), F32)
    keep = Signature((split(0),), (split(0),))
    whole = layout.run_whole([x], 1)
    assert layout.choose([keep, whole], [split(0)], [x], 2) == keep  # no boxing against an all-gather
    assert layout.choose([keep, whole], [BROADCAST], [x], 2) == keep  # a slice is free: the first wins
    assert layout.choose([keep, whole], [PARTIAL_SUM], [x], 2) == keep  # reduce-scatter beats all-reduce
    assert layout.boxing_bytes(PARTIAL_SUM, BROADCAST, x, 2) == 256.0
    assert layout.boxing_bytes(BROADCAST, PARTIAL_SUM, x, 2) == float("inf")


def test_moving_a_split_to_another_axis_costs_an_all_to_all_not_an_all_gather():
    x = BlobSpec((8, 8), F32)  # 256 bytes: an all-gather brings each rank the other half, an all-to-all a quarter
    assert layout.boxing_bytes(split(0), BROADCAST, x, 2) == 128.0
    assert layout.boxing_bytes(split(0), split(1), x, 2) == 64.0
    assert layout.boxing_bytes(split(0), split(1), x, 4) == 256 * 3 / 16
    rows, whole = Signature((split(1),), (split(1),)), layout.run_whole([x], 1)
    assert layout.choose([whole, rows], [split(0)], [x], 2) == rows


def test_declared_layouts_are_recorded_printed_and_verified():
    session = Session()
    traced = Job("declared")
    builder = JobBuilder(traced, session)
    with builder.activate():
        table = get_variable("table", (6, 2), distribute=distribute.split(0))
        get_variable("weight", (2, 3), distribute=distribute.broadcast())
        plain = get_variable("plain", (3,))
        table.with_split_distribute(1)
    assert traced.layouts == {"table/out": split(1), "weight/out": BROADCAST}
    assert plain.lbn not in traced.layouts
    text = str(traced)
    assert "variable table: (6, 2):float32 S(1)" in text and "variable weight: (2, 3):float32 B" in text
    assert "variable plain: (3,):float32  init" in text
    verify(traced, PassContext(session, session.registries))
    traced.layouts["plain/out"] = split(1)
    with pytest.raises(VerificationError, match=r"job 'declared', value 'plain/out': split axis 1 is out of range"):
        verify(traced, PassContext(session, session.registries))
    with builder.activate():
        with pytest.raises(VariableError, match=r"variable 'table' exists with layout S\(0\), requested B"):
            get_variable("table", (6, 2), distribute=distribute.broadcast())
        with pytest.raises(VariableError, match="split axis 2 is out of range"):
            get_variable("other", (6, 2), distribute=distribute.split(2))


def test_a_split_variable_holds_its_shard_of_the_whole_its_initializer_draws():
    def counting(shape, dtype, rng):
        return np.arange(np.prod(shape), dtype=dtype).reshape(shape)

    store = VariableStore(make_backend())
    var = store.declare("t", BlobSpec((4, 3), F32), counting, layout=split(0), shard=Shard(0, 2, 4))
    assert var.array.shape == (2, 3) and var.local_spec == BlobSpec((2, 3), F32)
    np.testing.assert_array_equal(store.get("t"), np.arange(6, 12).reshape(2, 3))
    store.assign("t", np.zeros((4, 3), np.float32) + np.arange(4)[:, None])  # the whole: the shard keeps rows 2, 3
    np.testing.assert_array_equal(store.get("t"), [[2, 2, 2], [3, 3, 3]])
    store.assign_local("t", np.ones((2, 3)))
    np.testing.assert_array_equal(store.get("t"), np.ones((2, 3)))
    with pytest.raises(VariableError, match=r"'t' has shape \(4, 3\), the value has \(2, 3\)"):
        store.assign("t", np.ones((2, 3)))
    with pytest.raises(VariableError, match=r"'t' holds shape \(2, 3\) on this rank"):
        store.assign_local("t", np.ones((4, 3)))
    slot = store.declare("t-momentum", BlobSpec((2, 3), F32))
    store.hold_as_shard("t-momentum", split(0), BlobSpec((4, 3), F32), Shard(0, 2, 4))
    assert slot.spec == BlobSpec((4, 3), F32) and slot.local_spec == BlobSpec((2, 3), F32)
    with pytest.raises(VariableError, match="is not the shard"):
        store.hold_as_shard("t", split(0), BlobSpec((4, 3), F32), Shard(0, 2, 4))


class PieceAware:
    """An initializer that can give a piece: the store must ask for the piece, never the whole."""

    def __init__(self):
        self.asked = []

    def __call__(self, shape, dtype, rng):
        raise AssertionError("the whole was drawn for a split variable")

    def piece(self, shape, dtype, rng, axis, start, stop):
        self.asked.append((tuple(shape), axis, start, stop))
        local = list(shape)
        local[axis] = stop - start
        return np.full(local, start, dtype=dtype)


def test_a_split_variable_draws_only_its_piece_where_its_initializer_can():
    init = PieceAware()
    store = VariableStore(make_backend())
    store.declare("t", BlobSpec((4, 6), F32), init, layout=split(1), shard=Shard(1, 3, 6))
    assert init.asked == [((4, 6), 1, 3, 6)]
    np.testing.assert_array_equal(store.get("t"), np.full((4, 3), 3.0))
    store.initialize("t")  # CheckPoint().init() again
    assert len(init.asked) == 2
    zeros = store.declare("z", BlobSpec((4, 6), F32), None, layout=split(0), shard=Shard(0, 0, 2))
    assert zeros.array.shape == (2, 6) and not store.get("z").any()


def test_a_piece_of_the_wrong_shape_is_an_error_naming_the_variable():
    class Wrong(PieceAware):
        def piece(self, shape, dtype, rng, axis, start, stop):
            return np.zeros(shape, dtype=dtype)

    store = VariableStore(make_backend())
    with pytest.raises(VariableError, match=r"variable 'w' gave a piece of shape \(4, 6\) for rows \[0, 2\) of "
                                            r"axis 0, expected \(2, 6\)"):
        store.declare("w", BlobSpec((4, 6), F32), Wrong(), layout=split(0), shard=Shard(0, 0, 2))


def test_dead_values_lose_their_layouts():
    from flowjob_core.passes.pipeline import eliminate_dead_code
    session = Session()
    spec = BlobSpec((2,), F32)
    job = Job("dead")
    job.nodes.append(Node("variable", "v", (), ("v/out",), {"name": "v", "shape": (2,), "dtype": F32}))
    job.specs["v/out"] = spec
    job.layouts["v/out"] = split(0)
    eliminate_dead_code(job, PassContext(session, session.registries))
    assert job.layouts == {}


def test_a_gradient_layout_is_recorded_for_the_boxing_pass_and_verified():
    session = Session()
    traced = Job("grads")
    builder = JobBuilder(traced, session)
    with builder.activate():
        table = get_variable("table", (6, 2))
        same = table.with_gradient_distribute(distribute.split(0))
        table.with_gradient_distribute(distribute.auto())  # auto(): the pass chooses, nothing recorded
    assert same.lbn == table.lbn and traced.layouts == {}
    assert traced.gradient_layouts == {"table/out": split(0)}
    assert traced.copy().gradient_layouts == traced.gradient_layouts
    assert "\ngradient layouts:\n  table/out: S(0)" in str(traced)  # what python -m oneflow dump prints
    verify(traced, PassContext(session, session.registries))
    traced.gradient_layouts["table/out"] = split(2)
    with pytest.raises(VerificationError, match=r"job 'grads', the gradient of 'table/out': split axis 2 is out of"):
        verify(traced, PassContext(session, session.registries))


def test_the_builtin_sum_and_unbroadcast_keep_splits_or_give_partial_sums():
    from flowjob_core.plugins.builtin_ops import ADD_N, UNBROADCAST

    x = BlobSpec((8, 5), F32)
    assert layout.signatures_of(ADD_N, [x, x], [x], {})[:3] == [
        Signature((split(0), split(0)), (split(0),)), Signature((split(1), split(1)), (split(1),)),
        Signature((PARTIAL_SUM, PARTIAL_SUM), (PARTIAL_SUM,))]
    target = BlobSpec((1, 5), F32)
    assert layout.signatures_of(UNBROADCAST, [x], [target], {"shape": (1, 5)})[:3] == [
        Signature((split(0),), (PARTIAL_SUM,)), Signature((split(1),), (split(1),), shape_attrs=(("shape", 0),)),
        Signature((PARTIAL_SUM,), (PARTIAL_SUM,))]
    cube = BlobSpec((2, 8, 5), F32)  # a leading axis summed away
    assert layout.signatures_of(UNBROADCAST, [cube], [x], {"shape": (8, 5)})[:2] == [
        Signature((split(0),), (PARTIAL_SUM,)), Signature((split(1),), (split(0),), shape_attrs=(("shape", 0),))]
