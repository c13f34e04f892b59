"""The op record: inference, gradient rule and a kernel written once against ``xp``, in one place."""
from __future__ import annotations

import dataclasses
import functools
import warnings
from dataclasses import dataclass, field, fields
from typing import TYPE_CHECKING, Any, Callable, Sequence, TypeVar

import numpy as np

from flowjob_core.ir.job import BlobSpec
from flowjob_core.ir.layout import LayoutRule

if TYPE_CHECKING:
    from flowjob_core.passes.autodiff import GradContext
    from flowjob_core.ir.bindings import Bindings

InferFn = Callable[[Sequence[BlobSpec], dict], Sequence[BlobSpec]]
"""``infer(inputs, attrs) -> outputs``: raise ShapeError (or ValueError) with a plain message."""

KernelBuilder = Callable[["KernelContext"], Callable[..., Any]]
"""Called once per node when a plan is built; returns the step callable ``run(*inputs) -> out | tuple``, or a
``flowjob_core.ir.kernel.Kernel`` holding it with its traits (``host_state``, ``gated``)."""

FlopsFn = Callable[[Sequence[BlobSpec], Sequence[BlobSpec], dict], float]
"""``flops(inputs, outputs, attrs)``: the arithmetic one run of the kernel does, roughly (``Compute.flops``)."""

_T = TypeVar("_T")

GradRule = Callable[["GradContext"], Sequence[Any]]
"""Emits graph nodes for the input gradients; returns one Blob or None per input."""


@dataclass(frozen=True)
class Elementwise:
    """An elementwise op's arithmetic, declared once: one call ``xp.<ufunc>(operands..., out=out)``.

    The op's kernel is built from it, and the fusion pass evaluates the op as a step of an
    ``elementwise_chain`` with the very same call, so fused results are bitwise the unfused ones.

    ``ufunc``: the name of the array module's ufunc (``"maximum"``, ``"greater"``).
    ``arity``: how many blob operands it takes (1 or 2), in the op's input order.
    ``scalar``: for a unary op, the name of the attribute holding a Python number that enters
    the call as a second operand (``scalar_add``: ``"scalar"``); ``fixed``: a number the op
    itself fixes instead (relu: ``maximum(x, 0)``). Either enters as a numpy scalar of the blob
    operand's dtype, so the call never promotes (float32 stays float32) and CuPy accepts it.
    ``scalar_first``: the number precedes the blob (``scalar - x``).
    """

    ufunc: str
    arity: int = 1
    scalar: str | None = None
    fixed: int | float | None = None
    scalar_first: bool = False

    def __post_init__(self) -> None:
        if self.arity not in (1, 2):
            raise ValueError(f"elementwise ufunc {self.ufunc!r}: arity must be 1 or 2, got {self.arity!r}")
        if self.scalar is not None and self.fixed is not None:
            raise ValueError(f"elementwise ufunc {self.ufunc!r}: a scalar attribute and a fixed number exclude "
                             f"each other")
        if self.has_constant and self.arity != 1:
            raise ValueError(f"elementwise ufunc {self.ufunc!r}: a number operand needs arity 1")
        if self.scalar_first and not self.has_constant:
            raise ValueError(f"elementwise ufunc {self.ufunc!r}: scalar_first without a scalar or fixed number")

    @property
    def has_constant(self) -> bool:
        return self.scalar is not None or self.fixed is not None

    def constant(self, attrs: dict, dtype: Any) -> Any:
        """The number operand as a numpy scalar of ``dtype`` (the blob operand's), or None."""
        if self.scalar is not None:
            return np.dtype(dtype).type(attrs[self.scalar])
        if self.fixed is not None:
            return np.dtype(dtype).type(self.fixed)
        return None

    def operands(self, blobs: Sequence[str], constant: str) -> list[str]:
        """The call's operands in order: the blob operands with ``constant`` placed where it goes
        (for code that writes the call out, like the chain kernel)."""
        if not self.has_constant:
            return list(blobs)
        return [constant, *blobs] if self.scalar_first else [*blobs, constant]

    def kernel(self, ctx: "KernelContext") -> Callable[..., Any]:
        """The reference kernel: the one call, into the planned output buffer."""
        ufunc, out = getattr(ctx.xp, self.ufunc), ctx.out(0)
        if self.arity == 2:
            return lambda a, b: ufunc(a, b, out=out)
        c = self.constant(ctx.attrs, ctx.inputs[0].dtype)
        if c is None:
            return lambda x: ufunc(x, out=out)
        if self.scalar_first:
            return lambda x: ufunc(c, x, out=out)
        return lambda x: ufunc(x, c, out=out)


