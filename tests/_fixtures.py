"""Where the shared conformance data lives, read at test time (never copied into the repo)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

REPO_ROOT = Path(__file__).resolve().parent.parent
FIXTURES_DIR = Path(os.environ.get("SYNC_WORKER_FIXTURES", REPO_ROOT.parent / "shared" / "fixtures")).resolve()


def fixtures_dir() -> Path:
    """The fixtures folder; skips the calling test with a clear reason when it is absent."""
    if not FIXTURES_DIR.is_dir():
        pytest.skip(
            f"conformance fixtures not found at {FIXTURES_DIR} (set SYNC_WORKER_FIXTURES or place "
            "the shared/ folder beside the repository)"
        )
    return FIXTURES_DIR


def load_fixture(relative: str) -> Any:
    """Load one JSON fixture by its path relative to the fixtures folder."""
    with open(fixtures_dir() / relative, encoding="utf-8") as handle:
        return json.load(handle)


def fixture_paths(relative_dir: str, pattern: str = "*.json") -> list[Path]:
    """Sorted fixture files in one folder (for parametrising at collection time).

    Collection must not skip, so an absent folder yields an empty list; tests that need the
    data call :func:`fixtures_dir` too, which skips with the reason.
    """
    folder = FIXTURES_DIR / relative_dir
    return sorted(folder.glob(pattern)) if folder.is_dir() else []
