"""Unit tests of lakegate_core: the wire model."""
