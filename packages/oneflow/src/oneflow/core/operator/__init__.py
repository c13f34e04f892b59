"""``oneflow.core.operator``: the part of legacy's operator messages programs and saved models use
(``op_conf_pb2``, ``interface_blob_conf_pb2``)."""
