# no "from __future__ import annotations": the job signatures below use local names
"""Debug mode (``flow.config.enable_debug_mode``): the verifier runs after every pass and names the pass
that broke the job."""
import types

import numpy as np
import pytest

from flowjob_core import JobFunction, Session, apply, hookimpl, make_plugin_manager
from flowjob_core.passes.pipeline import VerificationError


def _drop_first_node(job, ctx):
    """A broken plugin pass: removes the node that defines the input, keeping its readers."""
    job.nodes.pop(0)


def _shuffle_nothing(job, ctx):
    """A correct pass that changes nothing."""


def _session(toy, broken_pass):
    plugin = types.SimpleNamespace(flowjob_add_passes=hookimpl(lambda registry: (
        registry.add("breaks-the-job", broken_pass, after="dce"),)))
    return Session(make_plugin_manager(plugins=[toy, plugin], autoload=False))


def _job(session, toy):
    def job(x: toy.Array((2,))) -> toy.Sync:
        return apply("twice", [x])
    return JobFunction(job, "predict", None, session)


def test_debug_mode_names_the_pass_that_broke_the_job(toy):
    session = _session(toy, _drop_first_node)
    try:
        session.config.debug_mode = True
        with pytest.raises(VerificationError, match="after pass 'breaks-the-job'.*used before it is defined"):
            _job(session, toy)(np.ones(2, np.float32))
    finally:
        session.close()


def test_without_debug_mode_only_the_final_verification_catches_it(toy):
    session = _session(toy, _drop_first_node)
    try:
        with pytest.raises(VerificationError) as caught:
            _job(session, toy)(np.ones(2, np.float32))
        assert "after pass" not in str(caught.value)
    finally:
        session.close()


def test_debug_mode_runs_a_correct_pipeline_unchanged(toy):
    session = _session(toy, _shuffle_nothing)
    try:
        session.config.debug_mode = True
        np.testing.assert_array_equal(_job(session, toy)(np.ones(2, np.float32)), np.full(2, 2, np.float32))
    finally:
        session.close()
