"""``oneflow.core.serving``: legacy's saved-model format (``saved_model_pb2``)."""
