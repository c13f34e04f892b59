"""``flow.serving``: ``InferenceSession``, ``SessionOption``, ``ModelVersionPolicy`` from flowjob-serving
(``pip install "flowjob[serving]"``; without it, importing this module names the distribution)."""
from oneflow._exports import Source, export

SOURCES = (Source("flowjob_serving.inference_session", "flowjob-serving",
                  legacy=("InferenceSession", "SessionOption", "ModelVersionPolicy")),)

__all__ = export(globals(), "flow.serving", *SOURCES)
