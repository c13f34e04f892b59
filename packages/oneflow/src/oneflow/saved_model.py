"""``flow.saved_model``: ``ModelBuilder``, ``GraphBuilder``, ``SignatureBuilder`` from flowjob-serving
(``pip install "flowjob[serving]"``; without it, importing this module names the distribution)."""
from oneflow._exports import Source, export

SOURCES = (Source("flowjob_serving.model_builder", "flowjob-serving",
                  legacy=("ModelBuilder", "GraphBuilder", "SignatureBuilder")),)

__all__ = export(globals(), "flow.saved_model", *SOURCES)
