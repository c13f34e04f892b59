"""Analyses of a job's graph that passes and the planner share: what must stay observable, who
reads each value, and which buffer each value lives in.

Pass authors use these instead of recomputing them, so every pass agrees on the same facts:

* :func:`observed_values`: values a rewrite must keep as values (returned, handed to a side
  output's consumer, or a loss). Dead-code elimination starts from them; a fusion never
  swallows one.
* :func:`fetched_values`: values read after the step (returns, side outputs); the planner
  never lends their buffers to another value.
* :func:`value_readers` / :func:`value_producers`: who reads and who writes each value.
* :func:`buffer_roots`: the buffer each value lives in; a view op's outputs alias the buffer of
  its first input, so a chain of views shares one root.
* :func:`in_place_writers`: per buffer root, the nodes that write it in place (``OpDef.effects.mutates``).

Each function reads the job as it is when called (nothing is cached): call it again after a
rewrite. None of them changes the job.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Iterable, Protocol

from flowjob_core.ir.job import Job, Node

if TYPE_CHECKING:
    from flowjob_core.ir.opdef import OpDef


class OpTable(Protocol):
    """Op records by op type: ``Registries.ops`` (an ``OpRegistry``) or a plain ``dict[str, OpDef]``."""

    def __getitem__(self, name: str) -> "OpDef": ...

    def __contains__(self, name: str, /) -> bool: ...


def fetched_values(job: Job) -> list[str]:
    """The values read after the step, in delivery order: the returns, then the side outputs (watched values).

    Their buffers must outlive the step, so the planner never shares them with another value.
    """
    return list(job.returns) + [s.lbn for s in job.side_outputs]


def observed_values(job: Job) -> set[str]:
    """The values that must stay observable: fetched values (returns, side outputs) and losses.

    A rewrite may replace the node that computes one of them, but must still compute the value
    under the same lbn; dead-code elimination keeps whatever they need.
    """
    return set(fetched_values(job)) | set(job.losses)


def value_readers(job: Job) -> dict[str, list[Node]]:
    """Value (lbn) -> the nodes reading it, in job order; a node reading a value twice is listed twice.

    A value nobody reads has no entry. So ``len(value_readers(job).get(v, [])) == 1`` means a single
    read by a single node (what a fusion that swallows ``v`` needs).
    """
    readers: dict[str, list[Node]] = {}
    for node in job.nodes:
        for lbn in node.inputs:
            readers.setdefault(lbn, []).append(node)
    return readers


def value_producers(job: Job) -> dict[str, Node]:
    """Value (lbn) -> the node computing it (placeholders and variables: their ``input`` node)."""
    return {lbn: node for node in job.nodes for lbn in node.outputs}


def buffer_roots(nodes: Iterable[Node], ops: OpTable) -> dict[str, str]:
    """Value (lbn) -> the lbn of the buffer it lives in, for every output of ``nodes``.

    A view op (``OpDef.effects.view``) returns a view of its first input, so its outputs live in that
    input's buffer; views of views share the first non-view value's buffer. Every other value is
    its own root. ``nodes`` must be in an order that defines a value before a view reads it (job
    order or a schedule); an input no node defines is its own root.
    """
    root: dict[str, str] = {}
    for node in nodes:
        if ops[node.op].effects.view and node.inputs:
            base = root.get(node.inputs[0], node.inputs[0])
            for lbn in node.outputs:
                root[lbn] = base
        else:
            for lbn in node.outputs:
                root[lbn] = lbn
    return root


def in_place_writers(nodes: Iterable[Node], ops: OpTable, roots: dict[str, str]) -> dict[str, list[Node]]:
    """Buffer root -> the nodes writing it in place (the inputs their op lists in ``OpDef.effects.mutates``), in order.

    ``roots`` is :func:`buffer_roots` of the same job: writing through a view writes its root.
    """
    writers: dict[str, list[Node]] = {}
    for node in nodes:
        for k in ops[node.op].effects.mutates:
            lbn = node.inputs[k]
            writers.setdefault(roots.get(lbn, lbn), []).append(node)
    return writers
