"""``flow.global_function``: define a job, trace it on its first call, run it on every call."""
from __future__ import annotations

import contextlib
import copy
import functools
import inspect
import sys
import threading
import warnings
from typing import Any, Callable

from flowjob_core.api import dry_run
from flowjob_core.plan import dynamic
from flowjob_core.api import eager
from flowjob_core.trace import eager_mode
from flowjob_core.ir import naming
from flowjob_core.plan import numerics
from flowjob_core.ir.bindings import Bindings
from flowjob_core.config.function_config import FunctionConfig
from flowjob_core.errors import (
    FlowjobError, JobArgumentError, JobDefinitionError, MissingPackageError)
from flowjob_core.plan.mirrored import PerDevice, run_per_device
from flowjob_core.ir.job import BlobSpec, Job
from flowjob_core.passes.pipeline import PassContext, run_passes
from flowjob_core.plan.planner import Plan, build_plan
from flowjob_core.runtime.session import Session, get_default_session
from flowjob_core.trace.builder import JobBuilder
from flowjob_core.runtime.world import world_of

JOB_TYPES = ("predict", "train")


class _Param:
    __slots__ = ("name", "kind", "specs")

    def __init__(self, name: str, kind: Any) -> None:
        self.name = name
        self.kind = kind
        self.specs = list(kind.input_specs())


