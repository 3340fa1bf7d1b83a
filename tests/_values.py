"""Value comparison for payload tests."""

from __future__ import annotations

import struct
from typing import Any


def strictly_equal(left: Any, right: Any) -> bool:
    """Equality that also tells bool/int/float apart, keeps map order and compares doubles bit for bit."""
    if type(left) is not type(right):
        return False
    if isinstance(left, float):
        return struct.pack("<d", left) == struct.pack("<d", right)
    if isinstance(left, list):
        return len(left) == len(right) and all(strictly_equal(a, b) for a, b in zip(left, right))
    if isinstance(left, dict):
        return list(left) == list(right) and all(strictly_equal(left[k], right[k]) for k in left)
    return bool(left == right)
