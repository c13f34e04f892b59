"""Tracing: the job-build context that turns op calls on symbolic blobs into IR nodes."""
from __future__ import annotations

import contextlib
import contextvars
import dataclasses
import os
import sys
from types import FrameType
from typing import TYPE_CHECKING, Any, Iterator, Sequence

from flowjob_core.ir import naming
from flowjob_core.trace import scope
from flowjob_core.ir.bindings import Bindings
from flowjob_core.trace.blob import Blob
from flowjob_core.errors import FlowjobError, OpBuildError, OutsideJobError, VariableError
from flowjob_core.ir.job import BlobSpec, Intent, Job, Node, Placeholder, VariableDef

if TYPE_CHECKING:
    from flowjob_core.plugins.registry import Registries
    from flowjob_core.runtime.session import Session

_current: contextvars.ContextVar["JobBuilder | None"] = contextvars.ContextVar("flowjob_job_builder", default=None)

_OWN_PACKAGES = ("flowjob_", "oneflow", "pluggy", "contextlib", "importlib", "_pytest", "pytest")
_OWN_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def user_source(skip: int = 1) -> str:
    """``file:line`` of the innermost caller that is not flowjob itself: the user's line."""
    frame: FrameType | None = sys._getframe(skip)
    while frame is not None:
        module = frame.f_globals.get("__name__", "")
        if not module.startswith(_OWN_PACKAGES):
            return f"{frame.f_code.co_filename}:{frame.f_lineno}"
        frame = frame.f_back
    return "<unknown>"


def current_builder(what: str = "this call") -> "JobBuilder":
    """The builder of the job being traced; outside a global function body this is an error."""
    builder = _current.get()
    if builder is None:
        raise OutsideJobError(f"{what} is only valid inside a @flow.global_function body while it is traced")
    return builder


def maybe_builder() -> "JobBuilder | None":
    return _current.get()


