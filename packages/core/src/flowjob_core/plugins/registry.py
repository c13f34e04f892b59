"""Typed registries handed to plugins by the registration hooks, gathered once per session."""
from __future__ import annotations

import difflib
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator

from flowjob_core.errors import PluginError
from flowjob_core.ir.opdef import KernelBuilder, OpDef
from flowjob_core.plugins.pass_order import PassRegistry, PassSpec  # noqa: F401 - re-exported

ANY_BACKEND = "*"


class OpRegistry:
    """Op records by name, plus the Python operators (``+``, ``*``) symbolic blobs dispatch to."""

    def __init__(self) -> None:
        self._ops: dict[str, OpDef] = {}
        self._owner: dict[str, str] = {}
        self._legacy: dict[str, str] = {}
        self.operators: dict[str, Callable[..., Any]] = {}
        self.tensor_methods: dict[str, Callable[..., Any]] = {}
        self._method_owner: dict[str, str] = {}
        self.current_plugin = ""

    def add(self, op: OpDef) -> None:
        if op.name in self._ops:
            raise PluginError(
                f"op {op.name!r} registered twice: by {self._owner[op.name]!r} and by {self.current_plugin!r}")
        for legacy in op.legacy.legacy_names:
            taken = self._legacy.get(legacy) or (legacy if legacy in self._ops else None)
            if taken is not None:
                raise PluginError(f"op {op.name!r} (plugin {self.current_plugin!r}) takes the legacy name "
                                  f"{legacy!r} of op {taken!r}")
        if op.name in self._legacy:
            raise PluginError(f"op {op.name!r} (plugin {self.current_plugin!r}) is the legacy name of op "
                              f"{self._legacy[op.name]!r}")
        self._ops[op.name] = op
        self._owner[op.name] = self.current_plugin
        self._legacy.update(dict.fromkeys(op.legacy.legacy_names, op.name))

    def add_operator(self, dunder: str, fn: Callable[..., Any]) -> None:
        """Make ``Blob.<dunder>`` (e.g. ``__add__``) call ``fn(blob, other)``."""
        self.operators[dunder] = fn

    def add_tensor_method(self, name: str, fn: Callable[..., Any]) -> None:
        """Make the eager ``flow.Tensor``'s method ``name`` call ``fn(tensor, *args, **kwargs)``: the methods that
        run an op package's records (``tensor.reshape``, ``tensor.sum``) come from that package, so core names
        none of its ops. A name ``flow.Tensor`` defines itself (``shape``, ``backward``) is never looked up here;
        registering a name twice is an error naming both plugins."""
        if name.startswith("_") or not name.isidentifier():
            raise PluginError(f"plugin {self.current_plugin!r}: tensor method name {name!r} is not a public "
                              "identifier")
        if name in self.tensor_methods:
            raise PluginError(f"tensor method {name!r} registered twice: by {self._method_owner[name]!r} and by "
                              f"{self.current_plugin!r}")
        self.tensor_methods[name] = fn
        self._method_owner[name] = self.current_plugin

    def __getitem__(self, name: str) -> OpDef:
        try:
            return self._ops[name]
        except KeyError:
            raise PluginError(f"no op {name!r} is registered (is the package that provides it installed?)") from None

    def resolve(self, name: str) -> OpDef:
        """The record of ``name`` or of the op whose ``legacy_names`` hold it (``flow.user_op_builder``)."""
        return self[self._legacy.get(name, name)]

    def __contains__(self, name: str) -> bool:
        return name in self._ops

    def __iter__(self) -> Iterator[OpDef]:
        return iter(self._ops.values())

    def __len__(self) -> int:
        return len(self._ops)

    def owner(self, name: str) -> str:
        return self._owner.get(name, "")


