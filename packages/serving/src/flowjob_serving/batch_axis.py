"""A model served for another batch size keeps its batch axis, or the error names the op that drops it.

``set_job_batch_size`` (legacy's ``open(..., batch_size=n)``) replaces the first axis of every input, and the
replay infers every op again for it. An op whose attributes hold a shape traced for the old batch still infers:
``flow.reshape(x, (4, -1))`` traced for 4 rows of 6 gives (4, 3) for 2 rows, a result of the wrong rows. So the
served job's values are inferred once more for the traced batch: a value that carried the batch axis when
traced (an input's first axis, followed through the ops whose output kept it) must carry the served batch; an
op whose output does not, while one of its attributes holds the traced batch, is refused naming the op, the
attribute and the input.
"""
from __future__ import annotations

from typing import Any

from flowjob_core import BlobSpec, Job, SavedModelError


def check(job: Job, batches: dict[str, tuple[int, int, str]], ops: Any, where: str) -> None:
    """``batches``: placeholder lbn -> (traced batch, served batch, input name); ``ops`` the session's op
    registry (``registries.ops``)."""
    traced = dict(job.specs)
    carried: dict[str, tuple[int, int, str]] = {}
    for lbn, (old, new, name) in batches.items():
        spec = job.specs[lbn]
        if old != new and spec.shape:
            traced[lbn] = BlobSpec((old, *spec.shape[1:]), spec.dtype)
            carried[lbn] = (old, new, name)
    if not carried:
        return
    for node in job.nodes:
        reached = [carried[i] for i in node.inputs if i in carried]
        if node.op == "input" or not reached:
            continue
        try:
            outs = ops[node.op].infer(tuple(traced[i] for i in node.inputs), node.attrs)
        except Exception:  # noqa: BLE001  the op does not infer for the traced batch: nothing to compare
            continue
        old, new, name = reached[0]
        for lbn, was in zip(node.outputs, outs):
            traced[lbn] = was
            served = job.specs[lbn].shape
            if not was.shape or was.shape[0] != old:
                continue
            if served and served[0] == new:
                carried[lbn] = reached[0]
                continue
            holding = sorted(key for key, value in node.attrs.items() if _holds(value, old))
            if holding:
                shown = ", ".join(f"{key}={node.attrs[key]!r}" for key in holding)
                raise SavedModelError(
                    f"{where}: op {node.name!r} ({node.op}) was traced for batch {old} and is served for batch {new} "
                    f"(input {name!r}): its attribute {shown} holds the traced batch, so it gives {served} where "
                    f"the batch axis gives ({new}, ...) (traced: {was.shape}); save the model with -1 on the batch "
                    f"axis (flow.reshape(x, (-1, ...))) or serve it for batch {old}")


def _holds(value: Any, batch: int) -> bool:
    """An attribute that is a shape (a tuple of ints) whose first entry is ``batch``."""
    return (isinstance(value, tuple) and bool(value) and all(isinstance(v, int) for v in value)
            and value[0] == batch)
