"""Where Lakegate keeps what it downloads outside git: the cache and the jar directory.

Read by the service's Spark factory (which jars to load) and by the local stack's artifact
fetcher (where to put them), so both agree without importing each other.
"""

from __future__ import annotations

import os
from pathlib import Path


def default_cache_dir() -> Path:
    """``$LAKEGATE_CACHE_DIR`` or ``~/.cache/lakegate``: the project's cache outside git."""
    env = os.environ.get("LAKEGATE_CACHE_DIR")
    return Path(env).expanduser() if env else Path.home() / ".cache" / "lakegate"


def default_jars_dir() -> Path:
    """``$LAKEGATE_JARS_DIR`` or ``<cache>/jars``: one sub-directory of jars per group."""
    env = os.environ.get("LAKEGATE_JARS_DIR")
    return Path(env).expanduser() if env else default_cache_dir() / "jars"
