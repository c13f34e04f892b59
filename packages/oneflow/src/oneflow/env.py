"""``flow.env``: the run's environment (legacy ``flow.env.*``). ``log_dir`` writes the run's log into a
folder; the machine, port and glog settings are checked and recorded (``python -m oneflow info``)."""
from flowjob_core.api.env import (
    ctrl_port, current_resource, data_port, grpc_use_no_signal, init, init_bootstrap_confs, log_dir, logbuflevel,
    logtostderr, machine, master_host, master_port, world_size)

__all__ = ["ctrl_port", "current_resource", "data_port", "grpc_use_no_signal", "init", "init_bootstrap_confs",
           "log_dir", "logbuflevel", "logtostderr", "machine", "master_host", "master_port", "world_size"]
