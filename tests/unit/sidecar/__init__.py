"""Unit tests of the sidecar."""