AMP_CLASSES = ("white", "gray", "clear", "black")
"""The classes an op declares for automatic mixed precision (``Compute.amp``), legacy's four lists."""


def _positions(op: str, field_name: str, value: tuple[int, ...] | None) -> None:
    """Input positions (``Effects.mutates``, ``ShapeTraits.traced_shape_from``) are a tuple of ints >= 0."""
    if value is None:
        return
    if not isinstance(value, tuple) or not all(type(i) is int and i >= 0 for i in value):
        raise ValueError(f"op {op!r}: {field_name} must be a tuple of input positions (ints >= 0), got {value!r}")


def _names(op: str, field_name: str, value: tuple[str, ...] | None) -> None:
    """Argument names (``LegacyFace.input_names`` and the like) are a tuple of distinct strings."""
    if value is None:
        return
    if not isinstance(value, tuple) or not all(isinstance(n, str) and n for n in value):
        raise ValueError(f"op {op!r}: {field_name} must be a tuple of names, got {value!r}")
    twice = sorted({n for n in value if value.count(n) > 1})
    if twice:
        raise ValueError(f"op {op!r}: {field_name} names {', '.join(map(repr, twice))} twice")


@dataclass(frozen=True)
class Compute:
    """How an op is computed: its precision class, its cost, its layouts on several ranks, its host threads.

    ``amp``: the op's class under automatic mixed precision (``enable_auto_mixed_precision``), one of
    ``AMP_CLASSES``, as legacy's lists sorted ops: "white" (gains most from float16, GEMM-like: always in
    float16), "gray" (elementwise and normalizing: float16 between white ops), "clear" (only moves
    data: follows its float16 neighbours), "black" (stays float32). None: not declared, which the pass
    treats as "black"; the ops package's tests list the ops taking floating inputs that declare none.
    ``flops(inputs, outputs, attrs)``: about how many arithmetic operations one run takes, from the specs
    (GEMM-like ops); the planner's inter-op schedule weighs nodes by it and by the bytes they touch.
    None (the default): the node's time follows the bytes it reads and writes.
    ``layouts``: the layout signatures the op can run under on several ranks (``flowjob_core.ir.layout``):
    ``layouts(input_specs, attrs) -> [Signature, ...]``, best first. None (the default): an elementwise op
    splits along any axis, any other runs whole (every input gathered, the same work on every rank).
    ``intended_inf``: the op makes infinities on purpose where its attributes or inputs ask (a mask's
    ``-inf`` fill, ``-inf`` padding before a softmax, a constant of ``-inf``): the numerics check lets the
    Inf it makes through (NaN still stops the step; ``flowjob_core/plan/numerics.py``).
    ``host_split``: its kernels on a host backend cut their own work into parts over the host threads
    (convolutions, pooling). A plan holding such a node keeps BLAS to one thread per caller and cuts its large
    matrix products over the host threads too (``flowjob_core.backends.host_gemm``): OpenBLAS's idle workers
    spin on the cores for a while after each threaded call, and took the cores those parts needed.
    ``bitwise_as_parts``: a fused op whose outputs are bitwise those of the ops it replaces (an elementwise chain
    runs the same ufunc calls, a matmul with its bias the same matmul, bias_add and relu calls on one buffer):
    an eager body that computed those ops' outputs already is not run again for such a node
    (``flowjob_core.api.eager.remaining_job``).
    """

    amp: str | None = None
    flops: FlopsFn | None = None
    layouts: LayoutRule | None = None
    intended_inf: bool = False
    host_split: bool = False
    bitwise_as_parts: bool = False

    def check(self, op: str) -> None:
        """Raise ValueError naming ``op`` where a field holds what it cannot."""
        if self.amp is not None and self.amp not in AMP_CLASSES:
            raise ValueError(f"op {op!r}: amp must be None or one of {', '.join(AMP_CLASSES)}, got {self.amp!r}")


