"""Every test starts and ends without a default session (legacy tests did the same in setUp)."""
from __future__ import annotations

from typing import Iterator

import pytest

import flowjob_core


@pytest.fixture(autouse=True)
def fresh_session() -> Iterator[None]:
    flowjob_core.clear_default_session()
    yield
    flowjob_core.clear_default_session()
