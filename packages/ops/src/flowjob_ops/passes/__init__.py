"""The package's graph passes, one module per registered pass: ``fuse_conv`` ("fuse-conv"), ``fuse_dense``
("fuse-dense"), ``repeat_acc`` ("repeat-acc") and ``auto_mixed_precision`` ("auto-mixed-precision");
``plugin.flowjob_add_passes`` places them in the pipeline's phases."""
