"""Job configuration: the checked option machinery and ``flow.function_config()``."""
