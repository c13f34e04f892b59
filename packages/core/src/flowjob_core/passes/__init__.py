"""Graph passes of core: autodiff, and the pipeline that verifies and runs every registered pass."""
