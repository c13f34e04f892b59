"""The testing kit: gradient checks and hypothesis strategies for op packages."""
