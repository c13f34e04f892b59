"""Op case of ``assign`` (a variable overwritten in place; nothing to compare but the kernel contract).
op_cases.py appends ``CASES`` to its table."""
from __future__ import annotations

from typing import Any

import numpy as np

from flowjob_core.testing import OpCase
from flowjob_core.testing.modules import sibling

base = sibling(__file__, "op_cases")
Draw = Any
Case = tuple[list[np.ndarray], dict]


_shape, _array = base._shape, base._array


def assign_case(draw: Draw) -> Case:
    shape = _shape(draw)
    return [_array(draw, shape), _array(draw, shape)], {}


CASES = [
    OpCase("assign", assign_case, reference=lambda ref, value: (), wrt=()),
]
