"""The sample projects differ from their Celery originals only in import lines."""

from __future__ import annotations

import pytest

from ._support import HERE, import_only_diff, iter_pairs

PAIRS = [pair for root in (HERE / "sample", HERE / "djsample") for pair in iter_pairs(root)
         if (root / "celery_originals").exists()]


@pytest.mark.parametrize("original,converted", PAIRS, ids=[str(p[1].relative_to(HERE)) for p in PAIRS])
def test_module_differs_only_in_import_lines(original, converted) -> None:
    changed = import_only_diff(original.read_text(), converted.read_text())
    assert changed, "the converted module must import sync_worker_celery somewhere"
    assert all("sync_worker_celery" in line for line in changed if line.startswith("+"))


def test_the_check_catches_a_non_import_difference() -> None:
    with pytest.raises(AssertionError):
        import_only_diff("from celery import Celery\napp = Celery('a')\n",
                         "from sync_worker_celery import Celery\napp = Celery('b')\n")
    with pytest.raises(AssertionError):
        import_only_diff("from celery import Celery\n", "from sync_worker_celery import Celery, shared_task\n")
