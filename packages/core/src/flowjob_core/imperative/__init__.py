"""Legacy v0.4's eager tensors: ``flow.Tensor``, ``flow.nn.Module``, ``flow.nn.Parameter``, ``flow.autograd``.

Each tensor operation runs op records right away through a one-operation job (``tape``); gradients run the
records' gradient rules through the autodiff pass's own sweep (``backprop``). See docs/architecture.md,
"Eager tensors".
"""
