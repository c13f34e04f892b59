"""``oneflow.core.job``: legacy's job messages programs use (``initializer_conf_pb2``, ``job_conf_pb2``)."""
