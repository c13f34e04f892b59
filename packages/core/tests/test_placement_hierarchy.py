"""``flow.scope.placement``'s third argument, legacy v0.4's parallel hierarchy: it must multiply out to the
devices named (``(machines, devices)`` over ``["0:0-1", "1:0-1"]``) and is refused, naming it, otherwise."""
import pytest

from flowjob_core.api.placement import placement


def test_a_hierarchy_that_covers_the_devices_is_accepted():
    assert placement("cpu", ["0:0-1", "1:0-1"], (2, 2)).device_count == 4
    assert placement("cpu", "0:0-3", [4]).machine_device_ids == ("0:0-3",)
    assert placement("cpu", "0:0", None).device_count == 1


@pytest.mark.parametrize("hierarchy, match", [
    ((2, 3), r"hierarchy \(2, 3\) holds 6 devices, machine_device_ids \['0:0-3'\] name 4"),
    ((), "tuple of positive ints"),
    ((4, 0), "tuple of positive ints"),
    ("4", "tuple of positive ints"),
    ((True, 4), "tuple of positive ints"),
])
def test_a_wrong_hierarchy_is_refused(hierarchy, match):
    with pytest.raises(ValueError, match=match):
        placement("cpu", "0:0-3", hierarchy)
