"""A job as text, one line per node (``str(job)``, ``format_job``): what ``python -m oneflow dump`` prints.

    job train_step (train)
      placeholder Input_0/out: (4, 3):float32  (parameter x)
      variable w: (3,):float32  init zeros  regularizer Regularizer#1
    nodes:
      y/out_0: (4, 3):float32 = add_n(Input_0/out, w/out)
      effect! Return_1/out: (4, 3):float32 = return(y/out_0)
      update! w <- optim_sgd_update(w/out, y_grad/out_0, lr/out_0) {l2=0.1}
    returns: Return_1/out
    losses: y/out_0
    intents:
      minimize {optimizer='SGD#0'}
    bindings:
      SGD#0: SGD(lr_scheduler=LrScheduler(base_lr=0.1), weight_decay=0.0, momentum=0.0)
      Regularizer#1: Regularizer(l1=0.0, l2=0.1)

Each placeholder and variable is listed once, in the header (their ``input`` and ``variable``
nodes are not repeated among the nodes). Attributes are sorted by name; long sequences and long
values are shortened so one node stays one line. The device is shown when it is not the CPU.

On several ranks each value's layout follows its spec (``S(0)``: split along axis 0, ``B``: broadcast, ``P``:
partial sums, ``flowjob_core.ir.layout``); in one process only the layouts the body declared show.
After a node's outputs comes where it runs: `` on 0:0-1`` for the ``flow.scope.placement`` it was traced in
(machine 0, devices 0 and 1), and ``(ranks 0-1)`` or `` on ranks 0-1`` where a plugin mapped it onto its ranks
(``Job.ranks``). Layouts declared for gradients (``blob.with_gradient_distribute``) are listed under
``gradient layouts:``, by the blob whose gradient they lay out; on several ranks the gradient's own node then
shows it too.

Effects are marked from the op records (``ops``, the session's op table): ``update! a, b <-``
before a node that writes the values ``a`` and ``b`` in place (a variable by its name), ``effect!``
before a node kept for what it does beyond its outputs (a return, a sink). Without the records a
node without outputs, which is there for its effect, is marked ``effect!``.

A job names Python objects by keys of its global function's bindings (``optimizer='SGD#0'``);
given the table (``bindings``), the printout ends with what each key the job names stands for:
the object's type and hyper-parameters, a function's name, or the type of any other object.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Iterator

import numpy as np

if TYPE_CHECKING:
    from flowjob_core.ir.analysis import OpTable
    from flowjob_core.ir.bindings import Bindings
    from flowjob_core.ir.job import Intent, Job, Node

MAX_ITEMS = 6  # a longer tuple shows its first items, ..., its last one and its length
MAX_VALUE_CHARS = 60


def format_job(job: "Job", ops: "OpTable | None" = None, bindings: "Bindings | None" = None) -> str:
    """The job as text; ``ops`` marks effects, ``bindings`` adds what the job's keys name (see the module)."""
    declared = _declaring_nodes(job)
    listed = {id(node) for node in declared.values()}

    def device(lbn: str) -> str:
        node = declared.get(lbn)
        if node is None:
            return ""
        return (f" @{node.device}" if node.device != "cpu" else "") + placed(node, job)

    lines = [f"job {job.name} ({job.type})"]
    for p in job.placeholders:
        batch = "" if p.batch_axis == 0 else f", batch axis {p.batch_axis}"
        lines.append(f"  placeholder {p.lbn}: {p.spec}{_layout(job, p.lbn)}  (parameter {p.param}{batch})"
                     f"{device(p.lbn)}")
    for v in job.variables.values():
        frozen = ", not trainable" if not v.trainable else ""
        penalty = f"  regularizer {v.regularizer}" if v.regularizer is not None else ""
        lines.append(f"  variable {v.name}: {v.spec}{_layout(job, v.lbn)}  init {_clip(v.initializer or 'zeros')}"
                     f"{frozen}{penalty}{device(v.lbn)}")
    lines.append("nodes:")
    lines.extend(f"  {format_node(node, job, ops)}" for node in job.nodes if id(node) not in listed)
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
    if job.gradient_layouts:
        lines.append("gradient layouts:")
        lines.extend(f"  {lbn}: {layout}" for lbn, layout in job.gradient_layouts.items())
    wanted = set(_keys_named(job))
    named = [(key, bindings[key]) for key in bindings if key in wanted] if bindings is not None else []
    if named:
        lines.append("bindings:")
        lines.extend(f"  {key}: {describe(obj)}" for key, obj in named)
    return "\n".join(lines)


