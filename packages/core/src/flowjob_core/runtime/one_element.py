"""Arrays of shape (1,) as legacy handed out a full reduction's value (its blobs were never 0-d), delivered so that
code written for numpy 1 (``float(loss)``) still runs on numpy 2: the typing results and the eager tensor use it."""
from __future__ import annotations

from typing import Any

import numpy as np


class OneElementArray(np.ndarray):
    """A delivered array of shape (1,), as legacy delivered a full reduction (its blobs were never 0-d):
    indexable (``loss[0]``) as legacy's, and convertible by ``float()`` / ``int()`` / ``complex()`` as numpy 1
    allowed for one-element arrays (numpy 2 refuses them for a 1-d array), so ``float(loss)`` keeps
    working, and formatted with a format spec as its element. Everything else is the ndarray's."""

    def _element(self) -> Any:
        return np.asarray(self).reshape(()).item()

    def __float__(self) -> float:
        return float(self._element())

    def __int__(self) -> int:
        return int(self._element())

    def __complex__(self) -> complex:
        return complex(self._element())

    def __format__(self, spec: str) -> str:  # "{:.4f}".format(loss), as a 0-d array allows
        return format(self._element(), spec) if spec else super().__format__(spec)


def one_element(array: Any) -> Any:
    """``array`` delivered: a host array of shape (1,) as a :class:`OneElementArray` view, anything else as is."""
    if type(array) is np.ndarray and array.shape == (1,):
        return array.view(OneElementArray)
    return array