class JobFunction:
    """A decorated job function. Calling it feeds the inputs and runs one step."""

    def __init__(self, func: Callable[..., Any], job_type: str, config: FunctionConfig | None,
                 session: Session, scope_locals: dict[str, Any] | None = None) -> None:
        self.func = func
        self.name = func.__name__
        self.type = job_type
        self.config = copy.deepcopy(config) if config is not None else FunctionConfig()
        self.session = session
        self._trace_lock = threading.Lock()
        self._job: Job | None = None
        self._plan: Plan | None = None
        # the Python objects the job names by key (watch handlers and sinks, step consumers): the job is data
        self.bindings = Bindings()
        self.params, self.return_kind = self._read_signature(scope_locals)
        self._where = f"global function {self.name!r}"
        self._feed_where = [f"global function {self.name!r}, argument {p.name!r}" for p in self.params]
        # (plan, deliver) for calls without side outputs
        self._deliver_plain: tuple[Any, Callable[[Any], list[Any]] | None] = (None, None)
        self._dynamic: dynamic.DynamicRunner | None = None  # the step of calls with mirrored arguments
        functools.update_wrapper(self, func)
        # a job replaced by one of the same name stays defined: checkpoints still cover its variables; a
        # warning when the source differs (a factory re-making its job from the same lines is deliberate)
        self.replaced: JobFunction | None = session.functions.get(self.name)
        if self.replaced is not None and _defined_at(self.replaced.func) != _defined_at(func):
            warnings.warn(f"global function {self.name!r} is defined again: calls by name and `python -m oneflow "
                          f"dump` see the new one; CheckPoint init/save/load cover the variables of both",
                          stacklevel=3)
        self.declared = False  # its passes ran once: its variables (optimizer slots too) are in the session
        if self.replaced is not None:
            # a program re-making its job every step (legacy's eager example) must not keep every job: the
            # replaced one gives up its plan, and earlier ones whose variables are declared leave the chain
            self.replaced.release_plan()
            self.replaced.replaced = _undeclared(self.replaced.replaced)
        session.register_function(self)
        recording = dry_run.active()
        if recording is not None:  # python -m oneflow dump: list the jobs a program defines
            recording.functions.append(self)

    # definition -----------------------------------------------------------
    def _read_signature(self, scope_locals: dict[str, Any] | None) -> tuple[list[_Param], Any]:
        kinds = self.session.registries.result_kinds
        if not kinds.param_matchers and not kinds.return_matchers:
            raise MissingPackageError(
                f"global function {self.name!r}: no result kinds are registered; "
                f"pip install flowjob-typing (or the flowjob distribution)")
        try:
            # string annotations (from __future__ import annotations) may name the decorating scope's locals
            sig = inspect.signature(self.func, eval_str=True, locals=scope_locals)
        except (NameError, TypeError) as exc:
            raise JobDefinitionError(f"global function {self.name!r}: cannot read its signature: {exc}") from None
        params = []
        for p in sig.parameters.values():
            where = f"global function {self.name!r}, parameter {p.name!r}"
            if p.kind not in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD):
                raise JobDefinitionError(f"{where}: *args, **kwargs and keyword-only parameters are not supported")
            if p.annotation is not p.empty:
                kind = _matched(kinds.param_kind, p.annotation, where)
                if kind is None:
                    raise JobDefinitionError(
                        f"{where}: invalid parameter annotation {p.annotation!r}; expected "
                        f"tp.Numpy.Placeholder(shape, dtype), tp.ListNumpy.Placeholder(...), "
                        f"tp.ListListNumpy.Placeholder(...) or a typing.Tuple of them")
            elif p.default is not p.empty:
                kind = kinds.default_kind(p.default)
                if kind is None:
                    raise JobDefinitionError(
                        f"{where}: default {p.default!r} is not an input definition; write "
                        f"'{p.name}: tp.Numpy.Placeholder(shape)' (note the colon) or "
                        f"'{p.name}=flow.FixedTensorDef(shape)'")
            else:
                raise JobDefinitionError(
                    f"{where} has no annotation: write '{p.name}: tp.Numpy.Placeholder(shape, dtype=...)'")
            params.append(_Param(p.name, kind))
        ret = _matched(kinds.return_kind, sig.return_annotation, f"global function {self.name!r}, return annotation")
        if ret is None:
            raise JobDefinitionError(
                f"global function {self.name!r}: invalid return annotation {sig.return_annotation!r}; "
                f"expected None, tp.Numpy, tp.ListNumpy, tp.ListListNumpy, typing.Tuple/List/Dict of them, "
                f"tp.Bundle[...] or tp.Callback[...]")
        return params, ret

    # tracing and planning -------------------------------------------------
    def ensure_traced(self) -> Job:
        with self._trace_lock:
            if self._job is None:
                self._job = self._trace()
            return self._job

    def _trace(self) -> Job:
        session = self.session
        job = Job(self.name, self.type, config=self.config.snapshot())
        placement = self.config.get("default_placement_scope")
        default_device = placement.device_tag if placement is not None else session.backend.tag
        builder = JobBuilder(job, session, default_device, self.bindings)
        self.trace_body(builder, placement)
        for device_tag in sorted({n.device for n in job.nodes}):  # tags the session does not run on warn once
            session.note_device_request(device_tag)
        session.pm.hook.flowjob_job_traced(job=job)
        return job

    def trace_body(self, builder: JobBuilder, placement: Any) -> None:
        """Run the body once on ``builder``'s job: placeholders, the body's ops, the return nodes (eager
        mode's builder runs each node as it is added)."""
        job = builder.job
        with builder.activate(), (placement if placement is not None else contextlib.nullcontext()):
            args = []
            for param in self.params:
                dynamic = bool(getattr(param.kind, "dynamic", False))  # ParamKind.dynamic: mirrored parameters
                blobs = [builder.add_placeholder(BlobSpec(s.shape, s.dtype), param=param.name, batch_axis=s.batch_axis,
                                                 name=s.name, dynamic=dynamic)
                         for s in param.specs]
                for blob in blobs:  # ParamKind.tensor_list: legacy's tensor-list placeholders (tp.ListListNumpy)
                    blob.is_tensor_list = bool(getattr(param.kind, "tensor_list", False))
                args.append(param.kind.build(blobs))
            value = self.func(*args)
            fetched = self.return_kind.flatten(value, f"global function {self.name!r}")
            for blob in fetched:
                (ret,) = builder.add_op("return", [blob], scoped_name=naming.unique_name("Return"),
                                        source=f"return of {self.name!r}")
                job.returns.append(ret.lbn)

    def plan(self) -> Plan:
        if self._plan is None:
            job = self.ensure_traced()
            with self._trace_lock:
                if self._plan is None:
                    plan = self._planned(job)
                    self.declared = True
                    self._plan = plan
        return self._plan

    def plan_for_shapes(self, shapes: tuple) -> Plan:
        """A train job's plan for other fed shapes (one per placeholder, smaller than declared): the traced job
        inferred again for them and run through every pass, so its gradients and loss scale are those of the
        fed shapes (``flowjob_core.plan.dynamic``, which caches it per shape)."""
        job = dynamic.retraced(self.ensure_traced(), shapes, self.session.registries)
        with self._trace_lock:
            return self._planned(job)

    def _planned(self, job: Job) -> Plan:
        session = self.session
        final = run_passes(job, PassContext(session, session.registries, session.backend, self.bindings))
        with numerics.planning(numerics.wanted(session.config, self.config),
                               outputs_every_call=bool(getattr(session.config, "debug_mode", False))):
            plan = build_plan(final, session.backend, session.registries, session.variables, self.bindings)
        session.pm.hook.flowjob_plan_built(job=final, plan=plan)
        return plan

    def release_plan(self) -> None:
        """Drop the plan and cached steps (their buffers); the next call plans again. Steps in flight keep
        what they hold."""
        with self._trace_lock:
            self._plan = None
            self._deliver_plain = (None, None)
            self._dynamic = None

    # calling --------------------------------------------------------------
    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if dry_run.active() is not None:
            raise dry_run.JobCalled(self.name)  # the program stops before its first step
        session = self.session
        if session.closed:
            raise FlowjobError(f"global function {self.name!r} belongs to a closed session "
                               f"(flow.clear_default_session() was called); define it again")
        if kwargs:
            raise JobArgumentError(f"global function {self.name!r} takes positional arguments only, "
                                   f"got keyword arguments {sorted(kwargs)}")
        if len(args) != len(self.params):
            raise JobArgumentError(f"global function {self.name!r} takes {len(self.params)} argument(s) "
                                   f"({', '.join(p.name for p in self.params)}), got {len(args)}")
        feeds: list[Any] = []
        mirrored = False
        for param, arg, where in zip(self.params, args, self._feed_where):
            got = param.kind.feed(arg, where)
            for f in got:
                if type(f) is PerDevice:
                    mirrored = True
            feeds.extend(got)
        if eager_mode.enabled():  # flow.enable_eager_execution(True): the body runs op by op (flowjob_core.api.eager)
            return eager.call(self, feeds)
        plan = self._plan
        if plan is None:
            plan = self.plan()
        backend = plan.backend
        if not mirrored and backend.host_arrays:
            return self._call_simple(plan, feeds)
        devices = self._devices(feeds) if mirrored else 1
        if mirrored and devices == 1:
            feeds = [f[0] if type(f) is PerDevice else f for f in feeds]
        if not backend.host_arrays:
            feeds = list(map(dynamic.deep(backend.from_host), feeds))
        # mirrored placeholders are dynamic (smaller feeds, tensor lists): flowjob_core.plan.dynamic picks the step
        run = self._dynamic_runner(plan) if mirrored else plan.run
        # host arrays need no transfer; other backends move every array of PerDevice / TensorList values
        to_host = backend.to_host if backend.host_arrays else dynamic.deep(backend.to_host)
        consumers = plan.side_consumers
        report = session.executor.report  # notes which call the error came from

        if devices == 1:
            def compute() -> Any:
                return run(feeds)
        else:
            # mirrored: the body was traced for one device's slice; run it once per slice and merge.
            # A train step's variables start equal on every device and end as their mean.
            updated = list(plan.job.variables) if plan.job.type == "train" else []
            store = session.variables if updated else None

            def compute() -> Any:
                return run_per_device(run, feeds, devices, store, updated)

        if mirrored:  # several ranks: every rank's devices' pieces, as legacy's master got them
            compute = _gathered_over_ranks(compute, world_of(session), to_host)

        def deliver(raw: Any) -> list[Any]:
            returns, sides = raw
            for consume, value in zip(consumers, sides):
                try:
                    consume(to_host(value))
                except BaseException as exc:  # kept for the next synchronous point
                    report(exc)
            return [to_host(v) for v in returns]

        kind = self.return_kind
        pending = session.executor.submit(compute, deliver, wait=kind.waits, what=self._where)
        return kind.launch(pending, f"global function {self.name!r}")

    def _call_simple(self, plan: Plan, feeds: list[Any]) -> Any:
        """One device, host arrays (the common case): the same steps as ``__call__`` with less set-up."""
        run = plan.run
        consumers = plan.side_consumers
        session = self.session

        def compute() -> Any:
            return run(feeds)

        deliver: Callable[[Any], list[Any]]
        if consumers:
            to_host, report = plan.backend.to_host, session.executor.report

            def deliver_with_sides(raw: Any) -> list[Any]:
                returns, sides = raw
                for consume, value in zip(consumers, sides):
                    try:
                        consume(to_host(value))
                    except BaseException as exc:  # kept for the next synchronous point
                        report(exc)
                return [to_host(v) for v in returns]

            deliver = deliver_with_sides
        else:
            cached_plan, cached = self._deliver_plain
            if cached_plan is plan and cached is not None:
                deliver = cached
            else:
                deliver = _returns_only(plan.backend.to_host)
                self._deliver_plain = (plan, deliver)

        kind = self.return_kind
        return kind.launch(session.executor.submit(compute, deliver, wait=kind.waits, what=self._where),
                           self._where)

    def _dynamic_runner(self, plan: Plan) -> Callable[[list[Any]], Any]:
        runner = self._dynamic
        if runner is None or runner.plan is not plan:
            replan = self.plan_for_shapes if plan.job.type == "train" else None
            runner = self._dynamic = dynamic.DynamicRunner(plan, self.session.registries, self.session.variables,
                                                           self.bindings, replan)
        return runner.run

    def _devices(self, feeds: list[Any]) -> int:
        """Devices of a mirrored call (flow.config.gpu_device_num, else cpu_device_num); each
        per-device argument must hold one array per device."""
        cfg = self.session.config
        devices = cfg.gpu_device_num or cfg.cpu_device_num or 1
        i = 0
        for param in self.params:
            for f in feeds[i:i + len(param.specs)]:
                if type(f) is PerDevice and len(f) != devices:
                    raise JobArgumentError(
                        f"global function {self.name!r}, argument {param.name!r}: expected a list of {devices} "
                        f"array(s), one per device (flow.config.gpu_device_num/cpu_device_num), found {len(f)}")
            i += len(param.specs)
        return devices

    def __repr__(self) -> str:
        return f"<global function {self.name} ({self.type})>"


