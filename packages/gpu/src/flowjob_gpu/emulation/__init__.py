"""An emulated CuPy on numpy, for checking on any CPU that kernels would run on CuPy.

``factory.emulated_cupy()`` (and ``emulated_cupyx()``) is a module with exactly the real CuPy's public names
(the snapshot in ``cupy_names.json``, ``names.py``); its arrays (``array.py``) refuse implicit conversion to numpy, its
functions (``functions.py``, ``toplevel.py``, ``numpy_modules.py``) refuse host arrays, and what needs
CUDA refuses with ``NotImplementedError`` (``unemulated.py``). It is built on first use: importing
the package builds nothing and replaces no module. ``FLOWJOB_GPU_EMULATION=1`` registers the
gpu backend on it (``backend.py``).
"""
