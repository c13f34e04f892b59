"""The ``auto-mixed-precision`` pass: legacy ``function_config.enable_auto_mixed_precision(True)``.

Legacy's rewrite, on this IR (phase ``differentiate``, before ``autodiff``, so the casts it adds get
their gradients like any op):

* each op's record declares its class (``OpDef.compute.amp``, so a plugin's op takes part as the built-in ones
  do): *white* (GEMM-like: they gain most from float16), *gray* (elementwise and normalizing ops that
  may run in float16 between white ops), *clear* (ops that only move data), *black* (float32); an op
  that declares none runs in float32;
* the float16 set is every white op, plus every gray or clear op lying on a path from one white op to
  another through gray and clear ops only, plus the clear ops next to that set (transitively);
* a float32 value entering the set is cast to float16 once (``<lbn>-cast_f2h``, shared by its
  readers), and a float16 value leaving it is cast back (``<lbn>-cast_h2f``). Variables stay float32;
  their float16 copies are made in the step, and their gradients come back through the casts.

Legacy ran the rewrite only for ops placed on a GPU: ops on the CPU kept float32. So on the numpy
backend the option changes nothing, with a warning naming the job, unless ``FLOWJOB_AMP_ON_CPU=1``
asks for float16 there too (slow: numpy has no float16 GEMM; for checking float16 numerics on a
machine without a GPU). Differences from legacy, by design: a value that is returned, watched or a
loss keeps being computed in float32 (legacy cast it back after computing it in float16), and
batch-norm parameters are cast with its input (legacy's kernel read float32 parameters).
"""
from __future__ import annotations

import dataclasses
import warnings
from typing import Any

import numpy as np

from flowjob_core import ConfigError, switches
from flowjob_core.ir.analysis import observed_values, value_producers, value_readers
from flowjob_core.ir.job import Job, Node

OPTION = "enable_auto_mixed_precision"
_F32, _F16 = np.dtype(np.float32), np.dtype(np.float16)


class AutoMixedPrecisionWarning(UserWarning):
    """enable_auto_mixed_precision asked for float16 where the job's ops run in float32 (the CPU)."""


def _enabled(job: Job) -> bool:
    get = getattr(job.config, "get", None)
    return bool(get(OPTION)) if get is not None else False


def amp_class(ops: Any, op: str) -> str | None:
    """The op's declared class (``OpDef.compute.amp``), None when it declares none or is not registered."""
    return ops[op].compute.amp if op in ops else None


def half_set(job: Job, ops: Any) -> set[str]:
    """The names of the nodes that run in float16 (legacy's white set), by legacy's three traversals."""
    producers, readers = value_producers(job), value_readers(job)
    kind = {node.name: amp_class(ops, node.op) for node in job.nodes}
    observed = observed_values(job)

    def allowed(node: Node) -> bool:  # some float32 output, none observed from outside the job
        return (any(job.specs[o].dtype == _F32 for o in node.outputs)
                and not any(o in observed for o in node.outputs))

    def fathers(node: Node) -> list[Node]:
        return [producers[i] for i in node.inputs if i in producers]

    def children(node: Node) -> list[Node]:
        return [r for o in node.outputs for r in readers.get(o, [])]

    white = {n.name for n in job.nodes if kind[n.name] == "white" and allowed(n)}
    upstream = set(white)  # white ops and the gray/clear ops feeding one through gray/clear ops
    for node in reversed(job.nodes):
        if kind[node.name] in ("gray", "clear") and allowed(node) and any(c.name in upstream for c in children(node)):
            upstream.add(node.name)
    half = set(white)  # ... of which those reached from a white op
    for node in job.nodes:
        if node.name in upstream and any(f.name in half for f in fathers(node)):
            half.add(node.name)
    for order, neighbours in ((job.nodes, fathers), (list(reversed(job.nodes)), children)):
        for node in order:  # clear ops next to the set join it, in both directions
            if kind[node.name] == "clear" and allowed(node) and any(m.name in half for m in neighbours(node)):
                half.add(node.name)
    return half


def _cast(lbn: str, suffix: str, dtype: np.dtype, device: str, source: str) -> Node:
    name = lbn.replace("/", "-") + suffix
    return Node("cast", name, (lbn,), (f"{name}/out_0",), {"dtype": dtype}, device, source)


def rewrite(job: Job, ops: Any) -> None:
    """Insert the casts around the float16 set and re-infer the set's outputs as float16."""
    half = half_set(job, ops)
    if not half:
        return
    readers = value_readers(job)
    to_half: dict[str, str] = {}  # float32 lbn entering the set -> its float16 cast
    to_float: dict[str, str] = {}  # float16 lbn leaving the set -> its float32 cast
    nodes: list[Node] = []
    for node in job.nodes:
        if node.name not in half:
            inputs = tuple(to_float.get(i, i) for i in node.inputs)
            nodes.append(dataclasses.replace(node, inputs=inputs) if inputs != node.inputs else node)
            continue
        inputs = []
        for lbn in node.inputs:
            if lbn in to_float:  # produced by the set: its float16 value
                inputs.append(lbn)
            elif job.specs[lbn].dtype == _F32:
                if lbn not in to_half:
                    cast = _cast(lbn, "-cast_f2h", _F16, node.device, node.source)
                    job.specs[cast.outputs[0]] = dataclasses.replace(job.specs[lbn], dtype=_F16)
                    nodes.append(cast)
                    to_half[lbn] = cast.outputs[0]
                inputs.append(to_half[lbn])
            else:
                inputs.append(lbn)
        node = dataclasses.replace(node, inputs=tuple(inputs))
        specs = ops[node.op].infer(tuple(job.specs[i] for i in node.inputs), node.attrs)
        nodes.append(node)
        for lbn, spec in zip(node.outputs, specs):
            was = job.specs[lbn]
            job.specs[lbn] = spec
            if was.dtype == _F32 and spec.dtype == _F16:
                # read outside the set: a float32 copy for those readers
                if any(r.name not in half for r in readers.get(lbn, [])):
                    cast = _cast(lbn, "-cast_h2f", _F32, node.device, node.source)
                    job.specs[cast.outputs[0]] = was
                    nodes.append(cast)
                    to_float[lbn] = cast.outputs[0]
                else:
                    to_float.setdefault(lbn, lbn)
    job.nodes = nodes


def run(job: Job, ctx: object) -> None:
    if not _enabled(job):
        return
    default = job.config.get("default_data_type")
    if default is not None and np.dtype(default) != _F32:  # legacy checked this before rewriting
        raise ConfigError(f"job {job.name!r}: enable_auto_mixed_precision needs default_data_type float32, "
                          f"got {np.dtype(default)}")
    backend = getattr(ctx, "backend", None)
    on_host = backend is None or getattr(backend, "host_arrays", True)
    if on_host and not switches.current().amp_on_cpu:
        warnings.warn(
            f"job {job.name!r}: enable_auto_mixed_precision(True) has no effect on the CPU backend "
            "(legacy ran only GPU ops in float16); the job computes in float32. Set FLOWJOB_AMP_ON_CPU=1 "
            "to run its float16 ops on the CPU too (slow; to check float16 numerics)",
            AutoMixedPrecisionWarning, stacklevel=2)
        return
    rewrite(job, ctx.registries.ops)  # type: ignore[attr-defined]
