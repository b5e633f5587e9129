"""Checks of the whole repository: layers, the design's module map, types."""
