"""Legacy's top-level spellings of the ``flow.image`` functions (``flow.image_decode`` is ``flow.image.decode``)."""
from __future__ import annotations

from flowjob_ofrecord.api.image import Resize as image_resize
from flowjob_ofrecord.api.image_handles import batch_align as image_batch_align
from flowjob_ofrecord.api.image_handles import decode as image_decode
from flowjob_ofrecord.api.image_handles import flip as image_flip
from flowjob_ofrecord.api.image_handles import normalize as image_normalize
from flowjob_ofrecord.api.image_handles import random_crop as image_random_crop
from flowjob_ofrecord.api.image import target_resize as image_target_resize

__all__ = ["image_batch_align", "image_decode", "image_flip", "image_normalize", "image_random_crop", "image_resize",
           "image_target_resize"]