def _undeclared(chain: "JobFunction | None") -> "JobFunction | None":
    """The replaced jobs of a chain whose variables are not declared yet (never passed through the passes),
    linked in the same order; CheckPoint init/save/load must still trace those."""
    kept: list[JobFunction] = []
    while chain is not None:
        if not chain.declared:
            kept.append(chain)
        chain = chain.replaced
    for job, earlier in zip(kept, kept[1:] + [None]):
        job.replaced = earlier
    return kept[0] if kept else None


def _defined_at(func: Callable[..., Any]) -> tuple[str, int] | None:
    """Where a function's source is: a job re-made by a factory (same lines) is no redefinition."""
    code = getattr(func, "__code__", None)
    return (code.co_filename, code.co_firstlineno) if code is not None else None


def _gathered_over_ranks(compute: Callable[[], Any], world: Any, to_host: Callable[[Any], Any]) -> Callable[[], Any]:
    """A mirrored step whose results and watched values hold every rank's device pieces, rank-major (rank 0's
    devices, then rank 1's, ...) on every rank; in a world of one, the step itself."""
    if world.size == 1:
        return compute

    def gathered() -> Any:
        returns, sides = compute()
        mine = [list(to_host(v)) if type(v) is PerDevice else [to_host(v)] for v in (*returns, *sides)]
        ranks = world.allgather(mine)  # every rank calls it once per step, in step order: the calls match
        merged = [PerDevice(piece for rank in ranks for piece in rank[i]) for i in range(len(mine))]
        return tuple(merged[:len(returns)]), tuple(merged[len(returns):])

    return gathered


