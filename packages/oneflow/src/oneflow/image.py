"""``flow.image``: resizing and normalizing decoded OFRecord images (from flowjob-ofrecord)."""
from oneflow._exports import Source, export

SOURCES = (Source("flowjob_ofrecord.api.image", "flowjob-ofrecord", legacy=("Resize", "CropMirrorNormalize")),
           Source("flowjob_ofrecord.api.image_handles", "flowjob-ofrecord"))  # the tensor-buffer ops

__all__ = export(globals(), "flow.image", *SOURCES)
