"""``oneflow.core.framework``: legacy's user-op messages (``user_op_attr_pb2``, ``user_op_conf_pb2``)."""
