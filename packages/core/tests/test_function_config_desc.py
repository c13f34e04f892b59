"""``function_config.function_desc``: legacy's getter side of a config being filled in, the same
``FunctionDesc`` that ``flow.current_global_function_desc()`` gives inside a job."""
import pytest

from flowjob_core import FlowjobError
from flowjob_core.config.function_config import FunctionConfig


def test_function_desc_reads_what_was_set():
    cfg = FunctionConfig()
    cfg.enable_inplace()
    cfg.enable_numerics_check(False)
    desc = cfg.function_desc
    assert desc.enable_inplace is True and desc.enable_numerics_check is False
    assert desc.HasAttr("enable_inplace") and not desc.HasAttr("enable_reused_mem")
    assert not desc.IsTrainable()
    with pytest.raises(FlowjobError, match="did not set 'enable_reused_mem'.*enable_inplace"):
        getattr(desc, "enable_reused_mem")  # noqa: B009 - the attribute read is the test


def test_a_config_with_training_options_describes_a_trainable_function():
    cfg = FunctionConfig()
    cfg.train.primary_lr(0.1)
    assert cfg.function_desc.IsTrainable()
