"""The plugin host: one pluggy manager per session, made by a factory, never at import."""
from __future__ import annotations

import importlib
import os
from typing import Any, Iterable

import pluggy

from flowjob_core import hookspecs
from flowjob_core.errors import PluginError
from flowjob_core.registry import Registries

hookimpl = pluggy.HookimplMarker(hookspecs.PROJECT)

ENTRY_POINT_GROUP = hookspecs.PROJECT

# Core's own plugins, registered by name exactly as an entry point would register them.
BUILTIN_PLUGINS: tuple[tuple[str, str], ...] = (
    ("core-ops", "flowjob_core.builtin_ops"),
    ("core-passes", "flowjob_core.passes"),
    ("numpy-backend", "flowjob_core.backends.numpy_backend"),
)


def _names(value: str | None) -> list[str]:
    return [n.strip() for n in (value or "").split(",") if n.strip()]


def make_plugin_manager(
    *,
    builtins: Iterable[tuple[str, str]] = BUILTIN_PLUGINS,
    plugins: Iterable[Any] = (),
    autoload: bool | None = None,
    environ: dict[str, str] | None = None,
) -> pluggy.PluginManager:
    """Build a plugin manager: specs, built-ins, extra ``plugins``, entry points, then a check.

    Environment switches: ``FLOWJOB_DISABLE_PLUGIN_AUTOLOAD`` (any non-empty value) skips
    entry points; ``FLOWJOB_PLUGINS=a,b`` loads only those entry points;
    ``FLOWJOB_BLOCKED_PLUGINS=a,b`` blocks plugins by name (built-ins included).
    """
    env = os.environ if environ is None else environ
    pm = pluggy.PluginManager(hookspecs.PROJECT)
    pm.add_hookspecs(hookspecs)
    for name in _names(env.get("FLOWJOB_BLOCKED_PLUGINS")):
        pm.set_blocked(name)
    for name, module_name in builtins:
        if not pm.is_blocked(name):
            pm.register(importlib.import_module(module_name), name)
    for plugin in plugins:
        pm.register(plugin)
    if autoload is None:
        autoload = not env.get("FLOWJOB_DISABLE_PLUGIN_AUTOLOAD")
    if autoload:
        _load_entry_points(pm, _names(env.get("FLOWJOB_PLUGINS")))
    try:
        pm.check_pending()
    except pluggy.PluginValidationError as exc:
        raise PluginError(f"{exc} (a flowjob_* hook name with a typo, or a hook of a newer flowjob?)") from exc
    return pm


def _load_entry_points(pm: pluggy.PluginManager, only: list[str]) -> None:
    from importlib import metadata

    # one scan of the installed distributions (pluggy's loader scans them all once per name)
    found: dict[str, list[tuple[Any, Any]]] = {}
    for dist in metadata.distributions():
        for ep in dist.entry_points:
            if ep.group == ENTRY_POINT_GROUP:
                found.setdefault(ep.name, []).append((dist, ep))
    names = sorted(found)
    missing = [n for n in only if n not in names]
    if missing:
        raise PluginError(f"FLOWJOB_PLUGINS names {missing}, but no installed distribution provides them")
    for name in names:
        if only and name not in only:
            continue
        try:
            _load_entry_point(pm, name, found[name])
        except pluggy.PluginValidationError as exc:
            raise PluginError(f"flowjob plugin {name!r} is invalid: {exc}") from exc
        except Exception as exc:  # name the plugin: never swallow a broken one
            raise PluginError(f"flowjob plugin {name!r} failed to load: {exc!r}") from exc


def _load_entry_point(pm: pluggy.PluginManager, name: str, entries: list[tuple[Any, Any]]) -> None:
    """What ``pm.load_setuptools_entrypoints(group, name=name)`` does, from entries found already:
    blocked and already registered names are skipped; the distribution is kept for listings."""
    distinfo = getattr(pm, "_plugin_distinfo", None)
    facade = getattr(pluggy._manager, "DistFacade", None) if hasattr(pluggy, "_manager") else None
    if distinfo is None or facade is None:  # another pluggy: its own (slower) loader
        pm.load_setuptools_entrypoints(ENTRY_POINT_GROUP, name=name)
        return
    for dist, ep in entries:
        if pm.get_plugin(ep.name) or pm.is_blocked(ep.name):
            continue
        plugin = ep.load()
        pm.register(plugin, name=ep.name)
        distinfo.append((plugin, facade(dist)))


_REGISTRATION_HOOKS = (
    ("flowjob_add_ops", "ops"),
    ("flowjob_add_kernels", "kernels"),
    ("flowjob_add_backends", "backends"),
    ("flowjob_add_passes", "passes"),
    ("flowjob_add_result_kinds", "result_kinds"),
    ("flowjob_add_watch_sinks", "watch_sinks"),
)


def gather_registries(pm: pluggy.PluginManager) -> Registries:
    """Call every registration hook once, recording which plugin registered what."""
    regs = Registries()
    for hook_name, field_name in _REGISTRATION_HOOKS:
        registry = getattr(regs, field_name)
        hook = getattr(pm.hook, hook_name)
        for impl in reversed(hook.get_hookimpls()):  # pluggy's own call order
            if hasattr(registry, "current_plugin"):
                registry.current_plugin = impl.plugin_name
            try:
                impl.function(*[registry for _ in impl.argnames])
            except PluginError:
                raise
            except Exception as exc:
                raise PluginError(f"plugin {impl.plugin_name!r} failed in {hook_name}: {exc!r}") from exc
    return regs


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
