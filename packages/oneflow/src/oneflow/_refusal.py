"""Face functions that keep a legacy name only to refuse it with the reason."""
from __future__ import annotations

from typing import Any, NoReturn


def refused(qualified_name: str, reason: str) -> Any:
    """A function named after the last part of ``qualified_name`` (``flow.tensorrt.write_int8_calibration``)
    that raises ``NotImplementedError`` saying ``reason``, whatever it is called with."""
    name = qualified_name.rsplit(".", 1)[-1]

    def refuse(*args: Any, **kwargs: Any) -> NoReturn:
        raise NotImplementedError(f"{qualified_name} is not supported: {reason}")

    refuse.__name__ = refuse.__qualname__ = name
    refuse.__doc__ = f"Refused: {reason}."
    return refuse
