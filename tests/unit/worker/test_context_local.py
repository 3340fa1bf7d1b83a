"""``ContextLocal``, the gevent backend's task-local namespace: per greenlet and per thread."""

from __future__ import annotations

import contextvars
import threading
from typing import Any, List

import greenlet
import pytest

from sync_worker.runtime.context_local import ContextLocal


def test_attributes_are_set_read_and_deleted_like_threading_local() -> None:
    local = ContextLocal()
    assert getattr(local, "context", None) is None
    with pytest.raises(AttributeError):
        local.context  # noqa: B018
    local.context = "ctx"
    local.other = 2
    assert (local.context, local.other) == ("ctx", 2)
    del local.context
    assert not hasattr(local, "context") and local.other == 2
    with pytest.raises(AttributeError):
        del local.context
    assert getattr(ContextLocal(), "other", None) is None  # each namespace is its own


def test_each_thread_sees_only_its_own_attributes() -> None:
    local = ContextLocal()
    local.context = "main"
    seen: List[Any] = []

    def task(tag: str, set_it: threading.Event, others_set: threading.Event) -> None:
        seen.append((tag, getattr(local, "context", None)))
        local.context = tag
        set_it.set()
        others_set.wait(5)
        seen.append((tag, local.context))

    a_set, b_set = threading.Event(), threading.Event()
    threads = [threading.Thread(target=task, args=("a", a_set, b_set)),
               threading.Thread(target=task, args=("b", b_set, a_set))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(5)
    assert sorted(seen, key=repr) == [("a", "a"), ("a", None), ("b", "b"), ("b", None)]
    assert local.context == "main"


def test_each_greenlet_sees_only_its_own_attributes_across_switches() -> None:
    """Task greenlets interleave on one thread (each switch is a wait in the hub)."""
    local = ContextLocal()
    local.context = "main"
    seen: List[Any] = []
    main = greenlet.getcurrent()

    def task(tag: str) -> None:
        seen.append((tag, getattr(local, "context", None)))  # a new greenlet starts empty
        local.context = tag
        main.switch()
        seen.append((tag, local.context))
        local.context = None

    first, second = greenlet.greenlet(lambda: task("a")), greenlet.greenlet(lambda: task("b"))
    first.switch()
    second.switch()  # b sets its own while a is suspended
    first.switch()
    second.switch()
    assert seen == [("a", None), ("b", None), ("a", "a"), ("b", "b")]
    assert local.context == "main"


def test_a_copied_context_starts_with_the_values_and_keeps_its_changes() -> None:
    local = ContextLocal()
    local.context = "outer"

    def inner() -> Any:
        before = local.context
        local.context = "inner"
        return before

    assert contextvars.copy_context().run(inner) == "outer"
    assert local.context == "outer"
