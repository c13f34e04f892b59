"""The eager tensor's methods that run an op package's records come from that package's plugin: a session
without it has tensors without them (an AttributeError saying where they come from), a plugin's method is found."""
from __future__ import annotations

import numpy as np
import pytest

from flowjob_core import Session, clear_default_session, hookimpl, make_plugin_manager
from flowjob_core.imperative.tensor import Tensor
from flowjob_core.runtime import session as session_module


class _ScalingPlugin:
    @hookimpl
    def flowjob_add_ops(self, registry):
        registry.add_tensor_method("scaled", lambda tensor, times=2: tensor.numpy() * times)


@pytest.fixture
def default_session(monkeypatch):
    def use(*plugins):
        session = Session(make_plugin_manager(plugins=plugins, autoload=False))
        monkeypatch.setattr(session_module, "_default", session)
        return session
    yield use
    clear_default_session()


def test_a_session_without_the_ops_plugin_has_tensors_without_its_methods(default_session):
    default_session()
    x = Tensor(np.ones((2, 3), np.float32))
    with pytest.raises(AttributeError, match=r"'flow.Tensor' object has no attribute 'reshape' \(the methods that "
                                             r"run ops come from the op packages' plugins"):
        x.reshape(3, 2)
    assert x.shape == (2, 3) and not hasattr(x, "_anything_private")


def test_a_plugins_tensor_method_is_found_and_called_with_the_tensor(default_session):
    default_session(_ScalingPlugin())
    x = Tensor(np.ones((2,), np.float32))
    assert x.scaled.__self__ is x
    np.testing.assert_array_equal(x.scaled(times=3), [3.0, 3.0])