class KernelRegistry:
    """Kernel builders keyed by (op, backend tag); an op's own kernel serves every backend by default.

    Registration hooks run ops first (``flowjob_core.plugins.host``), so an override of an op no plugin
    registered is refused as it is added, as is a second override of one (op, backend) pair: each error names
    the plugins involved. Name the op by what its owning package exports (the record itself, or its
    ``.name``), never by a string literal, so that renaming the op cannot leave an override behind.
    """

    def __init__(self, ops: OpRegistry | None = None) -> None:
        self.ops = ops  # None until ``Registries`` binds its own
        self._kernels: dict[tuple[str, str], KernelBuilder] = {}
        self._owner: dict[tuple[str, str], str] = {}
        self.current_plugin = ""

    def add(self, op: OpDef | str, backend: str, builder: KernelBuilder, *, optional: bool = False) -> None:
        """Make ``builder`` build the kernel of ``op`` (its record, or its name) on backend ``backend``.

        ``optional=True``: ``op`` belongs to a plugin this one does not need loaded
        (flowjob-gpu's launches of flowjob-optim's updates): the override is skipped in a session where no
        plugin registered the op. Otherwise an unknown op is an error."""
        name = op.name if isinstance(op, OpDef) else op
        if self.ops is None:
            raise PluginError(f"a kernel registry checks overrides against the ops: make it with KernelRegistry(ops) "
                              f"(adding op {name!r})")
        if name not in self.ops:
            if optional:
                return
            close = difflib.get_close_matches(name, [record.name for record in self.ops], n=3)
            hint = f" (registered ops with close names: {close})" if close else ""
            raise PluginError(f"plugin {self.current_plugin!r} overrides the kernel of op {name!r} on backend "
                              f"{backend!r}, but no plugin registered an op of that name{hint}")
        key = (name, backend)
        if key in self._kernels:
            raise PluginError(f"the kernel of op {name!r} (plugin {self.ops.owner(name)!r}) on backend {backend!r} "
                              f"is overridden twice: by plugin {self._owner[key]!r} and by plugin "
                              f"{self.current_plugin!r} (remove the first with KernelRegistry.remove)")
        self._kernels[key] = builder
        self._owner[key] = self.current_plugin

    def lookup(self, op: OpDef, backend: str) -> KernelBuilder | None:
        return self._kernels.get((op.name, backend)) or self._kernels.get((op.name, ANY_BACKEND)) or op.kernel

    def overrides(self, backend: str) -> list[str]:
        return sorted(op for op, tag in self._kernels if tag == backend)

    def owner(self, op: str, backend: str) -> str:
        """The plugin that registered the override of (op, backend); "" where none did."""
        return self._owner.get((op, backend), "")

    def remove(self, op: OpDef | str, backend: str) -> None:
        """Drop the builder registered for (op, backend): the op's own kernel (or a ``"*"`` one) serves
        again there. Unknown pairs are an error naming them."""
        name = op.name if isinstance(op, OpDef) else op
        if self._kernels.pop((name, backend), None) is None:
            raise PluginError(f"no kernel override of op {name!r} is registered for backend {backend!r}")
        del self._owner[(name, backend)]


LEGACY_DEVICE_TAGS = ("cpu", "gpu")
"""Legacy OneFlow's device tags: valid in every session. A job placed on one without a backend runs
on the cpu backend (core's ``flowjob_select_backend``), with one warning for ``gpu``."""


def split_serially(body: Callable[[int, int], None], count: int) -> None:
    """The default ``Backend.parallel``: the whole range on the calling thread."""
    body(0, count)


@dataclass
class Backend:
    """A device kind: its tag (``cpu``, ``gpu``, or a plugin's own), array module and host transfers.

    ``host_arrays``: the backend's arrays are the host's numpy arrays, so feeds and results need no
    transfer (the numpy backend; calls then take a shorter path).
    ``parallel(body, count)``: run ``body(start, stop)`` over parts of ``range(count)``, concurrently
    where the backend can (the numpy backend's host threads); the default runs it whole, serially.
    ``lanes``: the host threads a plan may run independent nodes on side by side (the numpy backend's
    ``HostThreads``: its ``threads``, ``apply()`` and ``lanes(bodies, abort)``); None (the default): one node at a time.
    ``make_rng(seed)``: a random stream for one op node; kernels call its ``random(out=, dtype=)`` and
    ``standard_normal(out=, dtype=)`` (numpy ``Generator`` signatures), which fill ``out`` in place.
    ``profiler_range``: ``(push(name), pop())`` opening and closing a named range in the device's own profiler
    (NVTX on CUDA), for ``flow.profiler``'s ranges; None where the device has none.
    ``step_recorder(plan)``: the step function that replaces ``plan.step`` (the generated one) for a plan whose
    nodes run in order (``plan.program``, ``flowjob_core.plan.pieces``) and check no numerics: one that records
    the step once and replays it (the gpu backend's CUDA graphs). None (the default): the generated step runs.
    ``arena_in_one_allocation``: a plan's value buffers are parts of one allocation (a device's: one request to
    its allocator, one contiguous range a recorded step writes); else one allocation each (the host's).
    """

    tag: str
    name: str
    xp: Any
    device_count: Callable[[], int] = lambda: 1
    to_host: Callable[[Any], Any] = lambda a: a
    from_host: Callable[[Any], Any] = lambda a: a
    make_rng: Callable[[int | None], Any] = None  # type: ignore[assignment]
    synchronize: Callable[[], None] = lambda: None
    description: str = ""
    host_arrays: bool = False
    parallel: Callable[[Callable[[int, int], None], int], None] = split_serially
    lanes: Any = None
    profiler_range: tuple[Callable[[str], None], Callable[[], None]] | None = None
    step_recorder: Callable[[Any], Callable[[list[Any]], Any]] | None = None
    arena_in_one_allocation: bool = False


