"""Eager execution (legacy ``flow.enable_eager_execution(True)``): a job body runs op by op on real arrays.

Each eager call traces the body again with an :class:`EagerBuilder`, which runs every node's kernel right
after its inference (the kernel the op record builds for the session's backend, inputs the arrays of
earlier nodes, feeds and variables), so blobs hold values while the body runs (``blob.numpy()``). When
the body returns, the recorded job goes through the usual passes (autodiff, watch, optimizer, fusion);
the nodes of the final job that already ran are cut out and their values fed as placeholders, and the
rest (gradients, watched values, updates) is planned and run once. Every value is computed by the same
kernel as in lazy mode, so results are lazy mode's; see docs/architecture.md, "Eager execution".
"""
from __future__ import annotations

import dataclasses
import functools
import threading
import types
from typing import TYPE_CHECKING, Any, Callable, Hashable, Sequence

import numpy as np

from flowjob_core.ir import naming
from flowjob_core.plan import numerics
from flowjob_core.ir.bindings import Bindings
from flowjob_core.trace.blob import Blob
from flowjob_core.errors import FlowjobError
from flowjob_core.ir.job import BlobSpec, Job, Node, Placeholder
from flowjob_core.plan.mirrored import PerDevice, TensorList
from flowjob_core.ir.kernel import kernel_of
from flowjob_core.ir.opdef import KernelContext
from flowjob_core.passes.pipeline import PassContext, run_passes
from flowjob_core.plan.planner import StepError, build_plan
from flowjob_core.trace.builder import JobBuilder

if TYPE_CHECKING:
    from flowjob_core.api.function import JobFunction

class EagerBuilder(JobBuilder):
    """A job builder that also runs each node as soon as it is added; ``values`` maps lbn -> array."""

    def __init__(self, job: Job, function: "JobFunction", default_device: str, bindings: Bindings,
                 feeds: Sequence[Any], kernels: "KernelCache") -> None:
        super().__init__(job, function.session, default_device, bindings)
        self.values: dict[str, Any] = {}
        # (name, op) of the nodes already run: a pass may give a fused node the name of an op it replaced
        self.ran: set[tuple[str, str]] = set()
        self.positions: dict[str, int] = {}  # node name -> index in the job (kernel cache keys)
        # per node: position, op, device, inputs as (position, output), output specs, attributes (names of
        # nodes as positions): the kernel cache's keys, and the nodes' part of the job's signature
        self.keys: list[Hashable] = []
        self._feeds = feeds
        self._kernels = kernels
        self._backend = function.session.backend
        self._check = numerics.wanted(function.session.config, function.config)

    def add_op(self, op_type: str, inputs: Sequence[Blob], attrs: dict[str, Any] | None = None,
               **kwargs: Any) -> tuple[Blob, ...]:
        outs = super().add_op(op_type, inputs, attrs, **kwargs)
        job, position = self.job, self.positions
        node = job.nodes[-1]
        position[node.name] = len(job.nodes) - 1
        key = (position[node.name], node.op, node.device, tuple(_ref(lbn, position) for lbn in node.inputs),
               tuple(job.specs[o] for o in node.outputs), _freeze(node.attrs, position))
        self.keys.append(key)
        self._run(node, key)
        return outs

    def add_placeholder(self, spec: BlobSpec, *, param: str, batch_axis: int | None = 0,
                        name: str | None = None, dynamic: bool = False) -> Blob:
        # a mirrored argument may be fed smaller than declared: its blob has the fed shape, as legacy's
        # eager blobs had (the body runs for these feeds only)
        fed = self._feeds[len(self.job.placeholders)]
        shape = tuple(getattr(fed, "shape", spec.shape))
        if shape != spec.shape:
            spec = BlobSpec(shape, spec.dtype)
        return super().add_placeholder(spec, param=param, batch_axis=batch_axis, name=name, dynamic=dynamic)

    def _run(self, node: Node, key: Hashable) -> None:
        if node.op == "input":
            self.values[node.outputs[0]] = self._feeds[node.attrs["index"]]
            self.ran.add((node.name, node.op))
            return
        opdef = self.registries.ops[node.op]
        if opdef.shape.dynamic_extent:  # its readers' kernels are built per actual row count (flowjob_core.plan.extent)
            raise FlowjobError(f"job {self.job.name!r}, op {node.name!r} ({node.op}) at {node.source}: ops whose "
                               f"rows the data decide do not run in eager mode yet; call "
                               f"flow.enable_eager_execution(False) for this job")
        run_node(self._kernels.kernel(self, node, key), node, self.values, f"job {self.job.name!r}", "in eager mode")
        self.ran.add((node.name, node.op))

    def eager_value(self, blob: Blob) -> np.ndarray:
        """The value of ``blob`` on the host, a copy (a variable's value changes when the step updates it)."""
        value = self.values.get(blob.lbn)
        if value is None:
            raise FlowjobError(f"job {self.job.name!r}: blob {blob.lbn!r} has no value (yet) in eager mode")
        return np.array(self._backend.to_host(value), copy=True)