@dataclass(frozen=True)
class Effects:
    """What an op does besides computing its outputs, and how that binds where and when it runs.

    ``view``: outputs may alias input 0 (reshape); the planner extends that buffer's lifetime.
    ``mutates``: positions of inputs written in place (optimizer updates); such nodes run after
    every other reader of those values in a step.
    ``effect``: dead-code elimination keeps the node even when nothing reads its outputs.
    ``ordered``: the node runs on the step's own thread, in schedule order with the plan's other ordered
    and ``effect`` nodes, never beside them on another thread (MPI collectives: every rank must issue
    them in one order).
    ``cpu_only``: legacy's ``REGISTER_CPU_ONLY_USER_OP``: the node is placed on the cpu whatever the placement
    scope names, so its outputs' ``parallel_conf.device_tag()`` is ``"cpu"`` (the session's backend runs it,
    as every node).
    ``host_state``: the kernel reads or changes state on the host each call (a schedule evaluated in Python, a
    value read back from the device). A backend that records a step once and replays it (CUDA graphs,
    ``flowjob_core.plan.pieces``) runs such a node live, between recorded pieces, every step. Whether a node
    runs live is decided in one place, ``flowjob_core.ir.kernel.runs_live``: this mark, ``ordered`` and
    ``cpu_only``, a builder that drew a random stream (``KernelContext.rng``), and the built kernel's own word
    (``Kernel.host_state``), which overrides the mark, the stream and ``ordered`` (``effect`` alone is no such mark: a
    returned value's copy or a variable's assignment is device work).
    """

    view: bool = False
    mutates: tuple[int, ...] = ()
    effect: bool = False
    ordered: bool = False
    cpu_only: bool = False
    host_state: bool = False

    def check(self, op: str) -> None:
        """Raise ValueError naming ``op`` where a field holds what it cannot."""
        _positions(op, "mutates", self.mutates)


@dataclass(frozen=True)
class ShapeTraits:
    """How an op's output shapes relate to its inputs beyond ``infer``: data-dependent rows, lists, devices.

    ``dynamic_extent``: how many leading rows of output 0 hold data depends on the input values
    (argwhere): ``infer`` gives the maximum, the kernel returns a view of the first rows of its
    planned buffer, and the planner rebuilds every reader for the actual shape
    (``flowjob_core/plan/extent.py``).
    ``takes_tensor_list``: the op reads a tensor list whole (legacy's tensor-list ops): a tensor-list argument
    read only by such ops is fed to the step as one ``TensorList`` instead of running the step once per
    item (``flowjob_core/plan/dynamic.py``).
    ``traced_shape_from``: the output keeps its traced shape whatever rows its inputs have (a scatter
    into a fixed shape, a segment sum into ``num_segments`` rows): data-dependent rows stop there
    unless they come through one of these input positions (tensor_scatter_nd_*: the params, 0).
    None (the default): the output follows its inputs' rows.
    ``fixed_shape``: the attribute ``shape`` holds a target shape taken from the traced shapes
    (broadcast_to, unbroadcast): the op cannot follow inputs whose rows differ from the traced
    ones (a dynamic placeholder fed fewer rows, a rank's share of the batch), which would be
    broadcast back to the traced size instead, so those paths refuse it naming the op.
    ``parallel_num_attr``: the name of an attribute the tracer sets to the number of devices the node's
    placement names (legacy's ``parallel_num``), for an op whose logical value is made of one piece per device
    (legacy's physical inference); None (the default): the op does not depend on it.
    ``target_shape_attr``: the attribute holding the output's shape as traced, which follows the input's rows
    (reshape's ``shape``): a path that runs the op on other rows than the traced ones (a dynamic placeholder, a
    data-dependent extent) rewrites it for the actual input (``flowjob_core.plan.dynamic.reshaped``) before
    inferring. None (the default): the attributes hold no such shape.
    """

    dynamic_extent: bool = False
    takes_tensor_list: bool = False
    traced_shape_from: tuple[int, ...] | None = None
    fixed_shape: bool = False
    parallel_num_attr: str | None = None
    target_shape_attr: str | None = None

    def check(self, op: str) -> None:
        """Raise ValueError naming ``op`` where a field holds what it cannot."""
        _positions(op, "traced_shape_from", self.traced_shape_from)
        for name in ("parallel_num_attr", "target_shape_attr"):
            value = getattr(self, name)
            if value is not None and not (isinstance(value, str) and value):
                raise ValueError(f"op {op!r}: {name} must be None or an attribute name, got {value!r}")
        if self.fixed_shape and self.target_shape_attr is not None:
            raise ValueError(f"op {op!r}: fixed_shape (a shape that cannot follow the rows) and target_shape_attr "
                             f"(a shape rewritten to follow them) exclude each other")


