"""Op records, one module per family; each lists its records in ``OPS`` (``plugin.OP_MODULES`` names them).

``common`` and ``special`` hold helpers, not records.
"""
