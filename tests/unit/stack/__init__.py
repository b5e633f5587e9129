"""Unit tests of lakegate_stack and the scripts' helpers."""