@dataclass(frozen=True)
class LegacyFace:
    """The names legacy OneFlow gave the op and its arguments, which the compatibility face accepts.

    ``name_prefix``: the start of the node names the tracer makes (``Relu_3``); "" (the default): the op's
    name with each ``_``-separated part capitalised (``add_n`` -> ``AddN``), filled in by ``OpDef``.
    ``output_names``: the op's output argument names (``out_0``, ``out_1``... by default).
    ``input_names`` / ``attr_names``: the argument names ``flow.user_op_builder`` accepts
    (``.Input("x", [blob])``, ``.Attr("beta", 1.0)``): inputs are placed in ``input_names``
    order, and a name not listed is an error naming the op. None (the default): inputs are
    taken in the order of the ``Input`` calls and any attribute name is passed through.
    ``legacy_names``: other names legacy gave this op type, which ``flow.user_op_builder(...).Op(name)``
    accepts for it (``dynamic_loss_scale_schedule`` for ``optim_dynamic_loss_scale_schedule``, whose
    record carries its package's prefix); the job records the op under ``name``.
    ``legacy_input_names``: (legacy name, name) pairs of input arguments an earlier legacy version
    named otherwise, which ``flow.user_op_builder`` accepts for ``input_names``' name
    (``fused_cast_scale``'s ``scalar``, v0.4's ``scale_by_tensor``).
    """

    name_prefix: str = ""
    output_names: tuple[str, ...] | None = None
    input_names: tuple[str, ...] | None = None
    attr_names: tuple[str, ...] | None = None
    legacy_names: tuple[str, ...] = ()
    legacy_input_names: tuple[tuple[str, str], ...] = ()

    def check(self, op: str) -> None:
        """Raise ValueError naming ``op`` where a field holds what it cannot."""
        for field_name in ("output_names", "input_names", "attr_names", "legacy_names"):
            _names(op, field_name, getattr(self, field_name))
        for pair in self.legacy_input_names:
            if not (isinstance(pair, tuple) and len(pair) == 2 and all(isinstance(n, str) for n in pair)):
                raise ValueError(f"op {op!r}: legacy_input_names must hold (legacy name, name) pairs, got {pair!r}")
            if self.input_names is not None and pair[1] not in self.input_names:
                raise ValueError(f"op {op!r}: legacy_input_names maps {pair[0]!r} to {pair[1]!r}, which is not "
                                 f"one of input_names {self.input_names!r}")


def default_name_prefix(op: str) -> str:
    """The node-name prefix an op gets when its ``LegacyFace`` names none: ``add_n`` -> ``AddN``."""
    return "".join(p.capitalize() for p in op.split("_"))


RECORDS = {"compute": Compute, "effects": Effects, "shape": ShapeTraits, "legacy": LegacyFace}
"""``OpDef``'s grouped fields: the keyword each record is given as, and its type."""

FLAT_FIELDS = {f.name: group for group, record in RECORDS.items() for f in fields(record)}
"""The fields ``OpDef`` once took flat, by the keyword of the record each lives in now."""


