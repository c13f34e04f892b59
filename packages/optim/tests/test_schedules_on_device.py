"""Each learning-rate schedule's device form (``rate_on_device``: array operations on the counter's device array)
gives the host formula's float32 rate at every step, warmups included; a subclass that changes a formula without
its device form keeps the host evaluation; and the learning-rate kernel uses the device form only on a backend that
records its steps (the CPU backend evaluates the schedule on the host as before)."""
from __future__ import annotations

import numpy as np
import pytest

from flowjob_core import BlobSpec, KernelContext
from flowjob_core.ir.bindings import Bindings
from flowjob_core.ir.kernel import kernel_of
from flowjob_optim import schedules as s
from flowjob_optim.update_ops import LEARNING_RATE

SCHEDULES = [
    s.PiecewiseConstantScheduler([], [0.01]),
    s.PiecewiseConstantScheduler([3, 10, 40], [0.1, 0.05, 0.01, 0.001]),
    s.PiecewiseScalingScheduler(0.2, [5, 30], [0.5, 0.1], warmup=s.ConstantWarmup(4, 0.1)),
    s.CosineScheduler(0.1, 50, alpha=0.05, warmup=s.LinearWarmup(7, 0.2)),
    s.LinearCosineScheduler(0.1, 60, num_periods=1.5, alpha=0.1, beta=0.01),
    s.PolynomialScheduler(0.1, 30, end_learning_rate=0.001, power=2.0),
    s.PolynomialScheduler(0.1, 30, end_learning_rate=0.001, power=0.5, cycle=True),
    s.ExponentialScheduler(0.1, 10, 0.9), s.ExponentialScheduler(0.1, 10, 0.9, staircase=True),
    s.InverseTimeScheduler(0.1, 10, 0.5, staircase=True), s.NaturalExpScheduler(0.1, 10, 0.3),
]
STEPS = np.arange(0, 130, dtype=np.int64)


@pytest.mark.parametrize("schedule", SCHEDULES, ids=repr)
def test_the_device_form_gives_the_host_formulas_rate_at_every_step(schedule):
    assert schedule.has_device_form()
    on_device = schedule.rate_on_device(np, STEPS)
    assert on_device.dtype == np.float64 and on_device.shape == STEPS.shape
    host = np.array([schedule(int(step)) for step in STEPS])
    np.testing.assert_allclose(on_device, host, rtol=1e-12, atol=0)
    # stored as float32: equal there, or one float32 ulp apart where libm's and numpy's last bits differ
    np.testing.assert_array_max_ulp(on_device.astype(np.float32), host.astype(np.float32), maxulp=1)


def test_a_subclass_changing_a_formula_without_its_device_form_keeps_the_host_evaluation():
    class Halved(s.CosineScheduler):
        def decayed(self, step: int) -> float:
            return super().decayed(step) / 2

    class Jumping(s.LinearWarmup):
        def apply(self, base_lr: float, step: int) -> float:
            return base_lr

    class Floored(s.ExponentialScheduler):
        def ratio(self, step: int) -> float:
            return 0.0

    assert not Halved(0.1, 10).has_device_form()
    assert not s.CosineScheduler(0.1, 10, warmup=Jumping(3, 0.5)).has_device_form()
    assert not Floored(0.1, 10, 0.5).has_device_form()
    assert s.PolynomialSchduler.__mro__[1] is s.PolynomialScheduler


class _Backend:
    def __init__(self, records: bool) -> None:
        self.step_recorder = (lambda plan: plan.step) if records else None
        self.host_arrays = True


def _kernel(records: bool, schedule: s.LrScheduler):
    bindings = Bindings()
    key = bindings.add(schedule)
    ctx = KernelContext(np, _Backend(records), "optim_learning_rate", "lr", {"schedule": key},
                        (BlobSpec((1,), np.int64),), (BlobSpec((1,), np.float32),), "train", bindings=bindings)
    return LEARNING_RATE.kernel(ctx)


@pytest.mark.parametrize("records", [True, False])
def test_the_kernel_computes_on_the_device_only_where_the_backend_records_steps(records):
    schedule = s.CosineScheduler(0.1, 20, warmup=s.LinearWarmup(5, 0.1))
    run = _kernel(records, schedule)
    assert kernel_of(run).host_state is (False if records else None)
    for step in (0, 3, 5, 19, 25):
        assert run(np.array([step], np.int64))[0] == np.float32(schedule(step))
