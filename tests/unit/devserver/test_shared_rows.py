"""A poll's look at its worker's row is decoded once while the row stays the same (issue 29).

``Store.get_shared`` hands out one decoded row per stored text; a new text (a write, a rollback's
re-read) gets a new row, and the throttled liveness write of a poll leaves the shared row as stored.
"""

from __future__ import annotations

import os
from typing import Iterator

import pytest

from sync_worker.devserver import workers
from sync_worker.devserver.engine import Config, Engine
from sync_worker.devserver.util import ApiError


@pytest.fixture()
def engine(tmp_path: object) -> Iterator[Engine]:
    found = Engine(Config(), os.path.join(str(tmp_path), "dev.sqlite"))
    with found.tx():
        workers.register(found, "default", {"worker_id": "w1", "task_queue": "q",
                                              "supported_workflow_types": ["t"]})
    yield found
    found.store.close()


def test_the_same_row_while_its_text_is_the_same(engine: Engine) -> None:
    with engine.tx():
        first = workers.peek(engine, "default", "w1")
        assert first is not None and first is workers.peek(engine, "default", "w1")
        assert first == workers.lookup(engine, "default", "w1")
        assert workers.lookup(engine, "default", "w1") is not first  # lookup still decodes a row of its own


def test_a_write_or_a_rollback_gives_a_new_row(engine: Engine) -> None:
    with engine.tx():
        before = workers.peek(engine, "default", "w1")
        row = workers.lookup(engine, "default", "w1")
        assert row is not None
        row["note"] = "a"
        engine.store.put("workers", row)
        after = workers.peek(engine, "default", "w1")
    assert before is not None and after is not None and after is not before
    assert after["note"] == "a" and "note" not in before
    with pytest.raises(ApiError), engine.tx():
        changed = dict(after, note="b")
        engine.store.put("workers", changed)
        assert workers.peek(engine, "default", "w1")["note"] == "b"  # type: ignore[index]
        raise ApiError(409, "conflict", "no")
    with engine.tx():
        again = workers.peek(engine, "default", "w1")
    assert again is not None and again["note"] == "a"  # what the file holds


def test_a_poll_touch_writes_a_copy_and_leaves_the_shared_row(engine: Engine) -> None:
    with engine.tx():
        shared = workers.peek(engine, "default", "w1")
        assert shared is not None
        seen = shared["last_seen_at"]
        engine.now = lambda: seen + 60.0  # past the throttle: this touch writes
        touched = workers.touch(engine, "default", "w1")
    assert touched is not None and touched["last_seen_at"] == seen + 60.0
    assert shared["last_seen_at"] == seen  # the row handed out before is not changed
    with engine.tx():
        stored = workers.lookup(engine, "default", "w1")
        assert stored is not None and stored["last_seen_at"] == seen + 60.0
        assert workers.peek(engine, "default", "w1") == stored
