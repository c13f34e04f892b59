"""The plugin host: the hookspecs (the plugin API), typed registries, pass order, core's built-in ops."""
