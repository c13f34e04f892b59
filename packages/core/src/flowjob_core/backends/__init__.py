"""Backends shipped with core: numpy, the embedded default."""