class KernelCache:
    """The kernels of one job function's eager calls, kept from one call to the next.

    A node gets the kernel built for the node at the same position of the previous call when op, specs and
    attributes agree (names of other nodes in attributes compared by position), so a seeded random op draws
    on from its stream and a reader reads on, as a lazy plan's kernels do; only the last call's kernels are
    kept, so a body that changes from call to call holds no more than one call's.
    """

    def __init__(self) -> None:
        self._previous: dict[Hashable, Callable[..., Any]] = {}
        self._current: dict[Hashable, Callable[..., Any]] = {}
        self.shared: dict[Any, Any] = {}

    def start_call(self) -> None:
        self._previous, self._current = self._current, {}
        self.shared = {}  # kernels built in this call meet here (an OFRecord reader and its decoders)

    def kernel(self, builder: EagerBuilder, node: Node, key: Hashable) -> Callable[..., Any]:
        fn = self._previous.get(key) or self._current.get(key)
        if fn is None:
            fn = self._build(builder, node)
        self._current[key] = fn
        return fn

    def _build(self, builder: EagerBuilder, node: Node) -> Callable[..., Any]:
        return build_kernel(builder, node, self.shared, builder._check)


def build_kernel(builder: JobBuilder, node: Node, shared: dict[Any, Any], check: bool) -> Callable[..., Any]:
    """The kernel of ``node`` (a node of ``builder``'s job) for the session's backend, as the planner would pick
    it (the backend's override, else the record's); ``shared`` is the dict kernels built together meet in,
    ``check`` wraps it with the numerics check. Its outputs are its own buffers, reused by later calls."""
    job, backend = builder.job, builder.session.backend
    opdef = builder.registries.ops[node.op]
    make = builder.registries.kernels.lookup(opdef, backend.tag)
    if make is None:
        raise FlowjobError(f"job {job.name!r}: op {node.name!r} ({node.op}) has no kernel for backend "
                           f"{backend.tag!r} ({backend.name})")
    kctx = KernelContext(backend.xp, backend, node.op, node.name, node.attrs,
                         tuple(job.specs[i] for i in node.inputs), tuple(job.specs[o] for o in node.outputs),
                         job.type, builder.session.variables.array, None, shared, ops=builder.registries.ops)
    try:
        fn = kernel_of(make(kctx)).run  # eager calls run each node itself: no step is recorded, nothing gated
    except FlowjobError:
        raise
    except Exception as exc:
        raise FlowjobError(f"job {job.name!r}: building the kernel of op {node.name!r} ({node.op}) at "
                           f"{node.source} failed: {exc!r}") from exc
    return numerics.checked(fn, backend.xp, job, node, intended_inf=opdef.compute.intended_inf) if check else fn


