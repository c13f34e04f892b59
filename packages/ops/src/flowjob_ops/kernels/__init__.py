"""Array kernels behind the ops (convolution, pooling, padding geometry).

Every kernel is written once against an array module ``xp`` (numpy or cupy),
is built once per graph node with static shapes, preallocates its buffers and
returns the same output array on every call.  Import the submodules directly:
``from flowjob_ops.kernels import conv, pool, padding``.
"""
