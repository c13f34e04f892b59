"""A job as text, one line per node (``str(job)``): what ``python -m oneflow dump`` prints.

    job train_step (train)
      placeholder Input_0/out: (4, 3):float32  (parameter x)
      variable w: (3,):float32  init zeros
    nodes:
      Input_0/out: (4, 3):float32 = input() {dtype=float32, index=0, shape=(4, 3)}
      y/out_0: (4, 3):float32 = add_n(Input_0/out, w/out)
    returns: Return_1/out
    losses: y/out_0

Attributes are sorted by name; long sequences and long values are shortened so one node
stays one line. The device is shown when it is not the CPU.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from flowjob_core.ir import Intent, Job, Node

MAX_ITEMS = 6  # a longer tuple shows its first items, ..., its last one and its length
MAX_VALUE_CHARS = 60


def format_job(job: "Job") -> str:
    lines = [f"job {job.name} ({job.type})"]
    for p in job.placeholders:
        batch = "" if p.batch_axis == 0 else f", batch axis {p.batch_axis}"
        lines.append(f"  placeholder {p.lbn}: {p.spec}  (parameter {p.param}{batch})")
    for v in job.variables.values():
        frozen = ", not trainable" if not v.trainable else ""
        lines.append(f"  variable {v.name}: {v.spec}  init {_clip(v.initializer or 'zeros')}{frozen}")
    lines.append("nodes:")
    lines.extend(f"  {format_node(node, job)}" for node in job.nodes)
    if job.returns:
        lines.append(f"returns: {', '.join(job.returns)}")
    if job.losses:
        lines.append(f"losses: {', '.join(job.losses)}")
    if job.side_outputs:
        lines.append("side outputs:")
        lines.extend(f"  {s.lbn} -> {s.consumer}" + (f"  ({s.label})" if s.label else "") for s in job.side_outputs)
    if job.intents:
        lines.append("intents:")
        lines.extend(f"  {format_intent(i)}" for i in job.intents)
    return "\n".join(lines)


def format_node(node: "Node", job: "Job") -> str:
    """``out: spec, ... = op(inputs) {attrs} @device``."""
    outs = ", ".join(f"{lbn}: {job.specs[lbn]}" if lbn in job.specs else lbn for lbn in node.outputs)
    line = f"{outs or '()'} = {node.op}({', '.join(node.inputs)})"
    if node.attrs:
        line += " {" + format_attrs(node.attrs) + "}"
    if node.device != "cpu":
        line += f" @{node.device}"
    return line


def format_intent(intent: "Intent") -> str:
    return f"{intent.kind} {{{format_attrs(intent.payload)}}}"


def format_attrs(attrs: dict[str, Any]) -> str:
    return ", ".join(f"{key}={format_value(attrs[key])}" for key in sorted(attrs))


def format_value(value: Any) -> str:
    """One attribute value, short: numbers and strings as Python writes them, dtypes by name, arrays by spec."""
    if isinstance(value, np.dtype) or (isinstance(value, type) and issubclass(value, np.generic)):
        return np.dtype(value).name
    if isinstance(value, np.ndarray):
        return f"array{value.shape}:{value.dtype}"
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, (list, tuple)):
        items = [format_value(v) for v in value]
        if len(items) > MAX_ITEMS:
            items = items[:MAX_ITEMS - 2] + ["...", items[-1], f"len={len(value)}"]
        opener, closer = ("[", "]") if isinstance(value, list) else ("(", ")")
        if isinstance(value, tuple) and len(value) == 1:
            return f"({items[0]},)"
        return _clip(opener + ", ".join(items) + closer)
    if isinstance(value, dict):
        return _clip("{" + format_attrs({str(k): v for k, v in value.items()}) + "}")
    text = repr(value)
    if " at 0x" in text:  # an object without a readable repr: its type, and no address (stable output)
        return f"<{type(value).__name__}>"
    return _clip(text)


def _clip(text: str) -> str:
    return text if len(text) <= MAX_VALUE_CHARS else text[:MAX_VALUE_CHARS - 3] + "..."