class BackendRegistry:
    """Backends by device tag; the tags ``flow.scope.placement`` and ``FLOWJOB_DEVICE`` accept."""

    def __init__(self) -> None:
        self._backends: dict[str, Backend] = {}
        self._owner: dict[str, str] = {}
        self.current_plugin = ""

    def add(self, backend: Backend) -> None:
        """Register ``backend`` under its tag; a second backend of one tag is an error naming both plugins."""
        if backend.tag in self._backends:
            raise PluginError(f"backend tag {backend.tag!r} registered twice: {self._backends[backend.tag].name!r} "
                              f"by plugin {self._owner[backend.tag]!r} and {backend.name!r} by plugin "
                              f"{self.current_plugin!r} (block one: FLOWJOB_BLOCKED_PLUGINS)")
        self._backends[backend.tag] = backend
        self._owner[backend.tag] = self.current_plugin

    def owner(self, tag: str) -> str:
        """The plugin that registered the backend of ``tag``; "" where none did."""
        return self._owner.get(tag, "")

    def get(self, tag: str) -> Backend | None:
        return self._backends.get(tag)

    def tags(self) -> list[str]:
        """The registered device tags, sorted."""
        return sorted(self._backends)

    def accepts(self, tag: str) -> bool:
        """Whether a job may be placed on ``tag``: a registered backend's, or a legacy tag."""
        return tag in self._backends or tag in LEGACY_DEVICE_TAGS

    def unknown_tag_message(self, tag: Any) -> str:
        """Why ``tag`` names no device, listing the tags that do."""
        legacy = [t for t in LEGACY_DEVICE_TAGS if t not in self._backends]
        also = f" (and the legacy {', '.join(map(repr, legacy))})" if legacy else ""
        return f"{tag!r} names no registered backend; registered: {self.tags()}{also}"

    def __iter__(self) -> Iterator[Backend]:
        return iter(self._backends.values())


class ResultKindRegistry:
    """Annotation matchers: parameter kinds (placeholders), return kinds, and value converters.

    Each matcher is called with an annotation and returns a kind object or None; the first
    match wins, trying later registrations first so a plugin can refine a built-in.
    """

    def __init__(self) -> None:
        self.param_matchers: list[Callable[[Any], Any]] = []
        self.default_matchers: list[Callable[[Any], Any]] = []
        self.return_matchers: list[Callable[[Any], Any]] = []
        self.value_converters: list[Callable[[Any], Any]] = []

    def add_param_kind(self, matcher: Callable[[Any], Any]) -> None:
        """``matcher(annotation) -> ParamKind | None`` for annotated parameters."""
        self.param_matchers.append(matcher)

    def add_default_kind(self, matcher: Callable[[Any], Any]) -> None:
        """``matcher(default_value) -> ParamKind | None`` for legacy ``x=flow.FixedTensorDef(...)`` parameters."""
        self.default_matchers.append(matcher)

    def add_return_kind(self, matcher: Callable[[Any], Any]) -> None:
        """``matcher(annotation) -> ReturnKind | None``; the annotation may be ``inspect.Signature.empty``."""
        self.return_matchers.append(matcher)

    def add_value_converter(self, matcher: Callable[[Any], Any]) -> None:
        """``matcher(annotation) -> (callable(host_value, blob) -> object) | None`` for watch handlers."""
        self.value_converters.append(matcher)

    @staticmethod
    def _first(matchers: list[Callable[[Any], Any]], key: Any) -> Any:
        for matcher in reversed(matchers):
            found = matcher(key)
            if found is not None:
                return found
        return None

    def param_kind(self, annotation: Any) -> Any:
        return self._first(self.param_matchers, annotation)

    def default_kind(self, default: Any) -> Any:
        return self._first(self.default_matchers, default)

    def return_kind(self, annotation: Any) -> Any:
        return self._first(self.return_matchers, annotation)

    def value_converter(self, annotation: Any) -> Any:
        return self._first(self.value_converters, annotation)


class WatchSinkRegistry:
    """Watch sinks by name: ``factory(target, **options) -> callable(value, blob_def)``."""

    def __init__(self) -> None:
        self._sinks: dict[str, Callable[..., Any]] = {}
        self._owner: dict[str, str] = {}
        self.current_plugin = ""

    def add(self, name: str, factory: Callable[..., Any]) -> None:
        if name in self._sinks:
            raise PluginError(f"watch sink {name!r} registered twice: by plugin {self._owner[name]!r} and by "
                              f"plugin {self.current_plugin!r}")
        self._sinks[name] = factory
        self._owner[name] = self.current_plugin

    def get(self, name: str) -> Callable[..., Any]:
        try:
            return self._sinks[name]
        except KeyError:
            raise PluginError(f"no watch sink {name!r}; registered: {sorted(self._sinks)}") from None

    def names(self) -> list[str]:
        return sorted(self._sinks)


@dataclass
class Registries:
    ops: OpRegistry = field(default_factory=OpRegistry)
    kernels: KernelRegistry = field(default_factory=KernelRegistry)  # bound to ``ops``, which it checks against
    backends: BackendRegistry = field(default_factory=BackendRegistry)
    passes: PassRegistry = field(default_factory=PassRegistry)
    result_kinds: ResultKindRegistry = field(default_factory=ResultKindRegistry)
    watch_sinks: WatchSinkRegistry = field(default_factory=WatchSinkRegistry)

    def __post_init__(self) -> None:
        if getattr(self.kernels, "ops", self.ops) is None:  # (a stand-in, the testing kit's, has no ops)
            self.kernels.ops = self.ops
