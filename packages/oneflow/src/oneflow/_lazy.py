"""Names owned by optional distributions, resolved on first access (PEP 562)."""
from __future__ import annotations

import importlib
from typing import Any

from flowjob_core import MissingPackageError


def require(module: str, distribution: str, what: str) -> Any:
    """Import ``module`` or explain which distribution provides ``what``."""
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as exc:
        if exc.name and module.startswith(exc.name.split(".")[0]):
            raise MissingPackageError(
                f"{what} needs the {distribution} distribution, which is not installed: "
                f"pip install {distribution}") from None
        raise


def resolve(table: dict[str, tuple[str, str | None, str]], name: str, owner: str) -> Any:
    try:
        module, attr, distribution = table[name]
    except KeyError:
        raise AttributeError(f"module {owner!r} has no attribute {name!r}") from None
    mod = require(module, distribution, f"{owner}.{name}")
    return mod if attr is None else getattr(mod, attr)
