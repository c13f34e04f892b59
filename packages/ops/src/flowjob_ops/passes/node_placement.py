"""Where the nodes a pass appended with a ``JobBuilder`` go: just before their first reader.

A builder appends, but a pass that makes earlier nodes read the new values (a fake quantization in front of
an op, a proxy in front of a variable's readers) needs each new node defined before its readers, which the
verifier checks. The job's own nodes keep their order.
"""
from __future__ import annotations

from flowjob_core.ir.job import Job, Node


def place_before_readers(job: Job, added: int) -> None:
    """Move the last ``added`` nodes of ``job`` each in front of the first node reading one of its outputs
    (its own new inputs in front of it); a node nobody reads stays at the end."""
    if added <= 0:
        return
    kept, new = job.nodes[:-added], job.nodes[-added:]
    pending = {lbn: node for node in new for lbn in node.outputs}
    placed: set[str] = set()
    order: list[Node] = []

    def emit(node: Node) -> None:
        if node.name in placed:
            return
        placed.add(node.name)
        for lbn in node.inputs:
            if lbn in pending:
                emit(pending[lbn])
        order.append(node)

    for node in kept:
        for lbn in node.inputs:
            if lbn in pending:
                emit(pending[lbn])
        order.append(node)
    for node in new:
        emit(node)
    job.nodes = order
