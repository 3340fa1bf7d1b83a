"""Helpers of the Celery-facade tests: the sample app wired to a dev server, a worker group."""

from __future__ import annotations

import difflib
import os
import re
import time
from pathlib import Path
from typing import Any, Callable, Iterator, List

HERE = Path(__file__).resolve().parent
SAMPLE = HERE / "sample"

_IMPORT = re.compile(r"^\s*(from\s+\S+\s+import\s+.+|import\s+\S+.*)$")


def import_only_diff(original: str, converted: str) -> List[str]:
    """The changed lines between two module texts; raises if any is not an import line, or if
    a changed import is not the Celery import with ``celery`` → ``sync_worker_celery``."""
    changed: List[str] = []
    for line in difflib.unified_diff(original.splitlines(), converted.splitlines(), lineterm="", n=0):
        if line.startswith(("---", "+++", "@@")):
            continue
        body = line[1:]
        if not _IMPORT.match(body):
            raise AssertionError(f"non-import line differs: {line!r}")
        changed.append(line)
    removed = [c[1:] for c in changed if c.startswith("-")]
    added = [c[1:] for c in changed if c.startswith("+")]
    swapped = [re.sub(r"\b(from|import)\s+celery\b", r"\1 sync_worker_celery", r) for r in removed]
    assert swapped == added, f"imports changed beyond the package name: {removed} -> {added}"
    return changed


def wait_for(predicate: Callable[[], Any], timeout: float = 15.0, interval: float = 0.05) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise AssertionError(f"condition not reached within {timeout}s")
        time.sleep(interval)


def pool() -> str:
    return os.environ.get("SYNC_WORKER_TEST_POOL", "threads")


def iter_pairs(root: Path) -> Iterator[tuple]:
    for original in sorted((root / "celery_originals").rglob("*.py.txt")):
        relative = original.relative_to(root / "celery_originals")
        yield original, root / str(relative)[: -len(".txt")]
