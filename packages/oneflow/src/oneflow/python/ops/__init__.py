"""``oneflow.python.ops``: the legacy helper modules that programs and OneFlow's own tests imported by path."""
