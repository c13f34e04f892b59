"""Graph passes and their order: named phases, then ``after``/``before`` anchors, then the pass name.

The order depends only on what was registered, never on the order plugins registered it, so
every installation of the same plugins plans the same pipeline. See ``PHASES`` and
``flowjob_core.plugins.hookspecs.flowjob_add_passes``.
"""
from __future__ import annotations

import heapq
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Iterator

from flowjob_core.errors import PluginError

# The phases, in the order they run, with what belongs in each.
PHASES: dict[str, str] = {
    "verify": "check the traced job before anything changes it (core's verify)",
    "differentiate": "add the gradient nodes of the losses (core's autodiff)",
    "instrument": "observe values and gradients the user asked for (watch)",
    "update": "turn gradients into training updates (the optimizer pass)",
    "transform": "other rewrites of the complete training graph, before unused nodes are dropped; "
                 "a pass with neither phase nor anchor runs here",
    "cleanup": "drop the nodes nothing needs (core's dce)",
    "fuse": "rewrite the final graph for speed (optim-fusion, fuse-conv, fuse-dense)",
    "finalize": "check the job the planner gets (core's verify-final)",
}
DEFAULT_PHASE = "transform"
_RANK = {phase: rank for rank, phase in enumerate(PHASES)}

PassRun = Callable[[Any, Any], None]


def _names(value: str | Iterable[str]) -> tuple[str, ...]:
    return (value,) if isinstance(value, str) else tuple(value)


@dataclass(frozen=True)
class PassSpec:
    """One registered pass. ``phase`` is None when it was registered without one (see ``PassRegistry.add``)."""

    name: str
    run: PassRun
    phase: str | None = None
    after: tuple[str, ...] = ()
    before: tuple[str, ...] = ()
    after_if_present: tuple[str, ...] = ()
    before_if_present: tuple[str, ...] = ()
    plugin: str = ""


