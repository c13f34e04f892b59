"""An emulated CuPy on numpy, for checking on any CPU that kernels would run on CuPy.

``flowjob_gpu.emulation.cupy`` (and ``.cupyx``) has exactly the real CuPy's public names (the snapshot in
``cupy_names.json``, ``names.py``); its arrays (``array.py``) refuse implicit conversion to numpy, its
functions (``functions.py``, ``toplevel.py``, ``numpy_modules.py``) refuse host arrays, and what needs
CUDA refuses with ``NotImplementedError`` (``unemulated.py``). ``FLOWJOB_GPU_EMULATION=1`` registers the
gpu backend on it (``backend.py``).
"""
