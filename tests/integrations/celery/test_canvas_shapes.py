"""Canvas details Celery's own suite relies on: nested groups are unrolled into their group,
a chain's kwargs and countdown go to its first task, ``on_error`` returns the signature,
``chord.tasks`` is the header."""

from __future__ import annotations

import time

import pytest
from sync_worker_celery import chain, chord, group


@pytest.mark.usefixtures("sample_worker")
class TestShapesOnTheWorker:
    def test_nested_groups_are_unrolled(self) -> None:
        from proj.tasks import add, tsum

        # a chain ending in a group is not unrolled (Celery: "the chain prevents unrolling")
        assert group(add.s(1, 2) | group(add.s(1), add.s(2))).apply_async().get(timeout=60) == [[4, 5]]
        assert chord((group(add.s(1, 1), add.s(2, 2)),), tsum.s()).apply_async().get(timeout=60) == 6
        assert group(group(add.s(1, 1), add.s(2, 2)), add.s(3, 3)).apply_async().get(timeout=60) == [2, 4, 6]

    def test_a_failing_link_callback_does_not_fail_the_canvas(self) -> None:
        from proj.tasks import add, explode

        canvas = chain(add.s(1, 1), add.s(1))
        canvas.link(explode.si("callback boom"))
        assert canvas.apply_async().get(timeout=60) == 3

    def test_chain_kwargs_and_countdown_go_to_the_first_task_and_on_error_returns_the_chain(self) -> None:
        from proj.tasks import greet, note

        canvas = chain(greet.s("ann"), note.s("done"))
        assert canvas.on_error(note.s("failed")) is canvas
        started = time.monotonic()
        result = canvas.apply_async(kwargs={"greeting": "hi"}, countdown=2)
        assert result.get(timeout=60) == ["hi, ann!", "done"]
        assert time.monotonic() - started >= 2


def test_chord_tasks_are_the_header_tasks() -> None:
    from proj.tasks import add, tsum

    c = chord([add.s(1, 1), add.s(2, 2)], tsum.s())
    assert [t.args for t in c.tasks] == [(1, 1), (2, 2)]
