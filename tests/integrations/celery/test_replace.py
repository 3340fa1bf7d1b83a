"""``Task.replace(sig)``: the task's result becomes the replacement's, on the worker (a plain task,
a chain member, a group member, a chord header member) and eagerly; a failing replacement fails
the task with its own exception type."""

from __future__ import annotations

import pytest
from sync_worker_celery import chain, chord, group, states


@pytest.mark.usefixtures("sample_worker")
class TestReplaceOnTheWorker:
    def test_a_plain_task_replaced_by_a_task_and_by_a_canvas(self) -> None:
        from proj.tasks import add_replaced, replaced_by_canvas

        result = add_replaced.delay(4, 4)
        assert result.get(timeout=60) == 8
        assert result.state == states.SUCCESS
        assert replaced_by_canvas.delay(10).get(timeout=60) == 11 + 12

    def test_replaced_members_of_a_chain_a_group_and_a_chord(self) -> None:
        from proj.tasks import add, add_replaced, replaced_by_canvas, tsum

        assert chain(add_replaced.s(1, 1), add.s(10)).apply_async().get(timeout=60) == 12
        assert group(add_replaced.s(1, 1), add.s(2, 2), replaced_by_canvas.s(0)).apply_async().get(timeout=60) \
            == [2, 4, 3]
        assert chord([add_replaced.s(1, 2), add.s(3, 4)], tsum.s()).apply_async().get(timeout=60) == 10
        assert chain(add.s(1, 1), replaced_by_canvas.s()).apply_async().get(timeout=60) == 3 + 4

    def test_a_failing_replacement_fails_the_task_with_its_own_error(self) -> None:
        from proj.tasks import add, replaced_by_canvas

        with pytest.raises(ValueError, match="replaced boom"):
            replaced_by_canvas.delay(1, fail=True).get(timeout=60)
        with pytest.raises(ValueError, match="replaced boom"):
            chain(add.s(1, 1), replaced_by_canvas.s(fail=True)).apply_async().get(timeout=60)


def test_replace_runs_eagerly() -> None:
    from proj.tasks import add_replaced, replaced_by_canvas

    assert add_replaced.apply((2, 3)).get() == 5
    assert replaced_by_canvas.apply((1,)).get() == 2 + 3
