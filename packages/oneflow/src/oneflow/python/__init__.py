"""``oneflow.python``: legacy's source tree, kept only for the internal modules programs imported by path.

Legacy programs sometimes reached into it (the DCGAN benchmark's ``layers.py`` imports
``oneflow.python.framework.distribute``); the public names live on ``flow.*``.
"""
