"""The plugin host: one pluggy manager per session, made by a factory, never at import.

Only pluggy's public API is used: entry points are loaded by ``load_setuptools_entrypoints``
(which honours ``set_blocked``), and each registration hook is called once per plugin through
``subset_hook_caller``, so what a plugin registers is recorded under its name. Both rely on
pluggy 1.7 (the package's floor): its ``subset_hook_caller`` also leaves out implementations
registered under ``specname=``, and a plugin failing validation leaves the manager untouched.
"""
from __future__ import annotations

import importlib
from importlib import metadata
from typing import Any, Iterable, Iterator, Mapping

import pluggy

from flowjob_core.plugins import hookspecs
from flowjob_core.errors import PluginError
from flowjob_core.plugins.registry import Registries
from flowjob_core.switches import Switches, current

hookimpl = pluggy.HookimplMarker(hookspecs.PROJECT)

ENTRY_POINT_GROUP = hookspecs.PROJECT

# Core's own plugins, registered by name exactly as an entry point would register them.
BUILTIN_PLUGINS: tuple[tuple[str, str], ...] = (
    ("core-ops", "flowjob_core.plugins.builtin_ops"),
    ("core-passes", "flowjob_core.passes.pipeline"),
    ("numpy-backend", "flowjob_core.backends.numpy_backend"),
)


def make_plugin_manager(
    *,
    builtins: Iterable[tuple[str, str]] = BUILTIN_PLUGINS,
    plugins: Iterable[Any] = (),
    autoload: bool | None = None,
    environ: Mapping[str, str] | None = None,
) -> pluggy.PluginManager:
    """Build a plugin manager: specs, built-ins, extra ``plugins``, entry points, then a check.

    Switches (``flowjob_core.switches``; ``environ`` replaces the process environment):
    ``FLOWJOB_DISABLE_PLUGIN_AUTOLOAD=1`` skips entry points (``autoload`` overrides it);
    ``FLOWJOB_PLUGINS=a,b`` loads only those entry points; ``FLOWJOB_BLOCKED_PLUGINS=a,b``
    blocks plugins by name, built-ins included.
    """
    settings = current() if environ is None else Switches.from_environ(environ)
    pm = pluggy.PluginManager(hookspecs.PROJECT)
    pm.add_hookspecs(hookspecs)
    for name in settings.blocked_plugins:
        pm.set_blocked(name)
    for name, module_name in builtins:
        if not pm.is_blocked(name):
            pm.register(importlib.import_module(module_name), name)
    for plugin in plugins:
        pm.register(plugin)
    if autoload is None:
        autoload = not settings.disable_plugin_autoload
    if autoload:
        _load_entry_points(pm, settings.plugins)
    try:
        pm.check_pending()
    except pluggy.PluginValidationError as exc:
        raise PluginError(f"{exc} (a flowjob_* hook name with a typo, or a hook of a newer flowjob?)") from exc
    return pm


def _load_entry_points(pm: pluggy.PluginManager, only: tuple[str, ...]) -> None:
    """Every ``flowjob`` entry point, or only the named ones; a plugin that fails to load is named."""
    if not only:
        # one call, one scan of the installed distributions (a call per name rescans them all)
        _load(pm, None)
        return
    offered = {ep.name for ep in _group_entry_points()}
    missing = [name for name in only if name not in offered]
    if missing:
        raise PluginError(f"FLOWJOB_PLUGINS names {missing}, but no installed distribution provides them")
    for name in only:
        _load(pm, name)


def _load(pm: pluggy.PluginManager, name: str | None) -> None:
    try:
        pm.load_setuptools_entrypoints(ENTRY_POINT_GROUP, name=name)
    except Exception as exc:  # name the plugin: never swallow a broken one
        culprit = name or _first_unloaded(pm)
        if isinstance(exc, pluggy.PluginValidationError):
            raise PluginError(f"flowjob plugin {culprit!r} is invalid: {exc}") from exc
        raise PluginError(f"flowjob plugin {culprit!r} failed to load: {exc!r}") from exc


