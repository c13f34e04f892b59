"""flowjob-ops: the op records, their reference kernels, and the public functions of flow.nn, flow.math,
flow.layers and the top-level ``flow.*`` array functions.

The tree follows the roles: ``records/`` holds the op records (one ``OpDef`` per op: inference, gradient
rule, reference kernel or elementwise descriptor), one module per op family; ``kernels/`` the reference
``xp`` kernels and their helpers; ``overrides/cpu/`` the kernels tuned for the numpy backend; ``passes/``
the graph passes; ``api/`` the public functions, which the ``oneflow`` face gathers into its namespaces;
``plugin`` registers it all.
"""

__version__ = "0.1.0"
