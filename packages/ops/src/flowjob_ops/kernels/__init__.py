"""Array kernels behind the ops: the reference kernels the op records build (``window``, the one window
geometry of convolution and pooling; ``conv`` and ``pool``, rank-generic; ``conv2d``, the 2-D im2col of
the fused ops and of the cpu backend; ...) and their helpers.

Every kernel is written once against an array module ``xp`` (numpy or cupy),
is built once per graph node with static shapes, preallocates its buffers and
returns the same output array on every call.  Import the submodules directly:
``from flowjob_ops.kernels import conv, pool, window``.
"""