def _group_entry_points() -> Iterator[metadata.EntryPoint]:
    """The ``flowjob`` entry points in the order pluggy's loader meets them."""
    for dist in metadata.distributions():
        for ep in dist.entry_points:
            if ep.group == ENTRY_POINT_GROUP:
                yield ep


def _first_unloaded(pm: pluggy.PluginManager) -> str:
    """The entry point a failed load stopped at: the loader registers each in turn, so it is the first
    one neither registered nor blocked (a plugin failing validation leaves the manager untouched)."""
    for ep in _group_entry_points():
        if not pm.has_plugin(ep.name) and not pm.is_blocked(ep.name):
            return ep.name
    return f"<an entry point of group {ENTRY_POINT_GROUP!r}>"


# ops first: the kernel registry refuses an override of an op no plugin registered, as it is added
_REGISTRATION_HOOKS = (
    ("flowjob_add_ops", "ops"),
    ("flowjob_add_kernels", "kernels"),
    ("flowjob_add_backends", "backends"),
    ("flowjob_add_passes", "passes"),
    ("flowjob_add_result_kinds", "result_kinds"),
    ("flowjob_add_watch_sinks", "watch_sinks"),
)


def gather_registries(pm: pluggy.PluginManager) -> Registries:
    """Call every registration hook once per plugin, recording which plugin registered what."""
    regs = Registries()
    solo: dict[str, pluggy.PluginManager] = {}  # managers of one plugin each, made only when needed
    for hook_name, field_name in _REGISTRATION_HOOKS:
        registry = getattr(regs, field_name)
        for plugin_name, call in _per_plugin_callers(pm, hook_name, solo):
            if hasattr(registry, "current_plugin"):
                registry.current_plugin = plugin_name
            try:
                call(registry=registry)
            except PluginError:
                raise
            except Exception as exc:
                raise PluginError(f"plugin {plugin_name!r} failed in {hook_name}: {exc!r}") from exc
        if hasattr(registry, "current_plugin"):
            registry.current_plugin = ""
    return regs


def _per_plugin_callers(pm: pluggy.PluginManager, hook_name: str,
                        solo: dict[str, pluggy.PluginManager]) -> list[tuple[str, Any]]:
    """(plugin name, a caller of ``hook_name`` that reaches only that plugin), in pluggy's call order."""
    implementers: list[tuple[str, Any]] = []
    for impl in reversed(getattr(pm.hook, hook_name).get_hookimpls()):  # pluggy calls them in this order
        if not any(plugin is impl.plugin for _, plugin in implementers):
            implementers.append((impl.plugin_name, impl.plugin))
    if all(_hashable(plugin) for _, plugin in implementers):
        return [(name, pm.subset_hook_caller(hook_name, remove_plugins=[o for _, o in implementers if o is not plugin]))
                for name, plugin in implementers]
    # subset callers keep plugins in a set: with an unhashable one implementing the hook (a SimpleNamespace,
    # a dataclass instance), each plugin is called through a manager holding only it (slower: rare)
    return [(name, getattr(_solo_manager(solo, name, plugin).hook, hook_name)) for name, plugin in implementers]


def _hashable(plugin: Any) -> bool:
    try:
        hash(plugin)
    except TypeError:
        return False
    return True


def _solo_manager(solo: dict[str, pluggy.PluginManager], name: str, plugin: Any) -> pluggy.PluginManager:
    if name not in solo:
        # no specs: the session's manager has validated the plugin against them already
        solo[name] = pluggy.PluginManager(hookspecs.PROJECT)
        solo[name].register(plugin, name)
    return solo[name]


def describe_plugins(pm: pluggy.PluginManager) -> list[dict[str, Any]]:
    """Name, distribution and implemented hooks of every registered plugin (for ``python -m oneflow info``)."""
    dists = {id(p): d for p, d in pm.list_plugin_distinfo()}
    rows = []
    for name, plugin in pm.list_name_plugin():
        if plugin is None:
            continue
        dist = dists.get(id(plugin))
        hooks = sorted(h.name for h in pm.get_hookcallers(plugin) or [])
        rows.append({
            "name": name,
            "distribution": f"{dist.project_name} {dist.version}" if dist else "builtin",
            "hooks": hooks,
        })
    return rows