def run_node(fn: Callable[..., Any], node: Node, values: dict[str, Any], where: str, mode: str) -> None:
    """Run ``node``'s kernel ``fn`` on its inputs' arrays in ``values`` and store its outputs there; a kernel's
    failure becomes a ``StepError`` naming ``where`` (the job), the op and its source line."""
    try:
        result = fn(*(values[lbn] for lbn in node.inputs))
    except FlowjobError:
        raise
    except Exception as exc:
        raise StepError(f"{where}, op {node.name!r} ({node.op}) at {node.source}: kernel failed {mode}: "
                        f"{exc!r}") from exc
    if len(node.outputs) == 1:
        values[node.outputs[0]] = result
    elif node.outputs:
        values.update(zip(node.outputs, result))


def _ref(lbn: str, position: dict[str, int]) -> tuple[int, str]:
    name, _, out = lbn.partition("/")
    return position[name], out


def _freeze(value: Any, position: dict[str, int]) -> Hashable:
    """A hashable, exact form of an attribute value; a string naming a node of the job becomes its position."""
    if isinstance(value, str):
        return ("node", position[value]) if value in position else value
    if isinstance(value, dict):
        return tuple(sorted((k, _freeze(v, position)) for k, v in value.items()))
    if isinstance(value, (list, tuple)):
        return (type(value).__name__,) + tuple(_freeze(v, position) for v in value)
    if isinstance(value, np.ndarray):
        return ("ndarray", value.dtype.str, value.shape, value.tobytes())
    try:
        hash(value)
    except TypeError:
        return ("repr", type(value).__qualname__, repr(value))
    return (type(value).__qualname__, value)


def call(function: "JobFunction", feeds: list[Any]) -> Any:
    """One eager call of ``function`` with checked feeds: run the body op by op, then what the passes added.

    Calls of one job function take turns (its kernels write into their own buffers, which the step after
    the body reads); a call from a callback or watch handler, on the executor's thread, that finds another
    call running is an error rather than a wait, as that call may be waiting for this very thread.
    """
    session = function.session
    lock = function.__dict__.get("_eager_lock") or function.__dict__.setdefault("_eager_lock", threading.Lock())
    on_worker = threading.current_thread() is getattr(session.executor, "_worker", None)
    if not lock.acquire(blocking=not on_worker):
        raise FlowjobError(f"global function {function.name!r} was called in eager mode from a callback or watch "
                           f"handler while another call of it runs; call it after that call returns")
    try:
        return _call(function, feeds)
    finally:
        lock.release()


def _call(function: "JobFunction", feeds: list[Any]) -> Any:
    session = function.session
    where = f"global function {function.name!r}"
    if any(type(f) is PerDevice for f in feeds):  # tp.ListNumpy: one array per device
        if function._devices(feeds) != 1:
            raise FlowjobError(f"{where}: mirrored arguments over several devices do not run in eager mode yet; "
                               f"call flow.enable_eager_execution(False)")
        feeds = [f[0] if type(f) is PerDevice else f for f in feeds]
    if any(type(f) is TensorList for f in feeds):
        raise FlowjobError(f"{where}: tensor lists (several arrays per device) do not run in eager mode yet; "
                           f"call flow.enable_eager_execution(False)")
    # the body reads variables now: every earlier step, and its updates, must be done
    session.executor.sync()
    backend = session.backend
    if not backend.host_arrays:
        feeds = [backend.from_host(f) for f in feeds]
    _adopt_caches(function)
    cache = function.__dict__.setdefault("_eager_kernels", KernelCache())
    cache.start_call()
    # the first call's job, fed the declared shapes, becomes the function's traced job (checkpoints and
    # get_all_variables read the variables from it instead of tracing a body that may call .numpy(); lazy
    # calls plan it); other calls' watch handlers and sinks live in a table of their own, dropped with the plan
    declared = [s.shape for param in function.params for s in param.specs]
    first = function._job is None and [tuple(getattr(f, "shape", ())) for f in feeds] == declared
    bindings = function.bindings if first else Bindings()
    job = Job(function.name, function.type, config=function.config.snapshot())
    placement = function.config.get("default_placement_scope")
    default_device = placement.device_tag if placement is not None else backend.tag
    builder = EagerBuilder(job, function, default_device, bindings, feeds, cache)
    function.trace_body(builder, placement)
    if first:
        with function._trace_lock:
            if function._job is None:
                function._job = job
                session.pm.hook.flowjob_job_traced(job=job)
    check = numerics.wanted(session.config, function.config)
    signature, keep = job_signature(builder, check)
    cached: _CachedStep | None = function.__dict__.get("_eager_step")
    if cached is not None and cached.signature == signature:
        plan, refs = cached.plan, cached.refs  # the same body as last call: same passes, same plan
    else:
        final = run_passes(job, PassContext(session, session.registries, backend, bindings))
        function.declared = True
        rest, fed = remaining_job(final, builder, session.registries.ops)
        with numerics.planning(check):
            plan = build_plan(rest, backend, session.registries, session.variables, bindings)
        position = builder.positions
        refs = [(position[lbn.split("/", 1)[0]], job.nodes[position[lbn.split("/", 1)[0]]].outputs.index(lbn))
                for lbn in fed]
        function.__dict__["_eager_step"] = _CachedStep(signature, keep, plan, refs)
    nodes = job.nodes
    values = [builder.values[nodes[p].outputs[k]] for p, k in refs]
    consumers, to_host, report = plan.side_consumers, backend.to_host, session.executor.report

    def compute() -> Any:
        return plan.run(values)

    def deliver(raw: Any) -> list[Any]:
        returns, sides = raw
        for consume, value in zip(consumers, sides):
            try:
                consume(to_host(value))
            except BaseException as exc:  # kept for the next synchronous point, as in lazy mode
                report(exc)
        return [to_host(v) for v in returns]

    kind = function.return_kind
    return kind.launch(session.executor.submit(compute, deliver, wait=kind.waits, what=where), where)


