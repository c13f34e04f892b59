"""``flow.config``: session settings."""
from flowjob_core.settings import cpu_device_num, enable_debug_mode, gpu_device_num, machine_num, seed

__all__ = ["cpu_device_num", "enable_debug_mode", "gpu_device_num", "machine_num", "seed"]
