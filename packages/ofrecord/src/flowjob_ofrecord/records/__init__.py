"""The op records the plugin registers: readers (a source op each), decoders and image ops."""
