"""The public functions the face puts in ``flow.data``, ``flow.image`` and ``flow.image_*``; they refer to
ops by name."""
