"""``OpDef``'s grouped records (``Compute``, ``Effects``, ``ShapeTraits``, ``LegacyFace``): their defaults, the
checks each makes naming the op, and the flat keywords of before the records (accepted with a warning)."""
from __future__ import annotations

import dataclasses
import warnings

import pytest

from flowjob_core import Compute, Effects, LegacyFace, OpDef, ShapeTraits


def _same(inputs, attrs):
    return [inputs[0]]


def test_a_plain_op_gets_every_record_with_its_defaults():
    op = OpDef("toy_plain_op", _same, not_differentiable=True)
    assert op.compute == Compute() and op.compute.amp is None and op.compute.flops is None
    assert op.effects == Effects() and op.effects.mutates == () and not op.effects.host_state
    assert op.shape == ShapeTraits() and op.shape.traced_shape_from is None
    assert op.legacy == LegacyFace(name_prefix="ToyPlainOp") and op.legacy.legacy_names == ()
    assert op.out_names(2) == ("out_0", "out_1")


def test_the_name_prefix_defaults_to_the_capitalised_name_and_a_given_one_stays():
    assert OpDef("add_n", _same).legacy.name_prefix == "AddN"
    op = OpDef("scalar_rsub", _same, legacy=LegacyFace(name_prefix="ScalarSub", output_names=("y",)))
    assert op.legacy.name_prefix == "ScalarSub" and op.out_names(1) == ("y",)


def test_records_are_frozen_and_shared_defaults_are_safe():
    with pytest.raises(dataclasses.FrozenInstanceError):
        Effects().view = True  # type: ignore[misc]
    assert OpDef("toy_a", _same).effects is OpDef("toy_b", _same).effects


def test_compute_refuses_an_unknown_amp_class_naming_the_op():
    with pytest.raises(ValueError, match=r"op 'toy_amp'.*amp must be None or one of white, gray, clear, black"):
        OpDef("toy_amp", _same, compute=Compute(amp="grey"))


@pytest.mark.parametrize("mutates", [(-1,), [0], (0.0,), (True,)])
def test_effects_refuse_mutates_that_are_not_input_positions_naming_the_op(mutates):
    with pytest.raises(ValueError, match=r"op 'toy_mutates': mutates must be a tuple of input positions"):
        OpDef("toy_mutates", _same, effects=Effects(mutates=mutates))


def test_shape_traits_refuse_bad_positions_and_an_empty_attribute_name_naming_the_op():
    with pytest.raises(ValueError, match=r"op 'toy_traced': traced_shape_from must be a tuple of input positions"):
        OpDef("toy_traced", _same, shape=ShapeTraits(traced_shape_from=(1, -2)))
    with pytest.raises(ValueError, match=r"op 'toy_pnum': parallel_num_attr must be None or an attribute name"):
        OpDef("toy_pnum", _same, shape=ShapeTraits(parallel_num_attr=""))
    with pytest.raises(ValueError, match=r"op 'toy_target': target_shape_attr must be None or an attribute name"):
        OpDef("toy_target", _same, shape=ShapeTraits(target_shape_attr=""))
    with pytest.raises(ValueError, match=r"op 'toy_both': fixed_shape .* and target_shape_attr .* exclude each other"):
        OpDef("toy_both", _same, shape=ShapeTraits(fixed_shape=True, target_shape_attr="shape"))


def test_legacy_face_refuses_repeated_names_and_a_rename_to_no_input_naming_the_op():
    with pytest.raises(ValueError, match=r"op 'toy_names': input_names names 'x' twice"):
        OpDef("toy_names", _same, legacy=LegacyFace(input_names=("x", "x")))
    with pytest.raises(ValueError, match=r"op 'toy_names': output_names must be a tuple of names"):
        OpDef("toy_names", _same, legacy=LegacyFace(output_names=["y"]))  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"op 'toy_rename': legacy_input_names maps 'scalar' to 'scale', which is "
                                         r"not one of input_names"):
        OpDef("toy_rename", _same, legacy=LegacyFace(input_names=("x", "factor"),
                                                     legacy_input_names=(("scalar", "scale"),)))
    with pytest.raises(ValueError, match=r"op 'toy_rename': legacy_input_names must hold \(legacy name, name\) pairs"):
        OpDef("toy_rename", _same, legacy=LegacyFace(legacy_input_names=("scalar",)))  # type: ignore[arg-type]


def test_a_record_given_for_another_is_refused_naming_the_op():
    with pytest.raises(TypeError, match=r"op 'toy_swap': compute= takes a Compute, got Effects"):
        OpDef("toy_swap", _same, compute=Effects(view=True))  # type: ignore[arg-type]


def test_the_checks_of_the_op_itself_stay():
    with pytest.raises(ValueError, match=r"op 'toy_both': a gradient rule and the not-differentiable mark"):
        OpDef("toy_both", _same, grad=lambda ctx: [None], not_differentiable=True)


def test_flat_keywords_still_work_with_a_deprecation_warning_naming_the_op_and_each_field():
    with pytest.warns(DeprecationWarning) as caught:
        op = OpDef("toy_flat", _same, not_differentiable=True, amp="gray", view=True, mutates=(0,),
                   dynamic_extent=True, name_prefix="Flat", input_names=("x",))  # opdef-codemod: keep
    assert len(caught) == 1
    message = str(caught[0].message)
    assert message.startswith("op 'toy_flat': OpDef's flat keywords are deprecated")
    for moved in ("amp= goes in compute=Compute(amp=...)", "view= goes in effects=Effects(view=...)",
                  "mutates= goes in effects=Effects(mutates=...)",
                  "dynamic_extent= goes in shape=ShapeTraits(dynamic_extent=...)",
                  "name_prefix= goes in legacy=LegacyFace(name_prefix=...)"):
        assert moved in message
    assert caught[0].filename == __file__  # the warning points at the record, not at opdef.py
    assert op.compute == Compute(amp="gray") and op.effects == Effects(view=True, mutates=(0,))
    assert op.shape == ShapeTraits(dynamic_extent=True)
    assert op.legacy == LegacyFace(name_prefix="Flat", input_names=("x",))


def test_flat_keywords_join_a_record_given_beside_them_and_one_given_twice_is_refused():
    with pytest.warns(DeprecationWarning, match="op 'toy_mixed'"):
        op = OpDef("toy_mixed", _same, compute=Compute(amp="white"), host_split=True)  # opdef-codemod: keep
    assert op.compute == Compute(amp="white", host_split=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        with pytest.raises(TypeError, match=r"op 'toy_twice': amp given both flat and in compute="):
            OpDef("toy_twice", _same, compute=Compute(amp="white"), amp="gray")  # opdef-codemod: keep
        with pytest.warns(DeprecationWarning):  # the flat checks still name the op
            with pytest.raises(ValueError, match=r"op 'toy_flat_bad': amp must be None or one of"):
                OpDef("toy_flat_bad", _same, amp="grey")  # opdef-codemod: keep


def test_reading_a_moved_field_says_where_it_lives_now():
    op = OpDef("toy_read", _same, effects=Effects(view=True))
    moved = r"OpDef.view is now OpDef.effects.view \(op 'toy_read'\)"  # opdef-codemod: keep
    with pytest.raises(AttributeError, match=moved):
        op.view  # noqa: B018  # opdef-codemod: keep
    with pytest.raises(AttributeError, match=r"'OpDef' object has no attribute 'nonsense'"):
        op.nonsense  # noqa: B018
    assert not hasattr(op, "amp") and op.effects.view
