# no "from __future__ import annotations": the signatures below use local names
"""Autodiff: the legacy seed and scaling, fan-out sums, unbroadcasting, and clear failures."""
import numpy as np
import pytest

from flowjob_core import BlobSpec, FlowjobError, Intent, JobFunction, SideOutput, add_loss, apply, current_builder
from flowjob_core.passes.autodiff import differentiate
from flowjob_core.passes.pipeline import PassContext, run_passes


def _train(session, toy, body, shape=(3,)):
    def job(x: toy.Array(shape)) -> toy.Later:
        body(x)
    return JobFunction(job, "train", None, session)


def _final(session, fn):
    return run_passes(fn.ensure_traced(), PassContext(session, session.registries, session.backend))


def _expose_grads(job, ctx):
    """A test pass (placed like a plugin's, before dce): raw gradients of requested blobs become side outputs."""
    for intent in job.intents:
        if intent.kind == "expose":
            lbn, sink = intent.payload["lbn"], intent.payload["sink"]
            store = ctx.bindings.add(lambda v, lbn=lbn, sink=sink: sink.__setitem__(lbn, v.copy()), "expose")
            job.side_outputs.append(SideOutput(ctx.grads[lbn], store))


@pytest.fixture
def session(toy):
    import types
    from flowjob_core import Session, hookimpl, make_plugin_manager
    plugin = types.SimpleNamespace(flowjob_add_passes=hookimpl(
        lambda registry: registry.add("expose", _expose_grads, after="autodiff", before="dce")))
    s = Session(make_plugin_manager(plugins=[toy, plugin], autoload=False))
    yield s
    s.close()


def _fetch_grads(session, fn, lbns):
    """Run one step of ``fn`` with the raw gradients of ``lbns`` exposed; return the final job and them."""
    got = {}
    job = fn.ensure_traced()
    for lbn in lbns:
        job.grad_targets.append(lbn) if lbn not in job.grad_targets else None
        job.intents.append(Intent("expose", {"lbn": lbn, "sink": got}))
    fn(np.arange(1, 4, dtype=np.float32))
    session.sync()  # the job returns at once; its side outputs arrive with the step
    return fn.plan().job, got


def test_seed_is_ones_and_variable_grads_are_scaled(session, toy):
    names = {}

    def body(x):
        w = current_builder().add_variable("w", BlobSpec((3,), np.float32))
        loss = apply("toy_add", [w, x])  # loss has 3 elements
        names.update(w=w.lbn, loss=loss.lbn)
        add_loss(loss)
    fn = _train(session, toy, body)
    final, grads = _fetch_grads(session, fn, ["w/out"])
    np.testing.assert_array_equal(grads["w/out"], np.ones(3))  # raw: seed of ones
    job = fn.ensure_traced().copy()
    ctx = PassContext(session, session.registries, session.backend)
    differentiate(job, ctx)
    scaled = next(n for n in job.nodes if n.outputs[0] == ctx.variable_grads["w"])
    assert scaled.inputs == (ctx.grads["w/out"],)
    assert scaled.op == "scalar_mul" and scaled.attrs["scalar"] == pytest.approx(1 / 3)


def test_fan_out_is_summed(session, toy):
    def body(x):
        w = current_builder().add_variable("w2", BlobSpec((3,), np.float32))
        add_loss(apply("toy_add", [apply("twice", [w]), w]))  # d/dw = 2 + 1
    final, grads = _fetch_grads(session, _train(session, toy, body), ["w2/out"])
    np.testing.assert_array_equal(grads["w2/out"], np.full(3, 3.0))
    assert any(n.op == "add_n" for n in final.nodes)


def test_broadcasting_is_undone_in_one_place(session, toy):
    def body(x):
        b = current_builder().add_variable("b", BlobSpec((1,), np.float32))
        add_loss(apply("toy_add", [x, b]))
    final, grads = _fetch_grads(session, _train(session, toy, body), ["b/out"])
    np.testing.assert_array_equal(grads["b/out"], [3.0])
    assert any(n.op == "unbroadcast" for n in final.nodes)


def test_train_job_without_loss_is_an_error(session, toy):
    fn = _train(session, toy, lambda x: apply("twice", [x]))
    with pytest.raises(FlowjobError, match="has no loss"):
        _final(session, fn)


def test_grad_target_off_the_loss_path_is_an_error(session, toy):
    def body(x):
        w = current_builder().add_variable("w3", BlobSpec((3,), np.float32))
        side = apply("twice", [x])
        current_builder().request_grad(side)
        add_loss(apply("twice", [w]))
    with pytest.raises(FlowjobError, match="not on the path"):
        _final(session, _train(session, toy, body))


def test_not_differentiable_op_on_the_path_is_an_error(session, toy):
    def body(x):
        w = current_builder().add_variable("w4", BlobSpec((3,), np.float32))
        add_loss(apply("boom", [w], name="nondiff"))
    with pytest.raises(FlowjobError, match="'nondiff' \\(boom\\).*not differentiable"):
        _final(session, _train(session, toy, body))


def test_add_loss_in_a_predict_job_is_an_error(session, toy):
    def job(x: toy.Array((3,))) -> toy.Later:
        add_loss(x)
    with pytest.raises(FlowjobError, match="needs type='train'"):
        JobFunction(job, "predict", None, session).ensure_traced()


def test_a_gradient_node_is_placed_where_its_forward_node_is(session, toy):
    from flowjob_core.api.placement import placement

    def body(x):
        w = current_builder().add_variable("w", BlobSpec((3,), np.float32))
        with placement("cpu", "0:1"):
            loss = apply("twice", [apply("toy_add", [w, x])])
        add_loss(loss)

    final = _train(session, toy, body).ensure_traced().copy()
    differentiate(final, PassContext(session, session.registries, session.backend))
    forward = next(n for n in final.nodes if n.op == "twice")
    grads = [n for n in final.nodes if n.name.startswith(f"{forward.name}_grad") and not n.name.endswith("seed")]
    assert forward.placement == ("0:1",) and grads
    assert {n.placement for n in grads} == {("0:1",)}
    seed = next(n for n in final.nodes if n.name.endswith("_grad_seed"))
    assert seed.placement == ()  # made for the loss, by no forward node: the job's default placement
