"""The ``repeat-acc`` pass: legacy's time shapes, unrolled into a plain graph.

Legacy ran the ops downstream of ``flow.repeat(x, n)`` n times within one call and ``flow.acc(y, n)``
summed n consecutive ticks of ``y`` into one value. This pass runs in the ``transform`` phase, after
autodiff (whose ``repeat``/``acc`` gradients make the backward region tick too) and the optimizer.
It counts the ticks of every value in job order:

* placeholders, variables and random ops without inputs tick once per call;
* ``constant`` and ``range`` (and what is computed from them alone, without a seed attribute) are the
  same in every tick, so they join any region (legacy would have refused them);
* ``repeat(v, n)`` ticks n times per tick of ``v``; ``acc(v, n)`` once per n ticks of ``v`` (a count
  that does not divide is an error);
* ``unpack(v, n)`` ticks n times per tick of ``v`` (each tick one slice of axis 0); ``pack(v, n)`` once per
  n ticks of ``v``, like ``acc``;
* every other op needs its inputs to tick equally: a mismatch is an ``OpBuildError`` naming the job,
  the op, its source line and both inputs' counts.

Then each node whose outputs tick T > 1 times becomes T nodes: clone 0 keeps the node's name and
outputs (so autodiff's ``ctx.grads`` and the like stay valid), clone k is ``<name>-tick<k>`` and reads clone k of
its inputs. A ``repeat`` clone is a view of its input clone, read by n ticks; an ``acc`` of n > 1
ticks becomes an ``add_n`` of its n input clones under the acc's own name. Nested repeats multiply
(tick t*n + j of ``repeat(v, n)`` is tick t of ``v``), and ``acc`` sums consecutive ticks, so an acc
of the inner count undoes the inner repeat, as legacy's time-shape axes did.
An ``unpack`` clone k reads part ``k % n`` (rows of axis 0) of its input's tick ``k // n`` (the record
takes that part as its ``part`` attribute, a view); a ``pack`` of n > 1 ticks becomes a ``concat`` along
axis 0 of its n input clones, so ``pack(f(unpack(x, n)), n)`` is ``f(x)`` for an ``f`` acting on rows.

Random ops in a region draw independently per tick: unseeded clones each get fresh entropy; a seeded
op's clone 0 keeps the seed (tick 0 draws what the op drew unrepeated) and clone k takes a seed
derived from (seed, k), so every tick differs and the whole call is reproducible.

Returned and watched values must tick once per call (accumulate them with ``flow.acc`` first); a loss
may tick n times: its n ticks' gradients add up through ``repeat``'s gradient, which is ``acc``.
"""
from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from flowjob_core import OpBuildError
from flowjob_core.ir.job import Job, Node

# input-less ops whose value is the same in every tick (no state, no randomness)
_TIMELESS_SOURCES = frozenset({"constant", "range"})
# the ops that change how often a value ticks; a job without them is left as traced
_TIME_OPS = frozenset({"repeat", "acc", "unpack", "pack"})


def _times(count: int) -> str:
    return "once" if count == 1 else f"{count} times"


