"""Shared pytest configuration.

Fixtures for the embedded dev server live in ``tests/_devserver.py`` and are re-exported
here so every test folder can use them.
"""

from __future__ import annotations

try:  # the dev server lands in its own module; keep collection working while it is absent
    from tests._devserver import *  # noqa: F403
except ImportError as exc:  # pragma: no cover - only while bootstrapping
    if "tests._devserver" not in str(exc) and "_devserver" not in str(exc):
        raise
