"""The legacy user API core provides: global_function, eager mode, flow.config, flow.env, variables, checkpoints."""