class _Unroller:
    def __init__(self, job: Job) -> None:
        self.job = job
        self.ticks: dict[str, int | None] = {}  # lbn -> ticks per call; None: the same value in every tick
        self.clones: dict[str, list[str]] = {}  # lbn -> its value in each tick (only for values ticking > 1)
        self.tick_names: dict[str, list[str]] = {}  # node name -> the names of its clones, one per tick
        self.names = {n.name for n in job.nodes}
        self.nodes: list[Node] = []
        self.producer = {out: n for n in job.nodes for out in n.outputs}

    def value(self, lbn: str, tick: int) -> str:
        clones = self.clones.get(lbn)
        return clones[tick] if clones is not None else lbn

    def where(self, node: Node) -> str:
        return f"job {self.job.name!r}, op {node.name!r} ({node.op}) at {node.source or '<unknown>'}"

    # one node --------------------------------------------------------------------------------------
    def visit(self, node: Node) -> None:
        if node.op == "repeat":
            self.repeat(node)
        elif node.op == "acc":
            self.gather(node, "max_acc_num", "add_n", {})
        elif node.op == "unpack":
            self.unpack(node)
        elif node.op == "pack":
            self.gather(node, "pack_num", "concat", {"axis": 0})
        else:
            self.plain(node)

    def input_ticks(self, node: Node) -> int | None:
        if not node.inputs:
            return None if node.op in _TIMELESS_SOURCES else 1
        counted = [(lbn, self.ticks[lbn]) for lbn in node.inputs if self.ticks[lbn] is not None]
        if not counted:
            # computed from timeless values alone; a seeded op draws per tick, so it ticks once
            return 1 if "seed" in node.attrs else None
        first_lbn, first = counted[0]
        for lbn, count in counted[1:]:
            if count != first:
                raise OpBuildError(
                    f"{self.where(node)}: its inputs tick at different rates within one call: {first_lbn!r} "
                    f"{_times(first)}, {lbn!r} {_times(count)} (flow.repeat the other inputs too, "
                    f"or flow.acc the repeated one first)")
        return first

    def plain(self, node: Node) -> None:
        ticks = self.input_ticks(node)
        for lbn in node.outputs:
            self.ticks[lbn] = ticks
        if ticks is None or ticks == 1:
            self.nodes.append(node)
            return
        self.unroll(node, ticks, lambda k: tuple(self.value(lbn, k) for lbn in node.inputs))

    def repeat(self, node: Node) -> None:
        n = int(node.attrs["repeat_num"])
        (src,) = node.inputs
        before = self.ticks[src] or 1
        (out,) = node.outputs
        self.ticks[out] = before * n
        if before == 1:
            self.nodes.append(node)
            instances = [out]
        else:
            instances = [clone.outputs[0] for clone in self.unroll(node, before, lambda k: (self.value(src, k),))]
        if before * n > 1:
            self.clones[out] = [lbn for lbn in instances for _ in range(n)]

    def unpack(self, node: Node) -> None:
        n = int(node.attrs["unpack_num"])
        (src,) = node.inputs
        before = self.ticks[src] or 1
        (out,) = node.outputs
        self.ticks[out] = before * n
        if before * n == 1:
            self.nodes.append(node)
            return
        # tick t*n + j is part j (rows j*m .. (j+1)*m) of the input's tick t
        self.unroll(node, before * n, lambda k: (self.value(src, k // n),),
                    attrs=lambda k: {**node.attrs, "part": k % n})

    def gather(self, node: Node, count_attr: str, op: str, attrs: dict) -> None:
        """``acc``/``pack`` of n ticks: one value per n consecutive input ticks, as ``op`` of those n values."""
        n = int(node.attrs[count_attr])
        (src,) = node.inputs
        before = self.ticks[src] or 1
        if before % n:
            origin = self.producer.get(src)
            hint = f" (from {origin.name!r} at {origin.source})" if origin is not None else ""
            raise OpBuildError(
                f"{self.where(node)}: {count_attr}={n} does not divide the {before} ticks per call of its input "
                f"{src!r}{hint}")
        after = before // n
        (out,) = node.outputs
        self.ticks[out] = after

        def inputs(k: int) -> tuple[str, ...]:
            return tuple(self.value(src, k * n + j) for j in range(n))

        if n > 1:  # the sum (acc) or the concatenation (pack) of n ticks, under the node's own name
            node = dataclasses.replace(node, op=op, attrs=dict(attrs))
        if after == 1:
            node.inputs = inputs(0)
            self.nodes.append(node)
        else:
            self.unroll(node, after, inputs)

    # clones ----------------------------------------------------------------------------------------
    def unroll(self, node: Node, count: int, inputs: Any, attrs: Any = None) -> list[Node]:
        """``count`` copies of ``node``, copy k reading ``inputs(k)`` (with ``attrs(k)`` if given); copy 0
        keeps the node's name and outputs."""
        made = []
        for k in range(count):
            if k == 0:
                clone = dataclasses.replace(node, inputs=inputs(0), attrs=attrs(0) if attrs else dict(node.attrs))
            else:
                name = self.fresh_name(f"{node.name}-tick{k}")
                outputs = tuple(name + lbn[len(node.name):] for lbn in node.outputs)
                for old, new in zip(node.outputs, outputs):
                    self.job.specs[new] = self.job.specs[old]
                clone = dataclasses.replace(node, name=name, inputs=inputs(k), outputs=outputs,
                                            attrs=self.own_forward(attrs(k) if attrs else _tick_attrs(node.attrs, k),
                                                                   k, count))
            made.append(clone)
            self.nodes.append(clone)
        self.tick_names[node.name] = [clone.name for clone in made]
        for i, lbn in enumerate(node.outputs):
            self.clones[lbn] = [clone.outputs[i] for clone in made]
        return made

    def own_forward(self, attrs: dict, k: int, count: int) -> dict:
        """A gradient node whose ``forward`` attribute names its forward node (to reuse that node's work
        within the step, e.g. a label split or conv columns) must name the forward of its own tick."""
        forward = attrs.get("forward")
        if forward is None:
            return attrs
        ticks = self.tick_names.get(forward)
        if ticks is not None and len(ticks) == count:
            attrs["forward"] = ticks[k]
        else:  # no forward of this tick to reuse: the kernel computes what it needs itself
            del attrs["forward"]
        return attrs

    def fresh_name(self, stem: str) -> str:
        name, i = stem, 1
        while name in self.names:
            name, i = f"{stem}_{i}", i + 1
        self.names.add(name)
        return name

    # results ---------------------------------------------------------------------------------------
    def check_fetched(self) -> None:
        fetched = [(lbn, "returns") for lbn in self.job.returns]
        fetched += [(s.lbn, f"watches ({s.label or s.consumer})") for s in self.job.side_outputs]
        for lbn, what in fetched:
            count = self.ticks.get(lbn)
            if count is not None and count > 1:
                origin = self.producer.get(lbn)
                if origin is not None and origin.op == "return":  # name the value the body returned
                    lbn = origin.inputs[0]
                    origin = self.producer.get(lbn)
                hint = f", computed by {origin.name!r} at {origin.source}" if origin is not None else ""
                raise OpBuildError(
                    f"job {self.job.name!r} {what} {lbn!r}{hint}, which ticks {count} times per call; a result "
                    f"ticks once: sum its ticks with flow.acc(blob, {count}) or join them with "
                    f"flow.pack(blob, {count}) first")


def _tick_attrs(attrs: dict, k: int) -> dict:
    """The attributes of tick ``k``'s clone: a seeded random op gets a seed of its own per tick."""
    out = dict(attrs)
    seed = out.get("seed")
    if isinstance(seed, (int, np.integer)) and not isinstance(seed, bool):
        out["seed"] = int(np.random.SeedSequence([int(seed) % 2**63, k]).generate_state(1)[0])
    return out


def run(job: Job, ctx: Any) -> None:
    """Unroll every repeated region of ``job`` (nothing to do, and nothing done, without repeat, acc, unpack
    or pack)."""
    if not any(node.op in _TIME_OPS for node in job.nodes):
        return
    unroller = _Unroller(job)
    for node in job.nodes:
        unroller.visit(node)
    unroller.check_fetched()
    job.nodes = unroller.nodes
