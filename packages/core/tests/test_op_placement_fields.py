"""What an op learns from its placement: ``OpDef.effects.cpu_only`` (legacy's CPU-only user ops stay on the cpu
whatever the scope names), ``OpDef.shape.parallel_num_attr`` (the placement's device count as an attribute) and
legacy's ``blob.parallel_conf`` read from the placement a blob was traced in."""
# no "from __future__ import annotations": the signatures below use local names

import warnings

import numpy as np

from flowjob_core import (
    BlobSpec, Effects, FunctionConfig, JobFunction, OpDef, Session, ShapeTraits, apply, hookimpl, make_plugin_manager)
from flowjob_core.api.placement import placement


def _count_kernel(ctx):
    out, count = ctx.out(0), ctx.attrs["devices"]
    return lambda x: ctx.xp.multiply(x, count, out=out)


CPU_ONLY = OpDef("host_twice", lambda inputs, attrs: [inputs[0]], kernel=lambda ctx: lambda x: x * 2,
                 not_differentiable=True, effects=Effects(cpu_only=True))
COUNTED = OpDef("times_devices", lambda inputs, attrs: [BlobSpec(inputs[0].shape, inputs[0].dtype)],
                kernel=_count_kernel, not_differentiable=True, shape=ShapeTraits(parallel_num_attr="devices"))


class _Plugin:
    @hookimpl
    def flowjob_add_ops(self, registry):
        registry.add(CPU_ONLY)
        registry.add(COUNTED)


def _session(toy):
    return Session(make_plugin_manager(plugins=[toy, _Plugin()], autoload=False))


def _job(session, toy, body, config=None):
    ns = {"toy": toy, "body": body}
    exec("def job(x: toy.Array((3,))) -> toy.Sync:\n    return body(x)", ns)
    return JobFunction(ns["job"], "predict", config, session)


def test_a_cpu_only_op_stays_on_the_cpu_under_a_gpu_placement(toy):
    session, seen = _session(toy), {}
    try:
        def body(x):
            with placement("gpu", "0:0-1"):
                seen["twice"] = apply("twice", [x])
                seen["host"] = apply("host_twice", [seen["twice"]])
            return seen["host"]

        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # gpu placements run on the cpu here
            got = _job(session, toy, body)(np.arange(3, dtype=np.float32))
        np.testing.assert_array_equal(got, np.arange(3) * 4.0)
        assert seen["twice"].parallel_conf.device_tag() == "gpu"
        assert seen["host"].parallel_conf.device_tag() == "cpu"
        assert seen["host"].parallel_conf.device_name() == ["0:0-1"]  # the devices of the placement
        assert [n.device for n in _job(session, toy, body).ensure_traced().nodes if n.op == "host_twice"] == ["cpu"]
    finally:
        session.close()


def test_parallel_conf_falls_back_to_the_default_placement(toy):
    session, seen = _session(toy), []
    try:
        config = FunctionConfig()
        config.default_placement_scope(placement("cpu", "0:0-2"))
        _job(session, toy, lambda x: seen.append(apply("twice", [x])) or seen[-1], config).ensure_traced()
        _job(session, toy, lambda x: seen.append(apply("twice", [x])) or seen[-1]).ensure_traced()
        assert str(seen[0].parallel_conf) == 'device_tag: "cpu"\ndevice_name: "0:0-2"'
        assert seen[1].parallel_conf.device_name() == ["0:0"]
    finally:
        session.close()


def test_parallel_num_attr_is_the_placement_device_count(toy):
    session = _session(toy)
    try:
        def body(x):
            with placement("cpu", ["0:0-3", "1:0-1"]):
                return apply("times_devices", [apply("times_devices", [x], {"devices": 99})])

        x = np.ones(3, np.float32)
        assert _job(session, toy, lambda x: apply("times_devices", [x]))(x).tolist() == [1.0] * 3
        np.testing.assert_array_equal(_job(session, toy, body)(x), x * 36)  # six devices, twice; 99 overridden
    finally:
        session.close()
