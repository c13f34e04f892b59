"""``oneflow.core.register``: legacy's blob naming messages (``logical_blob_id_pb2``)."""
