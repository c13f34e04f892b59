"""Dynamic blobs: mirrored placeholders fed arrays smaller than declared, and tensor lists.

Legacy mirrored placeholders (``tp.ListNumpy.Placeholder``, ``flow.MirroredTensorDef``,
``tp.ListListNumpy.Placeholder``) declare a *maximum* shape: a fed array needs the same rank
and at most the declared number of elements. The job is traced and planned once, for the
declared shapes. A call whose feeds are smaller runs shape inference again on the planned
job for the actual shapes and builds a step of the same nodes whose buffers are views into
the max-sized arena slots (``Specialised``); that step is cached per actual-shape key, so a
batch size seen before costs one dict lookup. A call with the declared shapes runs the
planned step itself.

A train job's planned step cannot be specialised so: its gradient graph fixes shapes when the job is
planned (``unbroadcast``/``broadcast_to`` targets, the 1/N loss scale of the variable gradients), where
legacy's ``*_like`` ops and dynamic loss-instance count read them at run time. So a train call with
smaller feeds runs a plan made for those shapes: the traced job inferred again for them (``retraced``),
through every pass (autodiff builds the gradients and scale of the fed shapes), planned with its own
buffers and cached per actual-shape key as the specialised steps are. Variables, optimizer slots and the
train step are the session's, shared by every plan of the job; a seeded random op in a plan of another
shape draws its own stream, as in a specialised predict step.

A tensor list (``tp.ListListNumpy`` fed several arrays per device, legacy
``MirroredTensorListDef``) runs the step once per list element, each element being one
dynamic instance, and gathers every result as a ``TensorList``: element-wise work gives what
legacy computed on the list's body; ops that mix the elements (a reduction over axis 0) see
one element at a time. A tensor list read only by ops that take it whole (``OpDef.shape.takes_tensor_list``:
``tensor_list_to_tensor_buffer``, ``tensor_list_split``) is fed as one ``TensorList`` instead, once.
"""
from __future__ import annotations

import dataclasses
import functools
from typing import TYPE_CHECKING, Any, Callable, Sequence

from flowjob_core.plan import numerics
from flowjob_core.errors import JobArgumentError
from flowjob_core.ir.job import BlobSpec, Job, Node
from flowjob_core.plan.mirrored import PerDevice, TensorList
from flowjob_core.plan.actual_shapes import MAX_SPECIALISED, DynamicShapeError, SpecialisedArena, reshaped
from flowjob_core.plan.planner import Plan, build_plan

if TYPE_CHECKING:
    from flowjob_core.ir.bindings import Bindings
    from flowjob_core.plugins.registry import Registries
    from flowjob_core.runtime.variables import VariableStore

Step = Callable[[list[Any]], tuple[tuple[Any, ...], tuple[Any, ...]]]


def _apply_deep(fn: Callable[[Any], Any], value: Any) -> Any:
    kind = type(value)
    if kind is PerDevice or kind is TensorList:
        return kind(_apply_deep(fn, v) for v in value)
    return fn(value)


def deep(fn: Callable[[Any], Any]) -> Callable[[Any], Any]:
    """``fn`` applied to every array of a value, keeping ``PerDevice`` and ``TensorList`` nesting.

    A partial of a module-level function, not a closure calling itself: such a closure is a reference
    cycle, and one made per call (a device backend's transfers) leaves garbage for the cycle collector."""
    return functools.partial(_apply_deep, fn)


