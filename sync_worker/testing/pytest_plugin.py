"""The pytest plugin of sync_worker (entry point ``pytest11``: installed, it loads by itself).

Fixtures:

* ``durable_env`` — a fresh time-skipping :class:`~sync_worker.testing.LiveEnvironment` per
  test (dev server on a virtual clock, ``.client``, ``.worker(...)``, ``.sleep(...)``), shut down
  after the test (its workers stopped first);
* ``durable_client`` — ``durable_env.client``.

Choosing the workers' pool: ``@pytest.mark.durable_pool("gevent")`` on a test or module,
``--durable-pool=gevent`` on the command line, or the ``durable_pool`` ini option; otherwise
the process's pool (``SYNC_WORKER_POOL``, or gevent in a gevent-patched process, else threads).
The gevent pool needs a process monkey-patched before anything else loads.
``@pytest.mark.durable_env(start_time=..., settle_timeout=..., ...)`` passes options to
``WorkflowEnvironment.start_time_skipping``.

This module imports nothing heavy at load time: the plugin is loaded in every pytest process
of an environment where sync_worker is installed, and a gevent suite must still be able to
patch first. The environment is imported only when a test asks for a fixture.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Dict, Iterator, Optional

import pytest

if TYPE_CHECKING:  # pragma: no cover
    from ..client import Client
    from .live import LiveEnvironment

POOLS = ("threads", "gevent")


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("sync_worker", "sync_worker durable workflow tests")
    group.addoption("--durable-pool", dest="durable_pool", default=None, choices=POOLS,
                    help="Pool of the workers durable_env starts (default: the process's pool).")
    parser.addini("durable_pool", "Pool of the workers durable_env starts (threads or gevent).", default="")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "durable_pool(name): run durable_env's workers on this pool "
                                       "(threads or gevent).")
    config.addinivalue_line("markers", "durable_env(**options): options of durable_env's "
                                       "WorkflowEnvironment.start_time_skipping().")


def _pool(request: pytest.FixtureRequest) -> Optional[str]:
    marker = request.node.get_closest_marker("durable_pool")
    if marker is not None:
        if len(marker.args) != 1 or marker.args[0] not in POOLS:
            raise pytest.UsageError(f"durable_pool takes one of {', '.join(POOLS)}, got {marker.args!r}")
        return str(marker.args[0])
    chosen = request.config.getoption("durable_pool", default=None) or request.config.getini("durable_pool")
    return str(chosen) if chosen else None


def _options(request: pytest.FixtureRequest) -> Dict[str, Any]:
    marker = request.node.get_closest_marker("durable_env")
    return dict(marker.kwargs) if marker is not None else {}


@pytest.fixture
def durable_env(request: pytest.FixtureRequest) -> Iterator[LiveEnvironment]:
    """A time-skipping environment of its own for this test (server, client, workers on demand)."""
    from .harness import WorkflowEnvironment

    environment = WorkflowEnvironment.start_time_skipping(pool=_pool(request), **_options(request))
    try:
        yield environment
    finally:
        environment.shutdown()


@pytest.fixture
def durable_client(durable_env: LiveEnvironment) -> Client:
    """The :class:`~sync_worker.Client` of this test's ``durable_env``."""
    return durable_env.client
