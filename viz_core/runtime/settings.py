"""Server settings from environment variables (torch-free: the server reads them as it starts)."""
from __future__ import annotations

import logging
import os

log = logging.getLogger(__name__)


def env_int(name: str, default: int) -> int:
    """A whole number of at least 1 from the environment variable `name` (0 or less reads as 1); unset or empty gives
    `default`, and so does anything that is not a whole number (said in the log)."""
    raw = os.environ.get(name, "").strip()
    if not raw:
        return default
    try:
        return max(1, int(raw))
    except ValueError:
        log.warning("%s=%r is not a whole number; using %d", name, raw, default)
        return default


def env_float(name: str, default: float) -> float:
    """A number of at least 0 from the environment variable `name` (negative reads as 0); unset, empty or not a
    number gives `default` (said in the log when it is not a number)."""
    raw = os.environ.get(name, "").strip()
    if not raw:
        return default
    try:
        value = float(raw)
    except ValueError:
        log.warning("%s=%r is not a number; using %s", name, raw, default)
        return default
    return max(0.0, value) if value == value else default  # NaN reads as unset
