"""``oneflow.core.operator``: the part of legacy's operator messages programs use (``op_conf_pb2``)."""
