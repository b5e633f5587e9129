"""The commit service's errors, one tree; the HTTP layer maps them to JSON 4xx/5xx bodies.

    LakegateError
    ├── ConfigError          bad or missing configuration; fatal at start (exit code 2)
    └── SparkSetupError      the Spark/Delta runtime cannot start (jars missing, JVM failed); fatal

Retryable errors (a Delta commit conflict, storage briefly unavailable) join this tree with the
commit path; each class says whether a retry may help through ``retryable``.
"""

from __future__ import annotations


class LakegateError(Exception):
    """Base of every error the commit service raises on purpose."""

    retryable: bool = False


class ConfigError(LakegateError):
    """The configuration is invalid; the message names the key and what is wrong with it."""


class SparkSetupError(LakegateError):
    """Spark with Delta could not be set up; the message says what to run or fix."""
