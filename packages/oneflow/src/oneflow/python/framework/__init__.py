"""``oneflow.python.framework``: the legacy internal modules that programs imported by path."""
