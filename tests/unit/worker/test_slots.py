from __future__ import annotations

import threading
import time

from sync_worker.cancel import CancelToken
from sync_worker.runtime.backend import ThreadBackend
from sync_worker.runtime.slots import SlotPool, admit


def test_admission_is_bounded_and_release_frees_a_slot() -> None:
    pool = SlotPool(ThreadBackend(), "activity", 2)
    cancel = CancelToken()
    a = admit(pool, cancel)
    b = admit(pool, cancel)
    assert a is not None and b is not None
    assert pool.in_use == 2 and pool.available == 0
    assert admit(pool, cancel, timeout=0.2) is None
    a.release()
    a.release()  # a second release is ignored, never over-frees
    assert pool.available == 1
    c = admit(pool, cancel, timeout=0.2)
    assert c is not None
    assert admit(pool, cancel, timeout=0.1) is None


def test_waiting_admission_returns_none_when_cancelled() -> None:
    pool = SlotPool(ThreadBackend(), "workflow", 1)
    cancel = CancelToken()
    held = admit(pool, cancel)
    assert held is not None
    result = []
    thread = threading.Thread(target=lambda: result.append(admit(pool, cancel)))
    started = time.monotonic()
    thread.start()
    time.sleep(0.1)
    cancel.cancel()
    thread.join(2)
    assert not thread.is_alive()
    assert result == [None]
    assert time.monotonic() - started < 1.5
    assert pool.in_use == 1


def test_a_waiter_is_admitted_when_a_slot_frees() -> None:
    pool = SlotPool(ThreadBackend(), "activity", 1)
    cancel = CancelToken()
    held = admit(pool, cancel)
    assert held is not None
    result = []
    thread = threading.Thread(target=lambda: result.append(admit(pool, cancel)))
    thread.start()
    time.sleep(0.1)
    assert result == []
    held.release()
    thread.join(2)
    assert result and result[0] is not None
    assert pool.in_use == 1


def test_cancelled_token_admits_nothing() -> None:
    pool = SlotPool(ThreadBackend(), "activity", 3)
    cancel = CancelToken()
    cancel.cancel()
    assert admit(pool, cancel) is None
    assert pool.in_use == 0
