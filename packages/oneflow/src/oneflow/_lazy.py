"""Importing a module of an optional distribution, or saying which distribution to install."""
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

