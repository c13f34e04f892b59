"""Data-dependent extents: values whose row count the data decide (argwhere, sync_dynamic_resize).

Legacy planned such a blob at its maximum shape and carried the actual shape at run time (a
dynamic blob). Here an op record says so with ``OpDef.shape.dynamic_extent``: its ``infer`` gives the
maximum, the planner gives it the max-sized buffer, and its kernel returns a view of the first rows
that hold data. Every node reading such a value, directly or through other nodes, *follows* it: its
kernel is built when a step first meets its inputs' actual shapes (shape inference again, reshape
targets realigned as for smaller mirrored feeds, ``flowjob_core.plan.dynamic``), its outputs in views of
the same arena slots, and kept per input-shape key. So no reader sees the padding rows, returned and
watched values come back with the actual rows, and a job without such ops gets its plan unchanged:
the planner only asks whether the job holds one.

A scatter into a traced shape (``tensor_scatter_nd_update`` into static params, ``scatter_nd``, the
gather gradient, ``unsorted_segment_sum``) follows its inputs but its outputs keep the traced shape,
so the rows stop there (``OpDef.shape.traced_shape_from``; legacy's hybrid embedding scatters rows argwhere
selected into a static table).
An op whose attributes fix a shape at trace time (``broadcast_to``, ``unbroadcast``) cannot follow:
the plan is refused, naming the job, the op, its source line and the data-dependent op; an
``unbroadcast`` that autodiff marks ``static_target`` (the gradient of a value whose shape is traced, a
weight broadcast over the selected rows) sums the rows into that shape, and they stop there. An op that
cannot take the actual shapes (a binary op whose other operand keeps the maximum) raises
``DynamicShapeError`` when the step meets them. In a train job the gradient rules take such shapes from
the blobs at each step (``GradContext.rows_from_data``), and a loss whose rows the data decide scales the
variable gradients by its element count at that step, as legacy's dynamic loss instance count did.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable

from flowjob_core.plan.actual_shapes import MAX_SPECIALISED, DynamicShapeError, SpecialisedArena, reshaped
from flowjob_core.ir.job import BlobSpec, Job, Node
from flowjob_core.ir.kernel import kernel_of
from flowjob_core.ir.opdef import KernelBuilder, KernelContext
from flowjob_core.plan.mirrored import TensorList

if TYPE_CHECKING:
    from flowjob_core.plugins.registry import Backend, Registries
    from flowjob_core.runtime.variables import VariableStore


class Followers:
    """The nodes of a plan that read data-dependent rows, and their kernels built per actual shape."""

    def __init__(self, job: Job, order: list[Node], backend: "Backend", registries: "Registries",
                 variables: "VariableStore", arena: Any, shared: dict[Any, Any]) -> None:
        self.job, self.backend, self.registries = job, backend, registries
        self.variables, self.shared = variables, shared
        self.arena = SpecialisedArena(arena)  # a view of each slot in the actual shape
        ops = registries.ops
        self.source: dict[int, str] = {}  # id(node) -> the data-dependent node whose rows reach it
        origin: dict[str, str] = {}
        for node in order:
            src = next((origin[i] for i in node.inputs if i in origin), None)
            if src is not None:
                self.source[id(node)] = src
                if node.op != "input" and ops[node.op].shape.fixed_shape and node.attrs.get("static_target"):
                    continue  # it sums the rows into its traced shape (a variable's gradient): they stop here
                if node.op != "input" and ops[node.op].shape.fixed_shape:
                    raise DynamicShapeError(
                        f"{self._where(node, src)}: the op's target shape {node.attrs.get('shape')} was fixed "
                        f"when the job was traced, so it cannot take the rows the data decide")
            through = ops[node.op].shape.traced_shape_from if node.op != "input" else None
            kept = through is not None and not any(node.inputs[k] in origin for k in through if k < len(node.inputs))
            if src is not None and kept:
                continue  # it follows its inputs' actual rows, but its outputs keep the traced shape
            if src is not None or (node.op != "input" and ops[node.op].shape.dynamic_extent):
                for lbn in node.outputs:
                    origin[lbn] = src if src is not None else node.name

    def follows(self, node: Node) -> bool:
        return id(node) in self.source

    def _where(self, node: Node, src: str) -> str:
        return (f"job {self.job.name!r}, op {node.name!r} ({node.op}) at {node.source}, reading the "
                f"data-dependent rows of {src!r}")

    def kernel(self, node: Node, builder: KernelBuilder) -> Callable[..., Any]:
        """The node's step callable: its kernel for the actual input shapes, built on first sight of them."""
        cache: dict[tuple[tuple[int, ...], ...], Callable[..., Any]] = {}
        build = self._builder(node, builder, cache)

        ops = self.registries.ops
        whole = node.op in ("return", "fetch") or ops[node.op].shape.takes_tensor_list
        where = self._where(node, self.source[id(node)])

        def run(*args: Any) -> Any:
            if not whole and any(type(a) is TensorList for a in args):  # other readers see the list's body
                args = tuple(a.body(where) if type(a) is TensorList else a for a in args)
            fn = cache.get(tuple([_shape_of(a) for a in args]))
            if fn is None:
                fn = build(args)
            return fn(*args)

        return run

    def _builder(self, node: Node, builder: KernelBuilder, cache: dict) -> Callable[[tuple], Callable[..., Any]]:
        job, ops = self.job, self.registries.ops
        declared = tuple(job.specs[i] for i in node.inputs)
        where = self._where(node, self.source[id(node)])
        arena, target_attr = self.arena, ops[node.op].shape.target_shape_attr

        def build(args: tuple) -> Callable[..., Any]:
            # a tensor list enters whole: its reader was built for the declared maximum
            ins = tuple(s if type(a) is TensorList else BlobSpec(tuple(a.shape), s.dtype)
                        for a, s in zip(args, declared))
            attrs = node.attrs
            outs: tuple[BlobSpec, ...] | None = None
            if target_attr is not None:
                target = reshaped(declared[0].shape, ins[0].shape, tuple(attrs[target_attr]),
                                  f"{where}, shapes {[s.shape for s in ins]}")
                if ins[0].size == 0:  # no rows selected: the op's own check wants positive sizes
                    target = tuple(0 if d == -1 else d for d in target)
                    outs = (BlobSpec(target, ins[0].dtype),)
                attrs = {**attrs, target_attr: target}
            if outs is None:
                try:
                    outs = tuple(ops[node.op].infer(ins, attrs))
                except Exception as exc:  # ShapeError and the plain checks ops make
                    raise DynamicShapeError(f"{where}: the op cannot take the actual shapes "
                                            f"{[s.shape for s in ins]}: {exc}") from None
            def out_buffer(k: int) -> Any:
                return arena.view(node.outputs[k], outs[k])

            ctx = KernelContext(self.backend.xp, self.backend, node.op, node.name, attrs, ins, outs, job.type,
                                self.variables.array, out_buffer, self.shared, ops=ops)
            fn = kernel_of(builder(ctx)).run  # its traits were read from the node's first build (the planner)
            if len(cache) >= MAX_SPECIALISED:
                del cache[next(iter(cache))]  # the oldest shape key
            cache[tuple([_shape_of(a) for a in args])] = fn
            return fn

        return build


def _shape_of(value: Any) -> Any:
    """A value's shape, for a kernel cache key; a tensor list's: its items' shapes."""
    if type(value) is TensorList:
        return tuple(item.shape for item in value)
    return value.shape
