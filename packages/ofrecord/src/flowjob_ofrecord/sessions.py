"""A traced reader's session, named by a token its node's attributes can hold (the IR holds no objects):
the reader thread stops when that session closes."""
from __future__ import annotations

import itertools
import weakref
from typing import Any, Callable

_SESSIONS: "weakref.WeakValueDictionary[str, Any]" = weakref.WeakValueDictionary()
_TOKENS = itertools.count()


def session_token(session: Any) -> str:
    """A name for ``session`` that the reader node's attributes can hold (the IR holds no objects)."""
    token = getattr(session, "_flowjob_ofrecord_token", None)
    if token is None:
        token = f"session-{next(_TOKENS)}"
        session._flowjob_ofrecord_token = token
        _SESSIONS[token] = session
    return token


def session_alive(token: str | None) -> Callable[[], bool]:
    """Whether the session named ``token`` is still open (always, for a reader traced without one)."""
    if token is None:
        return lambda: True

    def open_() -> bool:
        session = _SESSIONS.get(token)
        return session is not None and not session.closed

    return open_
