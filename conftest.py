"""The repository's tests opt into the testing kit's pytest plugin here, at the rootdir.

pytest honours ``pytest_plugins`` only in conftests it loads before configuring: this one is
loaded first by every tox environment (each runs pytest from the repository root on folders
below it), so the ``ci``/``dev`` hypothesis profile is in force before any test module, even
when ``pytest packages kernels tests examples/plugins`` collects the package folders' conftests late.
The ``data`` and ``kernels`` environments install flowjob-data or flowjob-kernels alone, without
flowjob-core: their tests run with hypothesis's own defaults there, as they would in any project.
"""
import importlib.util

pytest_plugins = ["flowjob_core.testing.pytest_plugin"] if importlib.util.find_spec("flowjob_core") else []
