"""Checkpoints: the folder ``layout``, the ``atomic_replace`` of a folder and what killed saves left,
``save_load`` (save, get, load, load_variables), legacy's ``session_checkpoint`` (``CheckPoint``,
``SimpleCheckPointManager``), the numbered ``manager``, the several-``ranks`` rules, ``variable_blobs``.
The public entry points are in ``flowjob_core.api.model_io``."""