def _accepts_flat_fields(cls: type[_T]) -> type[_T]:
    """``OpDef(...)`` still taking the flat keywords of before the records (``amp="gray"``, ``view=True``), for
    plugins written then: it warns (DeprecationWarning naming the op and the fields) and files each in its record."""
    init = cls.__init__

    @functools.wraps(init)
    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        flat = {key: kwargs.pop(key) for key in list(kwargs) if key in FLAT_FIELDS}
        if flat:
            op = args[0] if args else kwargs.get("name", "?")
            moved = ", ".join(f"{key}= goes in {group}={RECORDS[group].__name__}({key}=...)"
                              for key, group in ((k, FLAT_FIELDS[k]) for k in flat))
            warnings.warn(f"op {op!r}: OpDef's flat keywords are deprecated: {moved} (docs/guides/op-plugin.md)",
                          DeprecationWarning, stacklevel=2)
            for group, record in RECORDS.items():
                given = {k: v for k, v in flat.items() if FLAT_FIELDS[k] == group}
                if not given:
                    continue
                current = kwargs.get(group, record())
                twice = [k for k in given if getattr(current, k) != getattr(record(), k)]
                if twice:
                    raise TypeError(f"op {op!r}: {', '.join(twice)} given both flat and in {group}=")
                kwargs[group] = dataclasses.replace(current, **given)
        init(self, *args, **kwargs)

    cls.__init__ = __init__  # type: ignore[method-assign]
    return cls


@_accepts_flat_fields
@dataclass(frozen=True)
class OpDef:
    """One op: what it computes, how its shapes follow, how it differentiates, how it runs.

    A plain op is its name, ``infer`` and a kernel (or ``elementwise``), a gradient rule or the
    not-differentiable mark, and ``doc``; what else it declares is grouped in four small records, each
    with defaults, given only where the op differs: ``compute=Compute(...)`` (precision class, cost,
    layouts, host threads), ``effects=Effects(...)`` (views, in-place writes, effects and scheduling),
    ``shape=ShapeTraits(...)`` (data-dependent rows, tensor lists, per-device pieces) and
    ``legacy=LegacyFace(...)`` (legacy's names for the op and its arguments).

    ``not_differentiable``: the explicit mark for ops without a gradient rule.
    ``elementwise``: the op is one ufunc call (``Elementwise``); its kernel is built from it
    (give no ``kernel``), and the fusion pass may run it as a step of an elementwise chain.
    ``kernel``: the builder, called once per node when a plan is built; it returns the step callable, or a
    ``flowjob_core.ir.kernel.Kernel`` holding it with its traits (``host_state``, ``gated``).
    """

    name: str
    infer: InferFn
    kernel: KernelBuilder | None = None
    grad: GradRule | None = None
    not_differentiable: bool = False
    doc: str = ""
    elementwise: Elementwise | None = None
    compute: Compute = Compute()
    effects: Effects = Effects()
    shape: ShapeTraits = ShapeTraits()
    legacy: LegacyFace = LegacyFace()

    def __post_init__(self) -> None:
        for group, record in RECORDS.items():
            given = getattr(self, group)
            if not isinstance(given, record):
                raise TypeError(f"op {self.name!r}: {group}= takes a {record.__name__}, got {given!r}")
        self.compute.check(self.name)
        self.effects.check(self.name)
        self.shape.check(self.name)
        self.legacy.check(self.name)
        if self.grad is not None and self.not_differentiable:
            raise ValueError(f"op {self.name!r}: a gradient rule and the not-differentiable mark exclude each other")
        if self.elementwise is not None:
            if self.kernel is not None:
                # one source of truth: a hand kernel could drift from the chain step the fusion pass runs
                raise ValueError(f"op {self.name!r}: an elementwise descriptor builds the kernel; give no kernel")
            object.__setattr__(self, "kernel", self.elementwise.kernel)
        if not self.legacy.name_prefix:
            object.__setattr__(self, "legacy", dataclasses.replace(self.legacy,
                                                                   name_prefix=default_name_prefix(self.name)))

    def __getattr__(self, name: str) -> Any:
        # only reached for a name the record lacks: say where a field read flat before the records lives now
        group = FLAT_FIELDS.get(name)
        if group is not None:
            raise AttributeError(f"OpDef.{name} is now OpDef.{group}.{name} (op {self.name!r})")
        raise AttributeError(f"'OpDef' object has no attribute {name!r}")

    def out_names(self, count: int) -> tuple[str, ...]:
        if self.legacy.output_names is not None:
            return self.legacy.output_names
        return tuple(f"out_{i}" for i in range(count))