def _adopt_caches(function: "JobFunction") -> None:
    """A job function defined again with the same code (legacy's eager example defines its job inside the
    function it calls every step) takes over the kernels and step of the one it replaces; another body
    leaves them to be freed."""
    replaced = function.replaced
    if replaced is None or "_eager_kernels" in function.__dict__:
        return
    taken: dict[str, Any] = {key: replaced.__dict__.pop(key) for key in ("_eager_kernels", "_eager_step")
                             if key in replaced.__dict__}
    if getattr(replaced.func, "__code__", None) is getattr(function.func, "__code__", False):
        function.__dict__.update(taken)


# code (a handler, a closure over the caller's state) is the same only when it is the same object
_BY_IDENTITY = (types.FunctionType, types.MethodType, types.BuiltinFunctionType, types.ModuleType, type,
                functools.partial)


@dataclasses.dataclass
class _CachedStep:
    """The step after the body of the last eager call, reused while the body records the same job."""

    signature: Hashable
    keep: list[Any]  # the objects compared by identity, kept alive so that their ids stay theirs
    plan: Any
    refs: list[tuple[int, int]]  # (node position, output index) of each value the plan's placeholders take


def job_signature(builder: EagerBuilder, check: bool) -> tuple[Hashable, list[Any]]:
    """What the passes and the planner make of a traced job depends on, with node names replaced by
    positions (unnamed ops take new names on every call): nodes, specs, attributes, intents, variables,
    results, the objects bound (handlers and sinks by identity, other objects by their attributes)."""
    job, bindings, position = builder.job, builder.bindings, builder.positions
    keep: list[Any] = []

    def lbn(value: str) -> Hashable:
        name, _, out = value.partition("/")
        return ("lbn", position[name], out) if name in position else value

    def freeze(value: Any, depth: int = 0) -> Hashable:
        if isinstance(value, str):
            return lbn(value)
        if isinstance(value, Blob):
            return ("blob", lbn(value.lbn))
        if isinstance(value, (int, float, complex, bool, type(None), bytes, np.generic)):
            return (type(value).__qualname__, value)
        if isinstance(value, dict):
            return ("dict",) + tuple(sorted(((str(k), freeze(v, depth + 1)) for k, v in value.items()), key=repr))
        if isinstance(value, (list, tuple)):
            return (type(value).__name__,) + tuple(freeze(v, depth + 1) for v in value)
        if isinstance(value, np.ndarray):
            return ("ndarray", value.dtype.str, value.shape, value.tobytes())
        if dataclasses.is_dataclass(value) and not isinstance(value, type) and depth < 6:
            return (type(value).__qualname__,) + tuple(
                (f.name, freeze(getattr(value, f.name), depth + 1)) for f in dataclasses.fields(value))
        state = getattr(value, "__dict__", None)
        if isinstance(state, dict) and not isinstance(value, _BY_IDENTITY) and depth < 6:
            # an optimizer, a scheduler, a sink: by value (what it holds, its handler by identity)
            return (type(value).__qualname__, freeze(state, depth + 1))
        keep.append(value)  # functions, handlers, sinks with state: the same object or no reuse
        return ("id", id(value))

    if len(builder.keys) != len(job.nodes):  # a node added around the builder: never reuse a step for it
        keep.append(object())
        return ("unmatched", id(keep[-1])), keep
    signature = (tuple(builder.keys), tuple((i.kind, freeze(i.payload)) for i in job.intents), freeze(job.variables),
                 freeze(job.placeholders), freeze(job.returns), freeze(job.losses), freeze(job.grad_targets),
                 tuple((key, freeze(bindings[key])) for key in bindings), check)
    return signature, keep


