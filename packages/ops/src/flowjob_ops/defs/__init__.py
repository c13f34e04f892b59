"""Op records, one module per family; each module lists its records in ``OPS``."""