class DynamicRunner:
    """The step of a job with mirrored placeholders: the planned step for declared shapes, else a specialised one.

    ``run`` is a generated function comparing each feed's shape with its placeholder's declared
    one and calling the planned step when they all agree, so a call with the declared shapes
    pays one tuple comparison per placeholder (a tensor list's ``shape`` is None and never agrees).
    """

    def __init__(self, plan: Plan, registries: "Registries", variables: "VariableStore",
                 bindings: "Bindings", replan: Callable[[tuple], Plan] | None = None) -> None:
        """``replan(shapes)``: a plan of the job made for other fed shapes (a train job's global function gives
        one, ``JobFunction.plan_for_shapes``); without it, smaller feeds specialise the planned step."""
        self.plan = plan
        self.replan = replan
        self.registries = registries
        self.variables = variables
        self.bindings = bindings
        self.specialised: dict[tuple, Plan] = {}
        self._reach: dict[frozenset[int], tuple[list[bool], list[bool]]] = {}
        self._whole: dict[frozenset[int], bool] = {}
        declared = [p.spec.shape for p in plan.job.placeholders]
        test = " and ".join(f"feeds[{i}].shape == {shape!r}" for i, shape in enumerate(declared)) or "True"
        namespace = {"declared": plan.run, "other": self._other}
        exec(f"def run(feeds):\n    if {test}:\n        return declared(feeds)\n    return other(feeds)\n",
             namespace)
        self.run: Step = namespace["run"]

    def __call__(self, feeds: list[Any]) -> tuple[tuple[Any, ...], tuple[Any, ...]]:
        return self.run(feeds)

    def _other(self, feeds: list[Any]) -> tuple[tuple[Any, ...], tuple[Any, ...]]:
        listed = frozenset(i for i, value in enumerate(feeds) if type(value) is TensorList)
        if listed and not self._read_whole(listed):
            return self._per_element(feeds)
        # a tensor list read whole enters as it is: the ops reading it were built for its declared maximum
        placeholders = self.plan.job.placeholders
        key = tuple(placeholders[i].spec.shape if i in listed else value.shape for i, value in enumerate(feeds))
        if listed and key == tuple(p.spec.shape for p in placeholders):
            return self.plan.run(feeds)
        plan = self.specialised.get(key)
        if plan is None:
            plan = self._specialise(key)
        return plan.run(feeds)

    def _specialise(self, key: tuple) -> Plan:
        if len(self.specialised) >= MAX_SPECIALISED:
            del self.specialised[next(iter(self.specialised))]
        if self.replan is not None:
            plan = self.replan(key)
        else:
            plan = specialise(self.plan, key, self.registries, self.variables, self.bindings)
        self.specialised[key] = plan
        return plan

    def _read_whole(self, listed: frozenset[int]) -> bool:
        """Whether only ops that take a tensor list whole (``OpDef.shape.takes_tensor_list``) read the tensor-list
        placeholders ``listed``."""
        known = self._whole.get(listed)
        if known is None:
            lbns = {self.plan.job.placeholders[i].lbn for i in listed}
            ops = self.registries.ops
            readers = [node for node in self.plan.order if node.op != "input" and lbns.intersection(node.inputs)]
            known = self._whole[listed] = bool(readers) and all(ops[n.op].shape.takes_tensor_list for n in readers)
        return known

    def _per_element(self, feeds: list[Any]) -> tuple[tuple[Any, ...], tuple[Any, ...]]:
        job = self.plan.job
        lengths = {len(f) for f in feeds if type(f) is TensorList}
        lists = [p.param for p, f in zip(job.placeholders, feeds) if type(f) is TensorList]
        if len(lengths) > 1:
            raise JobArgumentError(f"global function {job.name!r}: the tensor-list arguments {sorted(set(lists))} "
                                   f"hold different numbers of arrays on one device ({sorted(lengths)})")
        if job.type == "train":
            raise JobArgumentError(f"global function {job.name!r}, argument {lists[0]!r}: a train job takes one "
                                   f"array per device in a tensor list (each element would update the variables)")
        run = self.run
        results = [run([f[j] if type(f) is TensorList else f for f in feeds]) for j in range(lengths.pop())]
        listed = frozenset(i for i, f in enumerate(feeds) if type(f) is TensorList)
        per_return, per_side = self._reached(listed)
        returns = tuple(TensorList(r[0][i] for r in results) if reached else results[0][0][i]
                        for i, reached in enumerate(per_return))
        sides = tuple(TensorList(r[1][i] for r in results) if reached else results[0][1][i]
                      for i, reached in enumerate(per_side))
        return returns, sides

    def _reached(self, listed: frozenset[int]) -> tuple[list[bool], list[bool]]:
        """Which returns and side outputs depend on the tensor-list placeholders ``listed`` (the others
        are the same for every element and come back once)."""
        known = self._reach.get(listed)
        if known is None:
            job = self.plan.job
            reached = {job.placeholders[i].lbn for i in listed}
            for node in self.plan.order:
                if any(i in reached for i in node.inputs):
                    reached.update(node.outputs)
            known = self._reach[listed] = ([lbn in reached for lbn in job.returns],
                                           [s.lbn in reached for s in job.side_outputs])
        return known


