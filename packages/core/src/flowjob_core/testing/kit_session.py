"""Sessions the kit works in: derived from the caller's, so the caller's session is never changed.

The gradient kit needs an op (its test loss) and a pass (fetching raw gradients) that no
program should see. Adding them to the caller's session would leave them there (listed by
``python -m oneflow info``, owning names a program could collide with); instead the kit
derives a session: the caller's plugins under the same names, in the same order, with the
same blocked names and hook specifications, plus the kit's plugin, and registries gathered
afresh from them (a few milliseconds).
"""
from __future__ import annotations

import contextlib
import sys
from typing import Any, Iterator

import pluggy

from flowjob_core.plugins import hookspecs
from flowjob_core.runtime.session import Session
from flowjob_core.testing import _kit_plugin


def derive_session(session: Session, *extra_plugins: tuple[str, Any]) -> Session:
    """A new session with ``session``'s plugins plus ``extra_plugins`` (``(name, plugin)`` pairs).

    Its plugin manager and registries are its own; plugins are the same objects, and the
    session config is shared, so the backend chosen is the one ``session`` chooses.
    """
    source = session.pm
    pm = pluggy.PluginManager(source.project_name)
    spec_namespaces: dict[int, Any] = {id(hookspecs): hookspecs}
    for caller in vars(source.hook).values():
        spec = getattr(caller, "spec", None)
        if spec is not None:  # plugins may have added specs of their own
            spec_namespaces.setdefault(id(spec.namespace), spec.namespace)
    for namespace in spec_namespaces.values():
        pm.add_hookspecs(namespace)
    for name, plugin in source.list_name_plugin():  # registration order: pluggy's call order follows it
        if plugin is None:
            pm.set_blocked(name)
        else:
            pm.register(plugin, name)
    for name, plugin in extra_plugins:
        if pm.get_plugin(name) is None and not pm.is_registered(plugin):
            pm.register(plugin, name)
    return Session(pm, config=session.config)


def has_kit(session: Session) -> bool:
    """Whether ``session`` already has the kit's plugin (a session the kit derived)."""
    return session.pm.get_plugin(_kit_plugin.PLUGIN_NAME) is not None


def kit_session(session: Session) -> Session:
    """``session`` itself when it has the kit's plugin, else a session derived from it with that plugin."""
    if has_kit(session):
        return session
    return derive_session(session, (_kit_plugin.PLUGIN_NAME, sys.modules[_kit_plugin.__name__]))


@contextlib.contextmanager
def kit_scope(session: Session | None) -> Iterator[Session]:
    """A session with the kit's plugin, derived from ``session`` (default: a fresh ``Session()``, every
    installed plugin); what this made is closed afterwards, ``session`` itself is left as it was."""
    base = session if session is not None else Session()
    kit = kit_session(base)
    try:
        yield kit
    finally:
        try:
            if kit is not base:
                kit.close()
        finally:
            if session is None:
                base.close()
