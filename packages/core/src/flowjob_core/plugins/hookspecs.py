"""The flowjob plugin API.

A plugin is a module or object with functions named like the specs below and marked with
``flowjob_core.hookimpl``. Third-party packages are found through the ``flowjob`` entry-point
group (``[project.entry-points.flowjob] my_ops = "my_ops.plugin"``); the packages of this
repository register the same way, and core's own built-ins are registered by name.

Registration hooks run once per session, when the session gathers its registries: each
plugin's implementation is called on its own, so an error names the plugin (and a name
registered twice names both). The other hooks run while tracing and planning. None runs
per op per step: plans hold plain callables. An implementation may take fewer arguments
than its spec.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pluggy

if TYPE_CHECKING:
    from flowjob_core.ir.job import Job
    from flowjob_core.plugins.registry import (
        Backend, BackendRegistry, KernelRegistry, OpRegistry, PassRegistry, ResultKindRegistry,
        WatchSinkRegistry)

PROJECT = "flowjob"
hookspec = pluggy.HookspecMarker(PROJECT)


@hookspec
def flowjob_add_ops(registry: "OpRegistry") -> None:
    """Register op records with ``registry.add(OpDef(...))``.

    An ``OpDef`` holds the op's shape and dtype inference, its gradient rule (graph nodes)
    or the ``not_differentiable`` mark, and a kernel builder written against ``xp``.
    ``registry.add_operator("__add__", fn)`` makes a Python operator on symbolic blobs call
    ``fn``; ``registry.add_tensor_method("reshape", fn)`` makes the eager ``flow.Tensor``'s method call
    ``fn(tensor, *args, **kwargs)`` (core's tensor names no op of a plugin: the methods that run a plugin's
    records come from it). Registering a name twice is an error naming both plugins.
    """


@hookspec
def flowjob_add_kernels(registry: "KernelRegistry") -> None:
    """Register backend-specific kernel builders: ``registry.add(op, backend_tag, builder)``.

    ``op`` is the op's record (or its ``.name``) as the package that registers the op exports it, never a
    string literal, so that renaming the op cannot silently drop the override. A builder registered for a
    tag replaces the op's own kernel on that backend only; ``"*"`` replaces it everywhere. Every plugin's ops
    are registered before any kernel, so an override of an op no plugin registered is an error naming the
    plugin, and so is a second override of one (op, tag) pair (naming both plugins). ``optional=True`` skips
    the override where the op's own plugin is not loaded (an override of another distribution's op that the
    overriding plugin does not require loaded).
    """


@hookspec
def flowjob_add_backends(registry: "BackendRegistry") -> None:
    """Register devices: ``registry.add(Backend(tag="gpu", xp=cupy, ...))``.

    Register a backend only where it can run (the gpu package checks for a device first). A second
    backend of a tag already registered is an error naming both plugins (block one instead).
    """


@hookspec
def flowjob_add_passes(registry: "PassRegistry") -> None:
    """Register graph passes: ``registry.add(name, run, phase="fuse", after_if_present="optim-fusion")``.

    ``run(job, ctx)`` receives a copy of the traced ``Job`` and a ``PassContext`` and
    mutates the job in place. The pipeline is ordered by declaration only, never by the
    order plugins register, so every installation of the same plugins runs the same passes
    in the same order (``python -m oneflow info`` prints it):

    1. **Phases**, in this order (``flowjob_core.plugins.pass_order.PHASES``): ``verify``
       (core's ``verify``), ``differentiate`` (``autodiff``), ``instrument`` (``watch``),
       ``update`` (``optimizer``), ``transform`` (other rewrites before dead code is
       dropped), ``cleanup`` (``dce``), ``fuse`` (``optim-fusion``, ``fuse-conv``,
       ``fuse-dense``), ``finalize`` (``verify-final``).
    2. **Anchors** inside a phase: ``after=``/``before=`` name passes that must be
       registered (an unknown one is an error); ``after_if_present=``/``before_if_present=``
       apply only when the named pass is registered (another plugin's, say). An anchor
       may point to an earlier phase (``after``) or a later one (``before``), never against
       the phase order; a cycle is an error naming its passes.
    3. **Names** break the remaining ties.

    A pass added without ``phase=`` (``registry.add(name, run, after="autodiff",
    before="dce")``, the older form) joins the phase of its first ``after`` anchor and runs
    after it, else the phase of its first ``before`` anchor; with neither it runs in
    ``transform``. Registering a name twice is an error naming both plugins.
    """


@hookspec
def flowjob_add_result_kinds(registry: "ResultKindRegistry") -> None:
    """Register annotation matchers for parameters, returns and watch-handler values.

    ``add_param_kind(matcher)``: annotation -> ParamKind (placeholders and feeding).
    ``add_default_kind(matcher)``: legacy default value (``FixedTensorDef``) -> ParamKind.
    ``add_return_kind(matcher)``: return annotation -> ReturnKind (how results are delivered).
    ``add_value_converter(matcher)``: handler annotation -> converter of a watched value.
    """


@hookspec
def flowjob_add_watch_sinks(registry: "WatchSinkRegistry") -> None:
    """Register watch sinks: ``registry.add(name, factory)``.

    ``factory(target, **options)`` returns a sink: ``sink(value, blob_def)`` is called once
    per step for each value it watches (host ndarray, and the symbolic blob it came from);
    an optional ``sink.end_step(job_name)`` runs once per step after its last value (a
    recorder closes its file there). Sinks run on the session's executor, in graph order,
    before a synchronous call returns; what they raise is kept for the next synchronous point.
    """


@hookspec(firstresult=True)
def flowjob_select_backend(device_tag: str, backends: "BackendRegistry") -> "Backend | None":
    """Choose the backend that runs a job placed on ``device_tag``; the first non-None answer wins.

    Core's default answers the backend registered under that tag, or the CPU one with a
    warning when none is.
    """


@hookspec
def flowjob_op_libraries() -> Any:
    """Name the compiled legacy op libraries whose ops this plugin provides: a list of file names
    (``["final_relu.so"]``).

    A legacy program loads its custom ops with ``flow.config.load_library("path/to/final_relu.so")``; once
    the ops are ported to this plugin (same op type, input, output and attribute names, so
    ``flow.user_op_builder`` calls stay as they were), that call finds the file name here and goes on with
    the plugin's ops instead of refusing. Only the file name is compared (not the folder).
    """


@hookspec(firstresult=True)
def flowjob_read_initializer(value: Any, owner: str) -> Any:
    """Read an initializer given in a form of its own (legacy's ``InitializerConf`` message) as a callable
    ``init(shape, dtype, rng) -> ndarray``; the first non-None answer wins.

    ``flow.get_variable`` asks it while a body is traced, for an initializer that is not callable;
    ``owner`` names what it initializes ("variable 'w'") for error messages. A ``ValueError`` raised
    here becomes a ``VariableError`` naming the variable. flowjob-ops answers for InitializerConf.
    """


@hookspec
def flowjob_job_traced(job: "Job") -> None:
    """Observe a job right after its body was traced (before any pass)."""


@hookspec
def flowjob_plan_built(job: "Job", plan: Any) -> None:
    """Observe a plan once it is built (after every pass), for logging or checks."""


@hookspec(firstresult=True)
def flowjob_world() -> Any:
    """Describe the processes the program runs in (a ``flowjob_core.runtime.world.World``); the first non-None
    answer wins, none means this one process.

    Core asks it what legacy's multi-machine API needs (``flow.config.machine_num`` and
    ``flow.env.machine`` must name ``world.machines``) and how checkpoints are kept: rank 0 alone
    reads and writes the files (``world.root_only``), then every rank takes rank 0's variables
    (``world.broadcast_arrays``); each rank writes and reads its own rows of a split variable's file, agreeing
    with the others through ``world.allgather`` (``gather_to_root`` and ``scatter_from_root`` where the ranks do not
    share the folder). flowjob-mpi answers with the MPI world.
    """
