"""Symbolic blobs: what a job body computes with while it is traced."""
from __future__ import annotations

import warnings
from typing import TYPE_CHECKING, Any

import numpy as np

from flowjob_core.trace import eager_mode
from flowjob_core.errors import FlowjobError
from flowjob_core.ir import distribute as distributions
from flowjob_core.ir import layout as ir_layout
from flowjob_core.ir.job import BlobSpec
from flowjob_core.trace.parallel_conf import ParallelConf
from flowjob_core.trace.scope import Placement

if TYPE_CHECKING:
    from flowjob_core.trace.builder import JobBuilder


class Blob:
    """A value of the job being traced: logical blob name, static shape and dtype, no data."""

    __slots__ = ("lbn", "spec", "builder", "batch_axis", "device", "distribute", "dynamic", "placement",
                 "__weakref__")

    def __init__(self, lbn: str, spec: BlobSpec, builder: "JobBuilder", batch_axis: int | None = 0,
                 device: str = "cpu", distribute: distributions.Distribute = distributions.AUTO,
                 dynamic: bool = False, placement: Placement | None = None) -> None:
        self.lbn = lbn
        self.spec = spec
        self.builder = builder
        self.batch_axis = batch_axis
        self.device = device
        self.distribute = distribute  # legacy's layout annotation (with_distribute); values never depend on it
        self.dynamic = dynamic
        self.placement = placement  # the flow.scope.placement its op was traced in; None: the job's default

    shape = property(lambda self: self.spec.shape)
    dtype = property(lambda self: self.spec.dtype)
    logical_blob_name = property(lambda self: self.lbn)
    unique_name = property(lambda self: self.lbn)
    op_name = property(lambda self: self.lbn.split("/", 1)[0])
    blob_name = property(lambda self: self.lbn.split("/", 1)[1])
    job_name = property(lambda self: self.builder.job.name)
    location = property(lambda self: self.device)

    @property
    def parallel_conf(self) -> ParallelConf:
        """Legacy's placement of the blob: its op's device tag and the devices of the placement it was traced
        in (else the job's ``default_placement_scope``, else device 0 of machine 0)."""
        placement = self.placement or self.builder.job.config.get("default_placement_scope")
        return ParallelConf(self.device, placement.machine_device_ids if placement is not None else ("0:0",))

    @property
    def is_dynamic(self) -> bool:
        """Legacy's dynamic blob: its shape is a maximum and each call's data decide the actual one (a
        mirrored placeholder, a data-dependent op's rows, and what is computed from them)."""
        return self.dynamic

    def with_distribute(self, distribute: distributions.Distribute) -> "Blob":
        """This value, annotated to lie over the devices as ``distribute`` says (legacy's layout hint for the
        ops reading it). The logical value is the same under every layout, so this handle computes as ``self``; the
        job records the layout (``Job.layouts``), which the boxing pass of a job on several ranks gives the value."""
        checked = distributions.checked_for(distribute, self.shape, f"{self._named()}: with_distribute")
        layout = ir_layout.from_distribute(checked)
        if layout is not None:
            self.builder.job.layouts[self.lbn] = layout
        return Blob(self.lbn, self.spec, self.builder, self.batch_axis, self.device, checked, self.dynamic,
                    self.placement)

    def _named(self) -> str:
        return f"job {self.builder.job.name!r}, op {self.lbn.split('/')[0]!r}, blob {self.lbn!r}"

    def with_split_distribute(self, axis: int) -> "Blob":
        return self.with_distribute(distributions.split(axis))

    def with_broadcast_distribute(self) -> "Blob":
        return self.with_distribute(distributions.broadcast())

    def with_gradient_distribute(self, distribute: distributions.Distribute) -> "Blob":
        """Legacy's ``parallel_cast(self, gradient_distribute=...)``: the gradient's layout; the value is ``self``.
        On several ranks the boxing pass lays out every gradient itself (the values are the same): a warning says
        the annotation is not followed."""
        checked = distributions.checked_for(distribute, self.shape, f"{self._named()}: with_gradient_distribute")
        # the world's plugin answers directly: the tracer sits below runtime.world (no world answers: one process)
        world = self.builder.session.pm.hook.flowjob_world()
        if world is not None and world.size > 1:
            warnings.warn(f"{self._named()}: with_gradient_distribute({checked!r}) is not followed on several ranks: "
                          f"the boxing pass lays out the gradient (its values are the same)", stacklevel=2)
        return Blob(self.lbn, self.spec, self.builder, self.batch_axis, self.device, self.distribute, self.dynamic,
                    self.placement)

    def __repr__(self) -> str:
        return f"Blob(lbn={self.lbn!r}, shape={self.shape}, dtype={self.dtype})"

    def _operator(self, dunder: str, *args: Any) -> Any:
        fn = self.builder.registries.ops.operators.get(dunder)
        if fn is None:
            # the operators come from op packages (flowjob-ops registers + - * / @ [] and comparisons)
            raise FlowjobError(
                f"operator {dunder} on blob {self.lbn!r}: no installed op package provides it "
                f"(installed plugins register operators through flowjob_add_ops)")
        return fn(self, *args)

    def __bool__(self) -> bool:
        raise FlowjobError(
            f"blob {self.lbn!r} has no value while the job is traced; use flow.watch or return it to see data")

    def numpy(self, rank: int | None = None) -> np.ndarray:
        """The blob's value, a host copy: in eager mode (``flow.enable_eager_execution(True)``) only, as
        legacy's eager blobs (``rank``: legacy's, one process here, so None or 0)."""
        if rank not in (None, 0):
            raise FlowjobError(f"blob {self.lbn!r}: numpy(rank={rank!r}): this process holds rank 0 only")
        value_of = getattr(self.builder, "eager_value", None)
        if value_of is None:
            if eager_mode.enabled():  # traced, not run: something wants the job's variables before its first call
                raise FlowjobError(
                    f"blob {self.lbn!r} of job {self.job_name!r} has no value: the job is being traced without "
                    f"running (CheckPoint init/save/load and flow.get_all_variables trace every defined job to "
                    f"find its variables); in eager mode, call the job once before them")
            raise FlowjobError(
                f"blob {self.lbn!r} of job {self.job_name!r} has no value while the job is traced (lazy mode); "
                f"return it, flow.watch it, or call flow.enable_eager_execution(True) before the job")
        return value_of(self)

    def __array__(self, *args: Any, **kwargs: Any) -> np.ndarray:
        if getattr(self.builder, "eager_value", None) is not None:  # eager mode: blobs hold values
            return np.asarray(self.numpy(), *args, **kwargs)
        raise FlowjobError(
            f"blob {self.lbn!r} is symbolic inside a global function (lazy mode); return it or flow.watch it")

    # identity, as for any object: blobs stay usable as dict keys and set members (gradient maps)
    # although ``==`` builds a comparison node instead of answering True or False
    __hash__ = object.__hash__


def _make_operator(dunder: str) -> Any:
    def method(self: Blob, *args: Any) -> Any:
        return self._operator(dunder, *args)

    method.__name__ = dunder
    return method


for _dunder in ("__add__", "__radd__", "__sub__", "__rsub__", "__mul__", "__rmul__", "__truediv__",
                "__rtruediv__", "__neg__", "__pow__", "__rpow__", "__mod__", "__rmod__", "__matmul__",
                "__rmatmul__", "__getitem__",
                "__lt__", "__le__", "__gt__", "__ge__", "__eq__", "__ne__"):
    setattr(Blob, _dunder, _make_operator(_dunder))
del _dunder