_RERUNNABLE_EFFECTS = frozenset({"return", "fetch"})  # effects that only copy a value out of the step


def remaining_job(final: Job, builder: EagerBuilder, ops: Any) -> tuple[Job, list[str]]:
    """The part of ``final`` the step runs, and the lbns (values of the eager body) its placeholders take.

    Cut: the nodes that ran in the body, and bitwise fusions of them. Run: what the passes added (gradients,
    updates, watched copies) and fused nodes that replace ops of the body with other arithmetic (fuse-conv's
    conv + bias + ReLU), so the gradients and updates read the values lazy mode computes; a node of the body
    that reads such a recomputed value runs again too, unless running it twice would differ (effects,
    in-place writes, random streams), so returns are lazy mode's. Variable reads and views always run, never
    fed: they are the variable's own memory, and the planner orders an in-place update after every reader
    of that memory only when it sees the link.
    """
    known, ran = builder.values, builder.ran
    kept: list[Node] = []
    recomputed: set[str] = set()
    for node in final.nodes:
        opdef = ops[node.op]
        if node.op == "input":
            continue
        if node.op == "variable" or opdef.effects.view:
            keep = True
        elif (node.name, node.op) in ran:
            repeatable = not (opdef.effects.mutates or "seed" in node.attrs
                              or (opdef.effects.effect and node.op not in _RERUNNABLE_EFFECTS))
            keep = repeatable and any(i in recomputed for i in node.inputs)
        elif opdef.compute.bitwise_as_parts and node.outputs and all(o in known for o in node.outputs):
            keep = any(i in recomputed for i in node.inputs)
        else:
            keep = True
        if keep:
            kept.append(node)
            if node.op != "variable" and not (opdef.effects.view and not any(i in recomputed for i in node.inputs)):
                recomputed.update(o for o in node.outputs if o in known)
    produced = {o for n in kept for o in n.outputs}
    fed: list[str] = []
    wanted = [lbn for n in kept for lbn in n.inputs] + list(final.returns) + [s.lbn for s in final.side_outputs]
    for lbn in wanted:
        if lbn not in produced and lbn not in fed:
            if lbn not in known:
                raise FlowjobError(f"job {final.name!r}: eager mode has no value for {lbn!r}, which the step "
                                   f"after the body reads (a pass replaced a node that ran?)")
            fed.append(lbn)
    rest = dataclasses.replace(final.copy(), nodes=[], placeholders=[])
    if fed:
        name = naming.unique_name("EagerValues")
        rest.nodes.append(Node("input", name, (), tuple(fed), {"eager": True}, builder.default_device,
                               "values of the eager body"))
        rest.placeholders = [Placeholder(name, lbn, final.specs[lbn], None, "eager") for lbn in fed]
    rest.nodes.extend(kept)
    return rest, fed
