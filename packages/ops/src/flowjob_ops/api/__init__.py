"""The public functions of legacy OneFlow (``flow.*``, ``flow.math``, ``flow.nn``, ``flow.layers``, ...), one module
per family of what they build, each listing its names in ``__all__`` (and, where legacy exported a name in
several namespaces, ``NAMESPACES``); the ``oneflow`` face assembles its namespaces from them.

A public module refers to ops by name (``flowjob_core.apply``) and never imports another public module:
what several share lives in the private ``_common`` (naming, errors, argument checks), ``_windows``
(convolution and pooling arguments) and ``_initializers`` (the initializer values).
"""
