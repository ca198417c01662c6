"""Where shambench keeps its files on the user's machine."""

from __future__ import annotations

import os
from pathlib import Path

from platformdirs import user_cache_dir

CACHE_ENV = "SHAMBENCH_CACHE_DIR"


def cache_dir() -> Path:
    """The root of shambench's caches: `$SHAMBENCH_CACHE_DIR`, else the platform's user cache directory."""
    return Path(os.environ.get(CACHE_ENV) or user_cache_dir("shambench")).expanduser()
