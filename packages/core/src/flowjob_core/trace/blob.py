"""Symbolic blobs: what a job body computes with while it is traced."""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from flowjob_core.trace import eager_mode
from flowjob_core.errors import FlowjobError
from flowjob_core.ir import distribute as distributions
from flowjob_core.ir import layout as ir_layout
from flowjob_core.ir.job import BlobSpec
from flowjob_core.trace import scope
from flowjob_core.trace.parallel_conf import ParallelConf
from flowjob_core.trace.scope import Placement

if TYPE_CHECKING:
    from flowjob_core.trace.builder import JobBuilder


@dataclass(frozen=True)
class LogicalBlobId:
    """Legacy's ``blob.lbi``: the producing op's name and the blob's name within it."""

    op_name: str
    blob_name: str


class Blob:
    """A value of the job being traced: logical blob name, static shape and dtype, no data.

    It answers legacy's lazy blob attributes (``BlobDef``, ``ConsistentBlob``, ``LazyConsistentBlob``):
    ``lbi``, ``logical_blob_name``, ``unique_name`` (the name with its layout, ``"op/out:S0"``, ``":B"``,
    ``"|1"`` for boxing disabled), ``op_name``, ``blob_name``, ``job_name``, ``shape`` (= ``static_shape``),
    ``dtype``, ``batch_axis`` and ``has_batch_axis()``, ``split_axis``, ``distribute``, ``is_dynamic``,
    ``is_tensor_list``, ``disable_boxing``, ``parallel_conf``, ``parallel_size``, ``with_distribute`` and
    its split/broadcast/gradient forms, ``set_distribute``, ``with_boxing_disabled``, ``Clone()``,
    ``IdenticalTo``, and v0.4's ``get_lazy_shape_log_warning`` / ``get_mirror_shape_log_warning``. A blob is
    a plain object in a condition (``if bias:`` is true), as legacy's were; asking it for a value while the
    job is traced (``float(blob)``, ``blob.numpy()``) is an error. Refused, each naming itself:
    ``LazyMirroredBlob.sub_consistent_blob_list`` (one blob per device: a flowjob job traces one logical
    blob per value), and v0.4's plumbing ``get_dtype`` (a proto enum number; ``dtype`` is the dtype) and
    ``set_job_name`` (a blob belongs to the job that traced it).
    """

    __slots__ = ("lbn", "spec", "builder", "batch_axis", "device", "distribute", "dynamic", "placement",
                 "disable_boxing", "is_tensor_list", "__weakref__")

    def __init__(self, lbn: str, spec: BlobSpec, builder: "JobBuilder", batch_axis: int | None = 0,
                 device: str = "cpu", distribute: distributions.Distribute = distributions.AUTO,
                 dynamic: bool = False, placement: Placement | None = None, disable_boxing: bool | None = None,
                 is_tensor_list: bool = False) -> None:
        self.lbn = lbn
        self.spec = spec
        self.builder = builder
        self.batch_axis = batch_axis
        self.device = device
        self.distribute = distribute  # legacy's layout annotation (with_distribute); values never depend on it
        self.dynamic = dynamic
        self.placement = placement  # the flow.scope.placement its op was traced in; None: the job's default
        self.disable_boxing = disable_boxing  # legacy's with_boxing_disabled annotation: None unless set
        self.is_tensor_list = is_tensor_list  # a tp.ListListNumpy placeholder (legacy's tensor list)

    shape = property(lambda self: self.spec.shape)
    static_shape = property(lambda self: self.spec.shape)
    dtype = property(lambda self: self.spec.dtype)
    logical_blob_name = property(lambda self: self.lbn)
    op_name = property(lambda self: self.lbn.split("/", 1)[0])
    blob_name = property(lambda self: self.lbn.split("/", 1)[1])
    job_name = property(lambda self: self.builder.job.name)
    location = property(lambda self: self.device)

    @property
    def lbi(self) -> LogicalBlobId:
        return LogicalBlobId(self.op_name, self.blob_name)

    @property
    def unique_name(self) -> str:
        """Legacy's: the logical blob name, then ``:S<axis>`` or ``:B`` for a layout annotation and ``|0`` or
        ``|1`` for a boxing annotation."""
        layout = {"split": f":S{self.distribute.axis}", "broadcast": ":B"}.get(self.distribute.kind, "")
        boxing = "" if self.disable_boxing is None else ("|1" if self.disable_boxing else "|0")
        return self.lbn + layout + boxing

    @property
    def split_axis(self) -> int | None:
        """The axis the blob lies split along over its devices; None where each device holds it whole."""
        return distributions.split_axis_of(self.distribute, self.batch_axis)

    def has_batch_axis(self) -> bool:
        return self.batch_axis is not None

    @property
    def parallel_size(self) -> int:
        """How many devices the blob's placement spans (legacy's count of its parallel_conf's devices)."""
        placement = self.placement or self.builder.job.config.get("default_placement_scope")
        return placement.device_count if placement is not None else 1

    @property
    def sub_consistent_blob_list(self) -> list["Blob"]:
        raise FlowjobError(
            f"blob {self.lbn!r}: sub_consistent_blob_list (legacy's per-device blobs of a mirrored blob) does "
            f"not exist here: a flowjob job traces one logical blob per value; use the blob itself")

    def get_dtype(self) -> Any:  # legacy's name
        raise FlowjobError(f"blob {self.lbn!r}: get_dtype() (legacy v0.4's proto enum number behind dtype) is not "
                           f"provided; read blob.dtype")

    def set_job_name(self, job_name: str) -> None:  # legacy's name
        raise FlowjobError(f"blob {self.lbn!r}: set_job_name({job_name!r}) is refused: a blob belongs to the job "
                           f"that traced it ({self.job_name!r})")

    def set_distribute(self, distribute: distributions.Distribute) -> None:
        """Legacy v0.4's in-place form of ``with_distribute``: this handle's layout annotation."""
        self.distribute = distributions.checked_for(distribute, self.shape, f"blob {self.lbn!r}: set_distribute")

    def IdenticalTo(self, other: Any) -> bool:  # noqa: N802 - legacy's name
        """Whether ``other`` is a handle on the same value of the same job with the same layout annotation."""
        return (isinstance(other, Blob) and other.lbn == self.lbn and other.builder.job is self.builder.job
                and other.distribute == self.distribute)

    def _view(self) -> str:
        view = scope.current_view()
        if view is None:
            view = self.builder.job.config.get("default_logical_view")
        return str(getattr(view, "kind", "consistent"))

    def get_lazy_shape_log_warning(self) -> str:
        """Legacy v0.4's: a warning to print where a consistent blob's shape is read in the mirrored view."""
        if self._view() != "mirrored":
            return ""
        return ("WARNING:\nYou access a consistent blob shape in mirrored view, there may be problems,\n"
                "you should add 'x = flow.cast_to_current_logical_view(x)'.")

    def get_mirror_shape_log_warning(self) -> str:
        """Legacy v0.4's: a warning to print where a mirrored blob's shape is read in the consistent view."""
        if self._view() != "consistent":
            return ""
        return ("WARNING:\nYou access a mirrored blob shape in consistent view, there may be problems,\n"
                "you should add 'x = flow.cast_to_current_logical_view(x)'.")

    def _copy(self, **changes: Any) -> "Blob":
        fields = {name: getattr(self, name) for name in (
            "batch_axis", "device", "distribute", "dynamic", "placement", "disable_boxing", "is_tensor_list")}
        fields.update(changes)
        return Blob(self.lbn, self.spec, self.builder, **fields)

    def Clone(self) -> "Blob":  # noqa: N802 - legacy's name
        """Another handle on the same value, with the same annotations."""
        return self._copy()

    def with_boxing_disabled(self, val: bool = True) -> "Blob":
        """This value annotated as legacy's ``with_boxing_disabled``: no layout change before the ops reading
        it. The logical value is the same, so this handle computes as ``self``."""
        if not isinstance(val, bool):
            raise TypeError(f"blob {self.lbn!r}: with_boxing_disabled(val) needs a bool, got {val!r}")
        return self._copy(disable_boxing=val)

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
        return self._copy(distribute=checked)

    def _named(self) -> str:
        return f"job {self.builder.job.name!r}, op {self.lbn.split('/')[0]!r}, blob {self.lbn!r}"

    def with_split_distribute(self, axis: int) -> "Blob":
        return self.with_distribute(distributions.split(axis))

    def with_broadcast_distribute(self) -> "Blob":
        return self.with_distribute(distributions.broadcast())

    def with_gradient_distribute(self, distribute: distributions.Distribute) -> "Blob":
        """Legacy's ``parallel_cast(self, gradient_distribute=...)``: the gradient arriving at this value is given
        that layout (``Job.gradient_layouts``; on several ranks the boxing pass boxes the gradient to it before its
        readers, as ``with_distribute`` does for the value's readers); the value is ``self``."""
        checked = distributions.checked_for(distribute, self.shape, f"{self._named()}: with_gradient_distribute")
        layout = ir_layout.from_distribute(checked)
        if layout is not None:
            self.builder.job.gradient_layouts[self.lbn] = layout
        return self._copy()

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

    # no __bool__: a blob is a plain object in a condition, true, as legacy's lazy blobs were (``if bias:``
    # tests an optional argument); a value is asked for by float(), int(), index() and numpy()
    def _no_value(self, what: str) -> FlowjobError:
        if getattr(self.builder, "eager_value", None) is not None:
            return FlowjobError(f"blob {self.lbn!r}: {what} needs one element, the blob has shape {self.shape}")
        return FlowjobError(
            f"blob {self.lbn!r} of job {self.job_name!r} has no value while the job is traced ({what}); "
            f"return it or flow.watch it to see its data")

    def __float__(self) -> float:
        return float(self._scalar("float()"))

    def __int__(self) -> int:
        return int(self._scalar("int()"))

    def __index__(self) -> int:
        return int(self._scalar("index()"))

    def _scalar(self, what: str) -> Any:
        if getattr(self.builder, "eager_value", None) is None:
            raise self._no_value(what)
        value = self.numpy()
        if value.size != 1:
            raise self._no_value(what)
        return value.reshape(()).item()

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