@dataclass
class KernelContext:
    """What a kernel builder may use: the array module, attributes, static specs, preallocated buffers."""

    xp: Any
    backend: Any
    op: str
    node_name: str
    attrs: dict[str, Any]
    inputs: tuple[BlobSpec, ...]
    outputs: tuple[BlobSpec, ...]
    job_type: str = "predict"
    variable: Callable[[str], Any] | None = None
    _out_buffer: Callable[[int], Any] | None = field(default=None, repr=False)
    shared: dict[Any, Any] = field(default_factory=dict, repr=False)
    """One dict per plan for kernels that cooperate (a filter gradient reusing its forward
    convolution's im2col matrix); key entries by op and node name."""
    _scratch: Any = field(default=None, repr=False)
    """This node's requests to the plan's scratch pool (``flowjob_core.plan.scratch.NodeScratch``);
    None outside a plan (eager kernels), where ``scratch`` allocates privately."""
    bindings: "Bindings | None" = field(default=None, repr=False)
    """The global function's bindings: the objects an attribute names by key (the job is plain data,
    so a learning-rate schedule is an attribute ``schedule='PiecewiseConstantScheduler#1'``)."""
    ops: Any = field(default=None, repr=False)
    """The session's op records by name (``Registries.ops``), for a kernel that runs other ops'
    arithmetic: a backend's ``elementwise_chain`` reads its steps' ``Elementwise`` descriptors there
    (a plugin's op among them). None outside a plan or an eager call (a context built by hand)."""

    @property
    def training(self) -> bool:
        return self.job_type == "train"

    def out(self, index: int = 0) -> Any:
        """The buffer planned for output ``index``: reused across steps, shared by values with disjoint lifetimes."""
        if self._out_buffer is not None:
            return self._out_buffer(index)
        spec = self.outputs[index]
        return self.xp.empty(spec.shape, dtype=spec.dtype)

    def workspace(self, shape: Sequence[int], dtype: Any = np.float32) -> Any:
        """A private array for this node, allocated once, kept as long as the plan: for state that
        outlives one call of ``run`` (accumulators, a value handed to another node through
        ``shared``). A temporary needed only while ``run`` executes belongs in ``scratch``."""
        return self.xp.empty(tuple(shape), dtype=dtype)

    def scratch(self, shape: Sequence[int], dtype: Any = np.float32) -> Any:
        """A temporary valid only during one call of this node's ``run``: its contents are undefined
        on entry (another node may have written it since), and nothing may keep it, return it or a
        view of it, or read it in a later call.

        Within a plan the memory is lent by the plan's pool (``flowjob_core.plan.scratch``), shared by
        all its nodes, which run one at a time: a request gets the smallest pool buffer that this
        node does not hold yet and that fits it (up to ``scratch.SLACK`` times its size), else a
        new one. So an array is distinct from this node's other scratch arrays, its inputs and
        its outputs, and the plan holds about what its most demanding nodes ask for. Outside a
        plan (eager kernels) the array is private, as ``workspace``'s.
        """
        if self._scratch is None:
            return self.xp.empty(tuple(shape), dtype=dtype)
        return self._scratch.take(shape, dtype)

    host_state: bool = field(default=False, repr=False)
    """Set when the builder draws a random stream (``rng``): the stream lives on the host and advances each call,
    so a step recorded for replay runs this node live (``flowjob_core.ir.kernel.runs_live``)."""

    def rng(self, seed: int | None = None) -> Any:
        self.host_state = True
        return self.backend.make_rng(seed if seed is not None else self.attrs.get("seed"))
