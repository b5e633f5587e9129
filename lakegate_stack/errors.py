"""Errors of the local stack (the dev/test/demo harness), raised to scripts and pytest fixtures.

StackError
├── ArtifactError      a pinned jar group is missing or Maven could not resolve it (fatal)
├── ServiceStartError  a process exited or did not become ready in time (see its log file)
└── ChaosError         a chaos run could not be carried out (lakegate_stack.chaos; not a finding)
"""

from __future__ import annotations


class StackError(Exception):
    """Base of every error of :mod:`lakegate_stack`."""


class ArtifactError(StackError):
    """A jar group is not in the cache or could not be resolved; the message says what to run."""


class ServiceStartError(StackError):
    """A stack process died or missed its readiness deadline; the message names its log file."""
