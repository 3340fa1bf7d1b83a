"""A stop that lands between registration and the start of the pollers is never missed.

Found by the embedding tests (a uWSGI worker recycled by ``max-requests`` a few milliseconds
after it started): the shutdown used to run as soon as registration ended, before the pollers
existed, then the startup went on and left a RUNNING worker with live pollers behind a
deregistered registration.
"""

from __future__ import annotations

import threading
from typing import Any, Iterator, List

import pytest

from sync_worker import activity
from sync_worker.client import Client
from sync_worker.worker import WorkerState

from ._worker_support import make_worker, unique_queue, wait_for


@activity.defn(name="e2e.startup_race.noop")
def noop() -> str:
    return "ok"


@pytest.fixture
def client(dev_server_session: Any) -> Iterator[Client]:
    with Client(dev_server_session.url) as c:
        yield c


def test_stop_between_registration_and_pollers_leaves_a_stopped_worker(client: Client) -> None:
    queue = unique_queue("startup-race")
    worker = make_worker(client, task_queue=queue, activities=[noop], poll_timeout=2.0, shutdown_timeout=10.0)
    start_pollers = worker.source.start_pollers
    stop_errors: List[BaseException] = []
    stopper: List[threading.Thread] = []

    def stop() -> None:
        try:
            worker.stop()
        except BaseException as error:  # reported below
            stop_errors.append(error)

    def stop_first_then_start_pollers(shell: Any) -> None:
        thread = threading.Thread(target=stop, daemon=True)  # a greenlet in the gevent leg
        stopper.append(thread)
        thread.start()
        wait_for(lambda: worker.shell.stop_requested.is_set(), 5)
        worker.backend.sleep(0.3)  # the stop had every chance to finish before the pollers start
        start_pollers(shell)

    worker.source.start_pollers = stop_first_then_start_pollers  # type: ignore[method-assign]
    worker.run()  # returns once the stop, which waited for the startup, has drained and deregistered
    stopper[0].join(10)
    assert not stop_errors
    assert worker.state is WorkerState.STOPPED
    assert all(loop.handle is not None and not loop.handle.is_alive() for loop in worker.shell.loops)
    assert [w["status"] for w in client.list_workers(task_queue=queue)["workers"]] == ["deregistered"]
