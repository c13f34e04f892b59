"""flowjob_serving: legacy OneFlow's saved models (``flow.saved_model``) and serving sessions (``flow.serving``).

``ModelBuilder`` writes a predict job's traced op list and its variables as legacy's saved-model folder;
``InferenceSession`` checks such a folder (its digests, its variable files, where its fields point) and
serves it. The face re-exports both as ``flow.saved_model`` and ``flow.serving``.
"""
from flowjob_serving.inference_session import InferenceSession, ModelVersionPolicy, SessionOption
from flowjob_serving.digests import SavedModelWarning
from flowjob_serving.model_builder import GraphBuilder, ModelBuilder, SignatureBuilder

__version__ = "0.1.0"
__all__ = ["GraphBuilder", "InferenceSession", "ModelBuilder", "ModelVersionPolicy", "SavedModelWarning",
           "SessionOption", "SignatureBuilder"]
