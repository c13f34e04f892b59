"""Device tags come from the backend registry: a plugin's backend tag is a valid placement and
FLOWJOB_DEVICE value and its jobs run; an unknown tag is an error listing the registered tags; the
legacy cpu/gpu tags stay valid without a gpu backend (gpu falls back to cpu with one warning)."""
import types
import warnings

import numpy as np
import pytest

from flowjob_core import Backend, ConfigError, JobFunction, Session, apply, hookimpl, make_plugin_manager
from flowjob_core.api.placement import placement as placement_scope
from flowjob_core.plugins.registry import BackendRegistry


def _xpu_plugin() -> types.ModuleType:
    """A third backend: numpy arrays under the tag "xpu", with counted host transfers."""
    plugin = types.ModuleType("xpu_backend_plugin")
    plugin.transfers = {"from_host": 0, "to_host": 0}

    def from_host(a):
        plugin.transfers["from_host"] += 1
        return np.array(a, copy=True)

    def to_host(a):
        plugin.transfers["to_host"] += 1
        return np.array(a, copy=True)

    @hookimpl
    def flowjob_add_backends(registry):
        registry.add(Backend(tag="xpu", name="numpy as xpu", xp=np, from_host=from_host, to_host=to_host,
                             make_rng=np.random.default_rng))

    plugin.flowjob_add_backends = flowjob_add_backends
    return plugin


@pytest.fixture
def xpu_session(toy):
    s = Session(make_plugin_manager(plugins=[toy, _xpu_plugin()], autoload=False))
    yield s
    s.close()


def _twice_job(session, toy, placement=None):
    def job(x: toy.Array((3,))) -> toy.Sync:
        if placement is None:
            return apply("twice", [x])
        with placement_scope(placement, "0:0"):
            return apply("twice", [x])

    return JobFunction(job, "predict", None, session)


def test_a_plugin_backend_tag_is_a_placement_and_runs(xpu_session, toy):
    fn = _twice_job(xpu_session, toy, "xpu")
    with pytest.warns(RuntimeWarning, match="runs every job on its 'cpu' backend, so ops placed on 'xpu'"):
        np.testing.assert_array_equal(fn(np.arange(3, dtype=np.float32)), [0, 2, 4])
    assert {n.device for n in fn.ensure_traced().nodes if n.op == "twice"} == {"xpu"}
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # once per tag and session
        _twice_job(xpu_session, toy, "xpu")(np.ones(3, np.float32))


def test_flowjob_device_runs_the_session_on_a_plugin_backend(xpu_session, toy, monkeypatch):
    monkeypatch.setenv("FLOWJOB_DEVICE", "xpu")
    plugin = next(p for p in xpu_session.pm.get_plugins() if getattr(p, "__name__", "") == "xpu_backend_plugin")
    fn = _twice_job(xpu_session, toy, "xpu")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # placed where the session runs: no warning
        got = fn(np.arange(3, dtype=np.float32))
    np.testing.assert_array_equal(got, [0, 2, 4])
    assert xpu_session.backend.tag == "xpu"
    assert plugin.transfers["from_host"] >= 1 and plugin.transfers["to_host"] >= 1  # not the host-array path
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a legacy cpu scope inside stays quiet
        np.testing.assert_array_equal(_twice_job(xpu_session, toy, "cpu")(np.ones(3, np.float32)), [2, 2, 2])


def test_an_unknown_tag_is_an_error_listing_the_registered_tags(xpu_session, toy, monkeypatch):
    fn = _twice_job(xpu_session, toy, "tpu")
    with pytest.raises(ValueError, match=r"flow.scope.placement: device_tag 'tpu' names no registered backend; "
                                         r"registered: \['cpu', 'xpu'\] \(and the legacy 'gpu'\)"):
        fn(np.ones(3, np.float32))
    with pytest.raises(ValueError, match="device_tag must be a non-empty string"):
        placement_scope("", "0:0")
    monkeypatch.setenv("FLOWJOB_DEVICE", "tpu")
    fresh = Session(make_plugin_manager(plugins=[toy, _xpu_plugin()], autoload=False))  # no backend chosen yet
    try:
        with pytest.raises(ConfigError, match=r"FLOWJOB_DEVICE='tpu' names no registered backend; "
                                              r"registered: \['cpu', 'xpu'\]"):
            _ = fresh.backend
    finally:
        fresh.close()


def test_legacy_tags_need_no_backend(session, toy):
    assert placement_scope("gpu", "0:0").device_tag == "gpu"  # outside a job: no session is needed
    if session.registries.backends.get("gpu") is None:
        with pytest.warns(RuntimeWarning, match="no GPU backend is available") as record:
            out = _twice_job(session, toy, "gpu")(np.ones(3, np.float32))
        assert len(record) == 1
        np.testing.assert_array_equal(out, [2, 2, 2])


def test_the_registry_lists_and_checks_tags():
    registry = BackendRegistry()
    registry.add(Backend(tag="xpu", name="x", xp=np))
    assert registry.tags() == ["xpu"]
    assert registry.accepts("xpu") and registry.accepts("cpu") and registry.accepts("gpu")
    assert not registry.accepts("tpu")
    assert "registered: ['xpu'] (and the legacy 'cpu', 'gpu')" in registry.unknown_tag_message("tpu")
