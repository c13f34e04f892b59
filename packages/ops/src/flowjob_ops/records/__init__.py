"""Op records, one module per op family named after the math; each lists its records in ``OPS``
(``catalog.RECORD_MODULES`` names the modules).

``common`` holds the helpers records share, not records.
"""
