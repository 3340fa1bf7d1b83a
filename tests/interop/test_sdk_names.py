"""Every public name of the published SDK is either importable from ``sync_worker`` with the same
role, or listed in docs/interop.md ("SDK names we do not provide") with the reason (issue 24)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Set

import durable_workflow
import pytest

import sync_worker

DOC = Path(__file__).resolve().parents[2] / "docs" / "interop.md"


def _documented_exclusions() -> Set[str]:
    text = DOC.read_text(encoding="utf-8")
    section = text.split("## SDK names we do not provide", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("| `")]
    return {name for row in rows for name in re.findall(r"`([A-Za-z_][A-Za-z0-9_]*)`", row.split(" | ")[0])}


def _sdk_public() -> Set[str]:
    return {name for name in dir(durable_workflow) if not name.startswith("_")}


def test_every_sdk_name_is_exported_or_documented_as_not_provided() -> None:
    ours = set(dir(sync_worker))
    excluded = _documented_exclusions()
    unaccounted = sorted(_sdk_public() - ours - excluded)
    assert unaccounted == [], f"SDK names neither exported by sync_worker nor listed in {DOC.name}: {unaccounted}"


def test_the_exclusion_table_lists_nothing_we_export_or_the_sdk_lacks() -> None:
    excluded = _documented_exclusions()
    assert sorted(excluded & set(sync_worker.__all__)) == []  # exported now: drop the row
    assert sorted(excluded - _sdk_public()) == []  # a typo, or a name the SDK no longer has


@pytest.mark.parametrize("name", sorted(set(sync_worker.__all__) & {n for n in dir(durable_workflow)
                                                                      if not n.startswith("_")}))
def test_each_shared_name_resolves_to_the_same_kind_of_thing(name: str) -> None:
    ours, theirs = getattr(sync_worker, name), getattr(durable_workflow, name)
    assert ours is not None
    assert isinstance(ours, type) == isinstance(theirs, type), name  # a class stays a class
    if isinstance(theirs, type) and issubclass(theirs, BaseException):
        assert isinstance(ours, type) and issubclass(ours, BaseException), name  # an error stays an error
    assert callable(ours) == callable(theirs), name


def test_the_import_swap_of_a_typical_module_header() -> None:
    from sync_worker import (  # noqa: F401
        ActivityInfo,
        ParentClosePolicy,
        RetryPolicy,
        Saga,
        ScheduleAction,
        ScheduleSpec,
        TransportRetryPolicy,
    )

    assert RetryPolicy is TransportRetryPolicy  # the SDK's alias, kept