def format_node(node: "Node", job: "Job", ops: "OpTable | None" = None) -> str:
    """``[mark] out: spec, ... = op(inputs) {attrs} @device`` (see the module for the marks)."""
    outs = ", ".join(f"{lbn}: {job.specs[lbn]}{_layout(job, lbn)}" if lbn in job.specs else lbn
                     for lbn in node.outputs)
    call = f"{node.op}({', '.join(node.inputs)})"
    if node.attrs:
        call += " {" + format_attrs(node.attrs) + "}"
    if node.device != "cpu":
        call += f" @{node.device}"
    if outs:  # beside the outputs' layouts; after the call of a node without outputs
        outs += placed(node, job)
    else:
        call += placed(node, job)
    line = f"{outs} = {call}" if outs else call
    opdef = ops[node.op] if ops is not None and node.op in ops else None
    if opdef is not None and opdef.effects.mutates:
        names = {v.lbn: v.name for v in job.variables.values()}
        written = [node.inputs[k] for k in opdef.effects.mutates if k < len(node.inputs)]
        return f"update! {', '.join(names.get(lbn, lbn) for lbn in written)} <- {line}"
    if (opdef.effects.effect if opdef is not None else not node.outputs):
        return f"effect! {line}"
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


def describe(obj: Any) -> str:
    """A bound object as text: its repr when that is readable (``SGD(momentum=0.9, ...)``), else a
    function's qualified name or the object's type name; never an address."""
    text = repr(obj)
    if text.startswith("<") or " at 0x" in text:
        return getattr(obj, "__qualname__", None) or type(obj).__name__
    return text


def _declaring_nodes(job: "Job") -> dict[str, "Node"]:
    """lbn -> the ``input``/``variable`` node of a placeholder or variable the header lists (a node
    only when the header lists all its outputs)."""
    listed = {p.lbn for p in job.placeholders} | {v.lbn for v in job.variables.values()}
    return {lbn: node for node in job.nodes if node.op in ("input", "variable") and node.outputs
            and all(out in listed for out in node.outputs) for lbn in node.outputs}


def _keys_named(job: "Job") -> Iterator[str]:
    """Every string of the job's intents, side outputs, attributes and regularizers: the candidates for keys."""
    def strings(value: Any) -> Iterator[str]:
        if isinstance(value, str):
            yield value
        elif isinstance(value, dict):
            for item in value.values():
                yield from strings(item)
        elif isinstance(value, (list, tuple)):
            for item in value:
                yield from strings(item)

    for intent in job.intents:
        yield from strings(intent.payload)
    for side in job.side_outputs:
        yield side.consumer
    for node in job.nodes:
        yield from strings(node.attrs)
    for v in job.variables.values():
        if v.regularizer is not None:
            yield v.regularizer


def placed(node: "Node", job: "Job") -> str:
    """`` on 0:0-1``, `` on 0:0-1 (ranks 0-1)``, `` on ranks 0-1`` or nothing: where the node runs, as far as the job
    says (its placement scope, and the ranks a plugin mapped it to)."""
    ranks = job.ranks.get(node.name)
    where = ",".join(node.placement)
    if ranks is None:
        return f" on {where}" if where else ""
    text = ("rank " if len(ranks) == 1 else "ranks ") + _spans(ranks)
    return f" on {where} ({text})" if where else f" on {text}"


def _spans(numbers: "tuple[int, ...]") -> str:
    """``0-3``, ``0,2``, ``1``: sorted numbers with runs written as ranges."""
    runs: list[list[int]] = []
    for n in sorted(numbers):
        if runs and n == runs[-1][1] + 1:
            runs[-1][1] = n
        else:
            runs.append([n, n])
    return ",".join(str(a) if a == b else f"{a}-{b}" for a, b in runs)


def _layout(job: "Job", lbn: str) -> str:
    """`` S(0)`` / `` B`` / `` P`` after a spec: how the value lies over the ranks, when the job says."""
    layout = job.layouts.get(lbn)
    return f" {layout}" if layout is not None else ""


def _clip(text: str) -> str:
    return text if len(text) <= MAX_VALUE_CHARS else text[:MAX_VALUE_CHARS - 3] + "..."
