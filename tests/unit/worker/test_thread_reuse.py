"""ReusableThreads: one parked thread per slot, reused, named after its task, gone when idle."""

from __future__ import annotations

import threading
import time
from typing import List

from sync_worker.runtime.backend import ThreadBackend
from sync_worker.runtime.thread_reuse import ReusableThreads


def _wait(predicate, timeout: float = 5.0) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "condition not reached"
        time.sleep(0.01)


def test_sequential_tasks_reuse_one_thread_named_after_each_task() -> None:
    pool = ReusableThreads()
    seen: List[tuple] = []
    for n in range(20):
        handle = pool.submit(f"task-{n}", lambda n=n: seen.append((n, threading.current_thread().name,
                                                                     threading.get_ident())))
        assert handle.join(5)
        assert not handle.is_alive() and handle.name == f"task-{n}"
        _wait(lambda: pool.parked == 1)
    assert pool.started == 1
    assert [name for _, name, _ in seen] == [f"task-{n}" for n in range(20)]
    assert len({ident for _, _, ident in seen}) == 1


def test_concurrent_tasks_get_their_own_threads() -> None:
    pool = ReusableThreads()
    release = threading.Event()
    running = threading.Semaphore(0)

    def body() -> None:
        running.release()
        release.wait(5)

    handles = [pool.submit(f"t{i}", body) for i in range(3)]
    for _ in range(3):
        assert running.acquire(timeout=5)
    assert all(h.is_alive() for h in handles) and pool.started == 3
    release.set()
    assert all(h.join(5) for h in handles)
    _wait(lambda: pool.parked == 3)
    again = [pool.submit(f"u{i}", lambda: None) for i in range(3)]
    assert all(h.join(5) for h in again)
    assert pool.started == 3  # the three parked threads ran the next three tasks


def test_a_raising_task_keeps_its_thread_and_finishes_its_handle() -> None:
    pool = ReusableThreads()

    def boom() -> None:
        raise RuntimeError("escaped")

    assert pool.submit("boom", boom).join(5)
    _wait(lambda: pool.parked == 1)
    done = threading.Event()
    assert pool.submit("after", done.set).join(5) and done.is_set()
    assert pool.started == 1


def test_idle_threads_exit() -> None:
    pool = ReusableThreads(idle_seconds=0.05)
    before = threading.active_count()
    assert pool.submit("short", lambda: None).join(5)
    _wait(lambda: pool.parked == 0 and threading.active_count() <= before)
    assert pool.submit("later", lambda: None).join(5)
    assert pool.started == 2


def test_thread_backend_runs_task_bodies_on_reused_threads() -> None:
    backend = ThreadBackend()
    for n in range(5):
        assert backend.spawn_task(f"sync-worker-activity-{n}", lambda: None).join(5)
        _wait(lambda: backend.slot_threads.parked == 1)
    assert backend.slot_threads.started == 1


def test_close_idle_lets_parked_threads_exit() -> None:
    pool = ReusableThreads()
    before = threading.active_count()
    assert pool.submit("one", lambda: None).join(5)
    _wait(lambda: pool.parked == 1)
    assert pool.close_idle() == 1
    _wait(lambda: threading.active_count() <= before)
    assert pool.submit("two", lambda: None).join(5)  # still usable: a new thread, which does not park
    assert pool.started == 2
    _wait(lambda: threading.active_count() <= before)
    assert pool.parked == 0
