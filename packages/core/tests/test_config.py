"""flow.function_config and flow.config: known options, checked values, clear errors."""
import pytest

from flowjob_core import ConfigError, FunctionConfig, global_function
from flowjob_core.ir import dtypes
from flowjob_core.trace import scope
from flowjob_core.api import flow_config as settings
from flowjob_core.api.function import JobDefinitionError
from flowjob_core.api.placement import placement


def test_known_options_are_setters():
    cfg = FunctionConfig()
    cfg.default_data_type(dtypes.float)
    cfg.default_placement_scope(placement("cpu", "0:0"))
    cfg.default_logical_view(scope.mirrored_view())
    cfg.enable_inplace()  # flags default to True when called bare
    cfg.train.primary_lr(0.1)
    cfg.train.model_update_conf({"naive_conf": {}})
    assert cfg.get("default_data_type") is dtypes.float32
    assert cfg.get("enable_inplace") is True
    assert cfg.train.get("primary_lr") == 0.1 and cfg.train.is_set


def test_unknown_option_is_a_clear_error():
    cfg = FunctionConfig()
    with pytest.raises(ConfigError, match="unknown function_config option 'default_dtype'.*default_data_type"):
        cfg.default_dtype(dtypes.float)
    with pytest.raises(ConfigError, match="unknown train option 'primary_learning_rate'"):
        cfg.train.primary_learning_rate(0.1)


def test_values_are_checked():
    cfg = FunctionConfig()
    with pytest.raises(ConfigError, match="default_data_type.*expects a flowjob dtype"):
        cfg.default_data_type("not a dtype")
    with pytest.raises(ConfigError, match="default_placement_scope"):
        cfg.default_placement_scope("cpu")
    with pytest.raises(ConfigError, match="primary_lr.*a number"):
        cfg.train.primary_lr("0.1")


def test_legacy_positional_config_decides_the_type(monkeypatch):
    import flowjob_core.api.function as function_module
    made = []
    monkeypatch.setattr(function_module, "JobFunction",
                        lambda func, job_type, config, *rest: made.append((job_type, config)))
    monkeypatch.setattr(function_module, "get_default_session", lambda: None)
    train_cfg = FunctionConfig()
    train_cfg.train.primary_lr(0.1)
    global_function(train_cfg)(lambda: None)
    global_function(FunctionConfig())(lambda: None)
    global_function(type="train", function_config=FunctionConfig())(lambda: None)
    assert [t for t, _ in made] == ["train", "predict", "train"]
    assert made[0][1] is train_cfg
    with pytest.raises(JobDefinitionError, match="type must be 'predict' or 'train'"):
        global_function("inference")
    with pytest.raises(JobDefinitionError, match="function_config must come from"):
        global_function("predict", {"lr": 1})


def test_session_settings_are_checked():
    with pytest.raises(ConfigError, match="gpu_device_num expects a non-negative int"):
        settings.gpu_device_num(-1)
    with pytest.raises(ConfigError, match="cpu_device_num"):
        settings.cpu_device_num("2")


def test_a_world_stands_for_its_own_machines_or_fewer_whose_devices_its_ranks_are():
    from types import SimpleNamespace

    from flowjob_core.runtime.world import can_stand_for

    one_host = SimpleNamespace(size=4, machines=4)  # ranks stand for machines
    assert [m for m in range(1, 6) if can_stand_for(one_host, m)] == [1, 2, 4]
    two_hosts = SimpleNamespace(size=4, machines=2)  # the hosts are the machines
    assert [m for m in range(1, 6) if can_stand_for(two_hosts, m)] == [2]
    alone = SimpleNamespace(size=1, machines=1)
    assert [m for m in range(0, 3) if can_stand_for(alone, m)] == [1]