class PassRegistry:
    """Graph passes by name; ``ordered()`` is the pipeline (phases, anchors, then names)."""

    def __init__(self) -> None:
        self._passes: dict[str, PassSpec] = {}
        self._ordered: list[PassSpec] | None = None  # cached pipeline, dropped by every add
        self.current_plugin = ""  # set by the plugin host while a plugin's hook runs

    def add(self, name: str, run: PassRun, *, phase: str | None = None,
            after: str | Iterable[str] = (), before: str | Iterable[str] = (),
            after_if_present: str | Iterable[str] = (), before_if_present: str | Iterable[str] = ()) -> None:
        """Register pass ``name``: ``run(job, ctx)`` rewrites a copy of the traced job in place.

        ``after``/``before`` name passes that must be registered (an error otherwise);
        ``after_if_present``/``before_if_present`` only apply when the named pass is.
        """
        who = f"pass {name!r} (from plugin {self.current_plugin!r})"
        if not isinstance(name, str) or not name:
            raise PluginError(f"{who}: a pass name must be a non-empty string")
        if not callable(run):
            raise PluginError(f"{who}: run must be callable as run(job, ctx), got {run!r}")
        if phase is not None and phase not in PHASES:
            raise PluginError(f"{who}: unknown phase {phase!r}; phases: {', '.join(PHASES)}")
        if name in self._passes:
            raise PluginError(
                f"pass {name!r} registered twice: by {self._passes[name].plugin!r} and by {self.current_plugin!r}")
        self._passes[name] = PassSpec(name, run, phase, _names(after), _names(before), _names(after_if_present),
                                      _names(before_if_present), self.current_plugin)
        self._ordered = None

    def __contains__(self, name: str) -> bool:
        return name in self._passes

    def __len__(self) -> int:
        return len(self._passes)

    def __iter__(self) -> Iterator[PassSpec]:
        return iter(self.ordered())

    def phase_of(self, name: str) -> str:
        """The phase pass ``name`` runs in (its own, or the one it joins through its anchors)."""
        return self._phase(name, ())

    def ordered(self) -> list[PassSpec]:
        """The pipeline: phase by phase, each phase in anchor order, ties broken by pass name.

        An unknown hard anchor, an anchor against the phase order, or a cycle is a PluginError
        naming the passes involved.
        """
        if self._ordered is None:
            self._ordered = self._order()
        return list(self._ordered)

    # ordering ------------------------------------------------------------------------
    def _phase(self, name: str, seen: tuple[str, ...]) -> str:
        spec = self._passes[name]
        if spec.phase is not None:
            return spec.phase
        if name in seen:  # un-phased passes anchored on each other only: a cycle, reported by _order
            return DEFAULT_PHASE
        for anchor in spec.after + spec.before:  # join the phase of the pass it is placed against
            if anchor in self._passes:
                return self._phase(anchor, seen + (name,))
        return DEFAULT_PHASE

    def _edges(self) -> dict[str, set[str]]:
        """name -> passes that must run after it; hard anchors checked, absent conditional ones dropped."""
        edges: dict[str, set[str]] = {n: set() for n in self._passes}
        for spec in self._passes.values():
            for anchor in spec.after + spec.before:
                if anchor not in self._passes:
                    raise PluginError(f"pass {spec.name!r} (from plugin {spec.plugin!r}) is placed relative to "
                                      f"unknown pass {anchor!r}; registered: {', '.join(sorted(self._passes))}")
            for anchor in spec.after + tuple(a for a in spec.after_if_present if a in self._passes):
                edges[anchor].add(spec.name)
            for anchor in spec.before + tuple(a for a in spec.before_if_present if a in self._passes):
                edges[spec.name].add(anchor)
        return edges

    def _order(self) -> list[PassSpec]:
        edges = self._edges()
        phase = {name: self._phase(name, ()) for name in self._passes}
        for first, thens in edges.items():
            for then in thens:
                if _RANK[phase[first]] > _RANK[phase[then]]:
                    raise PluginError(
                        f"pass {then!r} (phase {phase[then]!r}, from plugin {self._passes[then].plugin!r}) cannot run "
                        f"after {first!r} (phase {phase[first]!r}, from plugin {self._passes[first].plugin!r}): "
                        f"phases run in the order {' -> '.join(PHASES)}")
        indegree = {name: 0 for name in self._passes}
        for thens in edges.values():
            for then in thens:
                indegree[then] += 1
        # anchors never point back across phases (checked above), so the smallest key ready is
        # always in the earliest unfinished phase: the result is phase-sorted
        ready = [(_RANK[phase[n]], n) for n, d in indegree.items() if d == 0]
        heapq.heapify(ready)
        order: list[PassSpec] = []
        while ready:
            _, name = heapq.heappop(ready)
            spec = self._passes[name]
            order.append(spec if spec.phase is not None else PassSpec(
                spec.name, spec.run, phase[name], spec.after, spec.before, spec.after_if_present,
                spec.before_if_present, spec.plugin))
            for then in edges[name]:
                indegree[then] -= 1
                if indegree[then] == 0:
                    heapq.heappush(ready, (_RANK[phase[then]], then))
        if len(order) != len(self._passes):
            raise PluginError(f"pass constraints form a cycle: {self._cycle(edges, {p.name for p in order})}")
        return order

    def _cycle(self, edges: dict[str, set[str]], placed: set[str]) -> str:
        """One cycle among the passes Kahn's algorithm could not place, as ``a -> b -> a`` with plugins."""
        before: dict[str, list[str]] = {n: [] for n in self._passes if n not in placed}
        for first, thens in edges.items():
            for then in thens:
                if first in before and then in before:
                    before[then].append(first)
        # every unplaced pass waits on an unplaced one: walking back from any must repeat a pass
        path, name = [], min(before)
        while name not in path:
            path.append(name)
            name = min(before[name])
        loop = path[path.index(name):][::-1]
        start = loop.index(min(loop))  # the same cycle always reads the same way
        loop = loop[start:] + loop[:start + 1]
        return " -> ".join(f"{n!r} ({self._passes[n].plugin!r})" for n in loop)
