"""One op through the real machinery: a traced job, the session's passes, a plan, one step.

Nothing here consumes the process-wide name counter: every node gets an explicit,
job-local name, so running the kit never shifts the legacy names (``Relu_3``) a program prints.
"""
from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import Any, Collection, Iterator, Sequence

import numpy as np

from flowjob_core.trace.blob import Blob
from flowjob_core.ir.job import BlobSpec, Job
from flowjob_core.passes.pipeline import PassContext, run_passes
from flowjob_core.plan.planner import Plan, build_plan
from flowjob_core.plugins.registry import Backend, Registries
from flowjob_core.runtime.session import Session
from flowjob_core.testing.kernel_probe import with_contract_kernels
from flowjob_core.trace.builder import JobBuilder
from flowjob_core.runtime.variables import VariableStore


@dataclass
class TracedOp:
    """A job holding placeholders for the op's inputs and one node of the op."""

    job: Job
    builder: JobBuilder
    inputs: list[Blob]
    outputs: tuple[Blob, ...]


def trace_op(session: Session, op: str, specs: Sequence[BlobSpec], attrs: dict[str, Any] | None, *,
             job_type: str, job_name: str, device_tag: str | None = None) -> TracedOp:
    """Trace a job of placeholders and one ``op`` node; inference errors surface as ``OpBuildError``."""
    job = Job(job_name, job_type)
    builder = JobBuilder(job, session, device_tag or session.backend.tag)
    inputs = [builder.add_placeholder(spec, param=f"inputs[{i}]", batch_axis=None, name=f"testing_input_{i}")
              for i, spec in enumerate(specs)]
    outputs = builder.add_op(op, inputs, attrs, scoped_name=op)
    return TracedOp(job, builder, inputs, outputs)


def add_returns(traced: TracedOp, blobs: Sequence[Blob], stem: str) -> None:
    for i, blob in enumerate(blobs):
        (ret,) = traced.builder.add_op("return", [blob], scoped_name=f"{stem}_{i}")
        traced.job.returns.append(ret.lbn)


def plan_job(session: Session, job: Job, *, kernel_job_type: str | None = None,
             only_plugins: Collection[str] | None = None, backend: Backend | None = None,
             registries: Registries | None = None) -> Plan:
    """Run the session's passes and build a plan, calling the observer hooks as a job function does.

    ``only_plugins``: run just the passes these plugins registered (in the usual order).
    ``backend``: plan for this backend instead of the session's; ``registries``: use these (a
    view of the session's, such as ``with_contract_kernels``) instead of the session's.
    """
    backend = backend or session.backend
    registries = registries or session.registries
    session.pm.hook.flowjob_job_traced(job=job)
    ctx = PassContext(session, registries, backend)
    if only_plugins is None:
        final = run_passes(job, ctx)
    else:
        final = job.copy()
        for spec in registries.passes.ordered():
            if spec.plugin in only_plugins:
                spec.run(final, ctx)
    if kernel_job_type is not None:
        final.type = kernel_job_type
    variables = session.variables if backend is session.backend else VariableStore(backend, session.config.seed)
    plan = build_plan(final, backend, registries, variables)
    session.pm.hook.flowjob_plan_built(job=final, plan=plan)
    return plan


def run_plan(plan: Plan, feeds: Sequence[np.ndarray], writable: Collection[int] = ()) -> tuple[np.ndarray, ...]:
    """One step. Feeds are copies, read-only where the backend's arrays can be (numpy), so a kernel
    writing into an input fails at the write instead of corrupting the values other readers see;
    ``writable``: feeds an op updates in place (its ``mutates``)."""
    backend = plan.backend
    arrays = []
    for i, f in enumerate(feeds):
        array = backend.from_host(np.array(f, copy=True))
        if isinstance(array, np.ndarray) and i not in writable:
            array.setflags(write=False)
        arrays.append(array)
    returns, _ = plan.run(arrays)
    return tuple(np.asarray(backend.to_host(r)) for r in returns)


def backend_by_tag(session: Session, tag: str | None) -> Backend:
    """The session's backend (``tag`` None) or the installed backend of that tag."""
    if tag is None:
        return session.backend
    backend = session.registries.backends.get(tag)
    if backend is None:
        raise ValueError(f"run_op: no backend {tag!r} is installed; installed: "
                         f"{sorted(b.tag for b in session.registries.backends)}")
    return backend


@contextlib.contextmanager
def session_scope(session: Session | None) -> Iterator[Session]:
    """The given session, or a fresh ``Session()`` (every installed plugin) closed afterwards."""
    if session is not None:
        yield session
        return
    fresh = Session()
    try:
        yield fresh
    finally:
        fresh.close()


def run_op(op: str, inputs: list[np.ndarray], attrs: dict | None = None, *, session: Session | None = None,
           training: bool = False, backend: str | None = None,
           reference_kernel: bool = False) -> tuple[np.ndarray, ...]:
    """The outputs of one ``op`` applied to ``inputs``, computed by a real plan on the session's backend.

    ``training=True`` builds the kernels as in a train job (``ctx.training``: dropout drops).
    ``backend``: the tag of an installed backend to run on instead (``"cpu"``, ``"gpu"``).
    ``reference_kernel=True``: run the op's own kernel (``OpDef.kernel``), not a plugin's override.
    The op's kernel runs under the kernel contract (``kernel_probe``): writing into an input or
    returning an input's memory raises ``KernelContractError`` naming the op.
    Returns every output of the op, as host numpy arrays.
    """
    arrays = [np.asarray(x) for x in inputs]
    with session_scope(session) as sess:
        target = backend_by_tag(sess, backend)
        traced = trace_op(sess, op, [BlobSpec(a.shape, a.dtype) for a in arrays], attrs,
                          job_type="predict", job_name=f"testing_run_op_{op}", device_tag=target.tag)
        add_returns(traced, traced.outputs, "testing_return")
        registries = with_contract_kernels(sess.registries, op, reference=reference_kernel)
        # a train job needs a loss for autodiff; passes see a predict job, the kernels a train one
        plan = plan_job(sess, traced.job, kernel_job_type="train" if training else None, backend=target,
                        registries=registries)
        return run_plan(plan, arrays, writable=sess.registries.ops[op].effects.mutates)
