"""Kernel overrides, one subpackage per backend tag (``cpu``: numpy): tuned variants of the records' reference
kernels, registered through ``flowjob_add_kernels`` and checked against the reference by the tests."""