class JobBuilder:
    """Appends nodes to one job, running each op's inference at once."""

    def __init__(self, job: Job, session: "Session", default_device: str = "cpu",
                 bindings: Bindings | None = None) -> None:
        self.job = job
        # objects the job names by key (watch handlers, sinks): the global function's table when tracing
        self.bindings = bindings if bindings is not None else Bindings()
        self.session = session
        self.registries: "Registries" = session.registries
        self.default_device = default_device
        self._variable_blobs: dict[str, Blob] = {}
        self._names: set[str] = {n.name for n in job.nodes}
        self._local_ids: dict[str, int] = {}
        # flow.find_or_create_module's modules of this job, by name (legacy kept them per job)
        self.modules: dict[str, Any] = {}
        # the placement of nodes added outside any placement scope (autodiff: the forward node's)
        self._placed: tuple[str, ...] = ()

    @contextlib.contextmanager
    def activate(self) -> Iterator["JobBuilder"]:
        token = _current.set(self)
        try:
            yield self
        finally:
            _current.reset(token)

    @contextlib.contextmanager
    def placed(self, machine_device_ids: tuple[str, ...]) -> Iterator[None]:
        """Nodes added inside, outside any ``flow.scope.placement``, record ``machine_device_ids`` as their
        placement (autodiff places a gradient node where its forward node is)."""
        before, self._placed = self._placed, tuple(machine_device_ids)
        try:
            yield
        finally:
            self._placed = before

    # naming ---------------------------------------------------------------
    def _device(self) -> str:
        placement = scope.current_placement()
        return placement.device_tag if placement is not None else self.default_device

    def op_name(self, name: str | None, prefix: str) -> str:
        """An explicit ``name`` (namespaced), or ``prefix_<process-wide id>`` as legacy did."""
        base = name if name is not None else naming.unique_name(prefix)
        if not isinstance(base, str) or not base:
            raise OpBuildError(f"job {self.job.name!r}: op name must be a non-empty string, got {name!r}")
        return scope.scoped_name(base)

    def local_name(self, stem: str) -> str:
        """A job-local name for nodes added by passes (gradients, updates): no process-wide id consumed."""
        count = self._local_ids.get(stem, 0)
        self._local_ids[stem] = count + 1
        return f"{stem}_{count}" if count else stem

    # building -------------------------------------------------------------
    def add_op(self, op_type: str, inputs: Sequence[Blob], attrs: dict[str, Any] | None = None, *,
               name: str | None = None, scoped_name: str | None = None, source: str | None = None,
               device: str | None = None) -> tuple[Blob, ...]:
        """Append one node of ``op_type``; its inference runs now, errors name the op and the user's line."""
        ops = self.registries.ops
        attrs = dict(attrs or {})
        where = source or user_source(2)
        try:
            opdef = ops[op_type]
        except FlowjobError as exc:
            raise OpBuildError(f"job {self.job.name!r} at {where}: {exc}") from None
        node_name = scoped_name if scoped_name is not None else self.op_name(name, opdef.legacy.name_prefix)
        for i, blob in enumerate(inputs):
            if not isinstance(blob, Blob):
                raise OpBuildError(
                    f"job {self.job.name!r}, op {node_name!r} ({op_type}) at {where}: input {i} is "
                    f"{type(blob).__name__}, expected a blob of this job")
            if blob.builder.job is not self.job:
                raise OpBuildError(
                    f"job {self.job.name!r}, op {node_name!r} ({op_type}) at {where}: input {i} "
                    f"{blob.lbn!r} belongs to job {blob.builder.job.name!r}")
        if node_name in self._names:
            raise OpBuildError(f"job {self.job.name!r} at {where}: op name {node_name!r} is already used in this job")
        placement = scope.current_placement()
        if opdef.shape.parallel_num_attr is not None:
            attrs[opdef.shape.parallel_num_attr] = placement.device_count if placement is not None else 1
        in_specs = tuple(b.spec for b in inputs)
        try:
            out_specs = tuple(opdef.infer(in_specs, attrs))
        except (ValueError, TypeError, IndexError) as exc:
            shapes = ", ".join(f"{b.lbn} {b.shape} {b.dtype}" for b in inputs)
            raise OpBuildError(
                f"job {self.job.name!r}, op {node_name!r} ({op_type}) at {where}: {exc} [inputs: {shapes or 'none'}]"
            ) from None
        outputs = tuple(f"{node_name}/{out}" for out in opdef.out_names(len(out_specs)))
        dev = device or ("cpu" if opdef.effects.cpu_only else self._device())
        placed = placement.machine_device_ids if placement is not None else self._placed
        node = Node(op_type, node_name, tuple(b.lbn for b in inputs), outputs, attrs, dev, where,
                    scope.current_attributes(), placed)
        self._names.add(node_name)
        self.job.nodes.append(node)
        batch_axis = inputs[0].batch_axis if inputs else None
        dynamic = opdef.shape.dynamic_extent or any(b.dynamic for b in inputs)  # legacy's is_dynamic follows the data
        blobs = []
        for lbn, spec in zip(outputs, out_specs):
            self.job.specs[lbn] = spec
            blobs.append(Blob(lbn, spec, self, batch_axis if spec.shape else None, dev, dynamic=dynamic,
                              placement=placement))
        for observer in scope.current_observers():
            for blob in blobs:
                observer(blob)
        return tuple(blobs)

    def add_placeholder(self, spec: BlobSpec, *, param: str, batch_axis: int | None = 0,
                        name: str | None = None, dynamic: bool = False) -> Blob:
        """``dynamic``: a mirrored parameter's placeholder, whose declared shape is a maximum."""
        node_name = name or naming.unique_name("Input")
        attrs = {"shape": spec.shape, "dtype": spec.dtype, "index": len(self.job.placeholders)}
        (blob,) = self.add_op("input", [], attrs, scoped_name=node_name, source=f"parameter {param!r}")
        blob.batch_axis = batch_axis
        blob.dynamic = dynamic
        self.job.placeholders.append(Placeholder(node_name, blob.lbn, spec, batch_axis, param))
        return blob

    def add_variable(self, name: str, spec: BlobSpec, initializer: Any = None, trainable: bool = True,
                     reuse: bool = True, regularizer: Any = None, model_name: str | None = None,
                     layout: Any = None, shard: Any = None) -> Blob:
        """The variable ``name`` (namespaced already): one per session, shared by every job using the name.

        ``layout`` (``flowjob_core.ir.layout``): how it lies over the ranks; ``shard``: the piece of it this rank
        holds when it is split over several (the session then holds only that). A variable keeps the layout it
        was first declared with."""
        known = self._variable_blobs.get(name)
        if known is not None:
            if not reuse:
                raise VariableError(f"job {self.job.name!r}: variable {name!r} already exists in this job")
            self._check_same(name, self.job.variables[name].spec, spec)
            self._check_layout(name, self.session.variables[name].layout, layout)
            return known
        stored = self.session.variables.declare(name, spec, initializer, trainable, regularizer, model_name,
                                                layout, shard)
        if spec != stored.local_spec:  # a split variable's slot is asked for in its shard's shape
            self._check_same(name, stored.spec, spec)
        self._check_layout(name, stored.layout, layout)
        # trainable is this job's own word, as in legacy (each job's variable op had its flag): a predict job
        # declaring the variable first with trainable=False must not freeze it for a later train job
        penalty = self.bindings.add(stored.regularizer) if stored.regularizer is not None else None
        vdef = VariableDef(name, spec, describe_initializer(stored.initializer), trainable,
                           f"{name}/out", penalty, stored.model_name)
        self.job.variables[name] = vdef
        (blob,) = self.add_op("variable", [], {"name": name, "shape": spec.shape, "dtype": spec.dtype},
                              scoped_name=name, source=user_source(2))
        blob.batch_axis = None
        if stored.layout is not None:
            self.job.layouts[blob.lbn] = stored.layout
        self._variable_blobs[name] = blob
        return blob

    def _check_layout(self, name: str, have: Any, want: Any) -> None:
        if want is not None and have != want:
            raise VariableError(f"job {self.job.name!r}: variable {name!r} exists with layout {have or 'auto'}, "
                                f"requested {want}")

    def _check_same(self, name: str, have: BlobSpec, want: BlobSpec) -> None:
        if have != want:
            raise VariableError(
                f"job {self.job.name!r}: variable {name!r} exists with shape {have.shape} {have.dtype}, "
                f"requested {want.shape} {want.dtype}")

    def add_intent(self, kind: str, **payload: Any) -> Intent:
        intent = Intent(kind, payload, user_source(2))
        self.job.intents.append(intent)
        return intent

    def request_grad(self, blob: Blob) -> None:
        """Ask the autodiff pass for the raw gradient of ``blob`` (watch_diff builds on this)."""
        if blob.lbn not in self.job.grad_targets:
            self.job.grad_targets.append(blob.lbn)

    def blob(self, lbn: str) -> Blob:
        """A blob handle for an existing value of this job (passes use it to extend the graph)."""
        spec = self.job.specs[lbn]
        return Blob(lbn, spec, self, None, self.default_device)


def describe_initializer(initializer: Any) -> str:
    """A variable's initializer as the job records it: text, so the job holds no user callable."""
    if initializer is None:
        return "zeros"
    if dataclasses.is_dataclass(initializer):
        return repr(initializer)  # flow's initializers are dataclasses: the repr names their parameters
    return getattr(initializer, "__qualname__", None) or type(initializer).__name__  # a function, a callable


def apply(op_type: str, inputs: Sequence[Blob], attrs: dict[str, Any] | None = None, *,
          name: str | None = None) -> Any:
    """Add an op to the job being traced; returns its blob, or a tuple for several outputs.

    This is what an op package's public functions call, e.g. ``apply("relu", [x], name=name)``.
    """
    builder = _first_builder(inputs) or current_builder(f"op {op_type!r}")
    outs = builder.add_op(op_type, inputs, attrs, name=name, source=user_source(2))
    return outs[0] if len(outs) == 1 else outs


def _first_builder(inputs: Sequence[Any]) -> "JobBuilder | None":
    for blob in inputs:
        if isinstance(blob, Blob):
            return blob.builder
    return None
