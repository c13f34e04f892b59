"""``oneflow.core.common``: legacy's common messages (``data_type_pb2``)."""
