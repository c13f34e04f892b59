"""Legacy ``flow.env.*``: log_dir writes the run's log; the network and glog settings are checked and recorded."""
import logging
import os
import subprocess
import sys

import oneflow as flow
import pytest
from flowjob_core.errors import ConfigError
from flowjob_core.config.options import recorded_options
from flowjob_core.runtime.run_log import close_run_log, current_path


@pytest.fixture
def run_log():
    yield
    close_run_log()


def test_log_dir_creates_the_folder_and_writes_flowjob_records(tmp_path, run_log):
    folder = tmp_path / "log" / "run1"
    flow.env.log_dir(str(folder))
    logging.getLogger("flowjob.test").info("an info record")
    logging.getLogger("flowjob.test").debug("a debug record")
    path = current_path()
    assert path is not None and os.path.dirname(path) == str(folder)
    text = (folder / "oneflow.INFO").read_text()  # the link names this run's file
    assert os.path.realpath(folder / "oneflow.INFO") == os.path.realpath(path)
    assert "an info record" in text and "a debug record" not in text
    assert f"run log of pid {os.getpid()}" in text


def test_log_dir_keeps_info_out_of_the_console_and_passes_warnings_on(tmp_path, run_log, caplog):
    caplog.set_level(logging.WARNING)
    flow.env.log_dir(str(tmp_path))
    logging.getLogger("flowjob.test").info("file only")
    logging.getLogger("flowjob.test").warning("both")
    messages = [r.getMessage() for r in caplog.records]
    assert "both" in messages and "file only" not in messages
    assert "file only" in open(current_path()).read()


def test_log_dir_moves_and_close_restores_the_logger(tmp_path, run_log):
    logger = logging.getLogger("flowjob")
    level, propagate = logger.level, logger.propagate
    flow.env.log_dir(str(tmp_path / "a"))
    flow.env.log_dir(str(tmp_path / "b"))
    logging.getLogger("flowjob.test").info("second folder")
    assert "second folder" not in (tmp_path / "a" / "oneflow.INFO").read_text()
    assert "second folder" in (tmp_path / "b" / "oneflow.INFO").read_text()
    close_run_log()
    assert (logger.level, logger.propagate) == (level, propagate)
    assert len([h for h in logger.handlers if isinstance(h, logging.FileHandler)]) == 0


def test_log_dir_on_a_file_names_the_path(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.raises(ConfigError, match=r"log_dir\(.*file.*\): cannot create the folder"):
        flow.env.log_dir(str(blocker / "sub"))
    with pytest.raises(ConfigError, match="expects a folder path"):
        flow.env.log_dir(3)


def test_network_and_glog_settings_are_recorded():
    flow.env.ctrl_port(12143)
    flow.env.data_port(12144)
    flow.env.grpc_use_no_signal()
    flow.env.logtostderr(0)
    flow.env.logbuflevel(-1)
    flow.env.machine([{"addr": "192.168.1.1"}])  # one process: one machine (more: tests/test_distributed_*.py)
    flow.env.init_bootstrap_confs(["127.0.0.1"], 43256)
    got = recorded_options()
    assert got["flow.env.ctrl_port"] == 12143 and got["flow.env.data_port"] == 12144
    assert got["flow.env.grpc_use_no_signal"] is True and got["flow.env.logtostderr"] == 0
    assert got["flow.env.machine"] == [{"addr": "192.168.1.1"}]
    assert got["flow.env.init_bootstrap_confs"]["world_size"] == 1
    flow.env.machine("127.0.0.1")  # several arguments or one address, as legacy took them
    assert recorded_options()["flow.env.machine"] == [{"addr": "127.0.0.1"}]


@pytest.mark.parametrize("call, message", [
    (lambda: flow.env.ctrl_port("12143"), "ctrl_port expects an int"),
    (lambda: flow.env.grpc_use_no_signal(1), "grpc_use_no_signal expects a bool"),
    (lambda: flow.env.machine(["a", "a"]), "'a' is listed more than once"),
    (lambda: flow.env.machine([{"host": "a"}]), "entry 0"),
    (lambda: flow.env.logtostderr(True), "logtostderr expects an int"),
])
def test_bad_values_name_the_setting(call, message):
    with pytest.raises(ConfigError, match=message):
        call()


def test_init_and_current_resource():
    flow.env.init()
    assert flow.env.init() is False  # already started, as legacy answered
    resource = flow.env.current_resource()
    assert resource.machine_num >= 1 and resource.cpu_device_num >= 1
    assert flow.current_resource() == resource  # legacy exported both names


def test_info_shows_env_settings(tmp_path):
    script = ("import oneflow as flow, sys\nflow.env.ctrl_port(9999)\nfrom oneflow.__main__ import info\n"
              "sys.exit(info())\n")
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True).stdout
    assert "flow.env.ctrl_port = 9999" in out