def _returns_only(to_host: Callable[[Any], Any]) -> Callable[[Any], list[Any]]:
    def deliver(raw: Any) -> list[Any]:
        return [to_host(v) for v in raw[0]]

    return deliver


def _matched(lookup: Callable[[Any], Any], annotation: Any, where: str) -> Any:
    """A result-kind lookup whose own complaint (a bad nested annotation) names the function and position."""
    try:
        return lookup(annotation)
    except (JobDefinitionError, TypeError, ValueError) as exc:
        raise JobDefinitionError(f"{where}: {exc}") from None


def _caller_locals(frame: Any) -> dict[str, Any] | None:
    return frame.f_locals if frame.f_code.co_name != "<module>" else None


def global_function(type: Any = "predict", function_config: FunctionConfig | None = None) -> Any:  # noqa: A002
    """Decorate a job function: ``@flow.global_function(type="train", function_config=cfg)``.

    The legacy forms ``@flow.global_function(cfg)`` (a config as first argument; training
    when ``cfg.train.*`` was set) and a bare ``@flow.global_function`` also work.
    """
    if callable(type) and not isinstance(type, FunctionConfig):
        return JobFunction(type, "predict", None, get_default_session(), _caller_locals(sys._getframe(1)))
    if isinstance(type, FunctionConfig):
        function_config, type = type, ("train" if type.train.is_set else "predict")
    if type not in JOB_TYPES:
        raise JobDefinitionError(f"global_function: type must be 'predict' or 'train', got {type!r}")
    if function_config is not None and not isinstance(function_config, FunctionConfig):
        raise JobDefinitionError(f"global_function: function_config must come from flow.function_config(), "
                                 f"got {function_config!r}")

    def decorate(func: Callable[..., Any]) -> JobFunction:
        return JobFunction(func, type, function_config, get_default_session(), _caller_locals(sys._getframe(1)))

    return decorate