def specialise(plan: Plan, shapes: Sequence[tuple[int, ...]], registries: "Registries", variables: "VariableStore",
               bindings: "Bindings") -> Plan:
    """The plan's nodes for the fed ``shapes`` (one per placeholder), in views of the plan's arena slots."""
    job = plan.job
    if job.type == "train":
        p = next(p for p, shape in zip(job.placeholders, shapes) if p.spec.shape != tuple(shape))
        raise JobArgumentError(
            f"global function {job.name!r}, argument {p.param!r}: a train job needs the declared shape "
            f"{p.spec.shape} on every device, found {shapes[job.placeholders.index(p)]} (this plan's gradient graph "
            f"and 1/N loss scale are fixed; a train job's global function plans its job again for other shapes)")
    specs, order = actual_specs(job, plan.order, shapes, registries)
    replaced = {id(old): new for old, new in zip(plan.order, order) if old is not new}
    actual = dataclasses.replace(job, specs=specs, nodes=[replaced.get(id(n), n) for n in job.nodes])
    with numerics.planning(plan.checks_numerics):  # as the declared-shape plan does
        return build_plan(actual, plan.backend, registries, variables, bindings,
                          reuse=(order, SpecialisedArena(plan.arena)))


def actual_specs(job: Job, order: Sequence[Node], shapes: Sequence[tuple[int, ...]], registries: "Registries"
                 ) -> tuple[dict[str, BlobSpec], list[Node]]:
    """Shape inference again over ``order`` (the job's nodes, producers first) for the fed ``shapes`` (one per
    placeholder): every value's spec, and the nodes (a reshape whose target was traced realigned to its rows).
    An op that cannot follow (a target shape fixed at trace time, an inference that fails) is an error naming it."""
    changed = {p.lbn: p for p, shape in zip(job.placeholders, shapes) if p.spec.shape != tuple(shape)}
    specs = dict(job.specs)
    origin: dict[str, frozenset[str]] = {}  # value -> the placeholders whose fed size reaches it
    for p, shape in zip(job.placeholders, shapes):
        if p.lbn in changed:
            specs[p.lbn] = BlobSpec(tuple(shape), p.spec.dtype)
            origin[p.lbn] = frozenset((p.param or p.name,))
    ops = registries.ops
    nodes: list[Node] = []
    for node in order:
        reached = frozenset().union(*(origin.get(i, frozenset()) for i in node.inputs))
        if node.op == "input" or not reached:
            nodes.append(node)
            continue
        ins = tuple(specs[i] for i in node.inputs)
        where = (f"job {job.name!r}, op {node.name!r} ({node.op}) at {node.source}, fed from dynamic "
                 f"placeholder(s) {sorted(reached)} with shapes {[s.shape for s in ins]}")
        if ops[node.op].shape.fixed_shape:
            raise DynamicShapeError(f"{where}: the op's target shape {node.attrs.get('shape')} was fixed at "
                                    f"trace time, so it cannot take a dynamic blob; feed the declared shape")
        attrs, target = node.attrs, ops[node.op].shape.target_shape_attr
        if target is not None:
            attrs = {**attrs, target: reshaped(tuple(job.specs[node.inputs[0]].shape), ins[0].shape,
                                               tuple(attrs[target]), where)}
        try:
            outs = ops[node.op].infer(ins, attrs)
        except Exception as exc:  # ShapeError and the checks ops make with plain exceptions
            raise DynamicShapeError(f"{where}: the op cannot take this dynamic blob: {exc}") from None
        if len(outs) != len(node.outputs):
            raise DynamicShapeError(f"{where}: shape inference gave {len(outs)} outputs, the job has "
                                    f"{len(node.outputs)}")
        for lbn, spec in zip(node.outputs, outs):
            specs[lbn] = spec
            origin[lbn] = reached
        nodes.append(dataclasses.replace(node, attrs=attrs) if attrs is not node.attrs else node)
    return specs, nodes


def retraced(job: Job, shapes: Sequence[tuple[int, ...]], registries: "Registries") -> Job:
    """The traced job (before any pass) as if its placeholders had been declared with the fed ``shapes``: what a
    train job is planned from for a smaller feed, so that autodiff builds the gradient graph and the loss
    scale of the fed shapes."""
    specs, nodes = actual_specs(job, job.nodes, shapes, registries)
    placeholders = [dataclasses.replace(p, spec=specs[p.lbn]) for p in job.placeholders]
    fed = {p.name: p.spec.shape for p in placeholders}
    nodes = [dataclasses.replace(n, attrs={**n.attrs, "shape": fed[n.name]}) if n.op == "input" and n.name in fed
             else n for n in nodes]
    return dataclasses.replace(job, placeholders=placeholders, specs=specs, nodes=nodes)
