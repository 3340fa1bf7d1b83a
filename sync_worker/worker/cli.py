"""``sync-worker run MODULE:ATTR``: run a worker in the foreground with signal-driven shutdown.

Signals only set flags; the main loop acts on them:

* first SIGTERM or SIGINT → warm shutdown: stop polling, keep heartbeating, drain
  accepted work within the worker's ``shutdown_timeout``, then deregister;
* a second SIGTERM/SIGINT, or SIGQUIT at any time → cold stop: running work is
  abandoned (nothing is reported for it), the registration is kept, the process exits.

``-P gevent`` (or ``SYNC_WORKER_POOL=gevent``) needs a process patched before anything else
was imported: the ``sync-worker`` console script and ``python -m sync_worker`` do that
(``sync_worker._launcher``); an unpatched process gets a usage error saying how to fix it.
Under gevent the thread primitives below are the patched, cooperative ones.

Exit codes: 0 clean shutdown (registration removed); 1 the worker failed (registration
refused, a poller died, deregistration failed); 2 usage or configuration error; 3 warm
shutdown incomplete (work still running at the deadline; registration kept); 4 cold stop.
"""

from __future__ import annotations

import importlib
import inspect
import logging
import os
import select
import signal
import socket
import sys
import threading
from typing import Any, Callable, Dict, List, Mapping, Optional, Union

import click

from ..runtime.backend import POOL_ENV, check_pool, default_pool
from .worker import ShutdownIncomplete, Worker

__all__ = [
    "EXIT_COLD_STOP",
    "EXIT_FAILED",
    "EXIT_INCOMPLETE",
    "EXIT_OK",
    "EXIT_USAGE",
    "load_worker",
    "run_command",
]

logger = logging.getLogger("sync_worker.worker.cli")

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_INCOMPLETE = 3
EXIT_COLD_STOP = 4


class _ShutdownFlags:
    """Set by signal handlers, read by the main loop (handlers only set them and wake the loop)."""

    def __init__(self, wake: Optional[Callable[[], None]] = None) -> None:
        self.warm = False
        self.cold = False
        self.signals = 0
        self._wake = wake

    def on_term(self, signum: int, frame: Any) -> None:
        self.signals += 1
        if self.warm:
            self.cold = True
        self.warm = True
        self._notify()

    def on_quit(self, signum: int, frame: Any) -> None:
        self.signals += 1
        self.warm = True
        self.cold = True
        self._notify()

    def _notify(self) -> None:
        if self._wake is not None:
            self._wake()


class _Wakeup:
    """What the main loop of :func:`serve` sleeps on, without a timeout: a socket pair written to
    by any signal at C level (``signal.set_wakeup_fd``: it wakes the main thread's ``select`` even
    when another thread took the signal), by the Python handlers once their flags are set, and by
    the worker's thread when it ends. An idle worker process is never woken to look at flags
    (``bench/idle_cpu.py`` counts its wake-ups); under gevent ``select`` waits on the hub."""

    def __init__(self) -> None:
        self._read, self._write = socket.socketpair()
        self._read.setblocking(False)
        self._write.setblocking(False)
        self._previous: Optional[int] = None
        try:
            self._previous = signal.set_wakeup_fd(self._write.fileno(), warn_on_full_buffer=False)
        except (ValueError, OSError):  # not the main thread: look every 0.1 s as a fallback
            self.timeout: Optional[float] = 0.1
        else:
            self.timeout = None

    def notify(self) -> None:
        """Wake the waiter (from a signal handler or any thread; never blocks)."""
        try:
            self._write.send(b"\0")
        except OSError:  # full (a wakeup is pending anyway) or closed (serve() has returned)
            pass

    def wait(self) -> None:
        """Sleep until notified (or a signal arrives), then clear what woke it."""
        select.select([self._read], [], [], self.timeout)
        try:
            while self._read.recv(4096):
                pass
        except OSError:  # drained
            pass

    def close(self) -> None:
        if self.timeout is None:
            try:
                signal.set_wakeup_fd(-1 if self._previous is None else self._previous)
            except (ValueError, OSError):
                pass
        self._read.close()
        self._write.close()


def _import_target(target: str) -> Any:
    module_name, sep, attribute = target.partition(":")
    if not sep or not module_name or not attribute:
        raise click.UsageError(f"expected MODULE:ATTR, got {target!r}")
    if os.getcwd() not in sys.path and "" not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        module = importlib.import_module(module_name)
    except ImportError as error:
        raise click.UsageError(f"cannot import {module_name!r}: {error}")
    value: Any = module
    for part in attribute.split("."):
        try:
            value = getattr(value, part)
        except AttributeError:
            raise click.UsageError(f"{module_name!r} has no attribute {attribute!r}")
    return value


def _make_client(server_url: Optional[str], token: Optional[str], namespace: Optional[str]) -> Any:
    if not server_url:
        raise click.UsageError("no server URL: pass --server-url or set DURABLE_WORKFLOW_SERVER_URL")
    from ..client import Client

    return Client(server_url, token=token, namespace=namespace or "default")


def load_worker(
    target: str,
    *,
    task_queue: Optional[str] = None,
    concurrency: Union[int, str, Mapping[str, Any], None] = None,
    server_url: Optional[str] = None,
    token: Optional[str] = None,
    namespace: Optional[str] = None,
    pool: Optional[str] = None,
    explicit: Optional[Mapping[str, Any]] = None,
) -> Worker:
    """Resolve ``MODULE:ATTR`` to a Worker (the attribute itself, or what its factory returns).

    A factory receives, by parameter name, any of ``client``, ``task_queue``,
    ``concurrency`` and ``pool`` it declares. With ``pool``, the worker must run on it.
    ``--server-url``/``--token``/``--namespace`` (``explicit``: those given on the command line)
    are refused for a ready-made Worker or a factory without ``client``: they would be ignored.
    """
    value = _import_target(target)
    given = explicit or {}
    connection_flags = [flag for flag, key in (("--server-url", "server_url"), ("--token", "token"),
                                               ("--namespace", "namespace")) if given.get(key)]
    if isinstance(value, Worker):
        if connection_flags:
            raise click.UsageError(
                f"{target} is a ready-made Worker with its own Client ({value.client!r}); "
                f"{'/'.join(connection_flags)} would be ignored. Drop them, or make {target} a factory "
                "that takes a 'client' parameter so the command line can choose the server")
    else:
        kind = _not_a_worker(value)
        if kind is not None:
            raise click.UsageError(
                f"{target} is {kind}, not a Worker. Build one in your module, e.g. "
                "worker = Worker(Client(...), task_queue='...', activities=[...], workflows=[...]), "
                "or a factory def make_worker(client, task_queue): ..., and run that")
        params = inspect.signature(value).parameters
        if connection_flags and "client" not in params:
            raise click.UsageError(
                f"{target} takes no 'client' parameter, so {'/'.join(connection_flags)} would be ignored; "
                "add a 'client' parameter to the factory or drop the flags")
        kwargs: Dict[str, Any] = {}
        if "client" in params:
            kwargs["client"] = _make_client(server_url, token, namespace)
        if "task_queue" in params and task_queue:
            kwargs["task_queue"] = task_queue
        if "concurrency" in params and concurrency:
            kwargs["concurrency"] = concurrency
        if "pool" in params and pool:
            kwargs["pool"] = pool
        try:
            value = value(**kwargs)
        except click.ClickException:
            raise
        except Exception as error:
            raise click.UsageError(f"{target}(...) raised {type(error).__name__}: {error}") from error
        if not isinstance(value, Worker):
            raise click.UsageError(f"{target} returned {type(value).__name__}, not a Worker")
    if task_queue and value.task_queue != task_queue:
        raise click.UsageError(
            f"{target} serves task queue {value.task_queue!r}, not {task_queue!r}; use a factory "
            "that accepts task_queue to choose it from the command line"
        )
    if pool and value.backend.name != pool:
        raise click.UsageError(
            f"{target} built a worker on pool {value.backend.name!r}, but -P {pool} was requested; leave "
            "Worker(pool=...) unset (it follows SYNC_WORKER_POOL) or let the factory accept a pool argument"
        )
    if concurrency:
        value.configure_activity_concurrency(concurrency)
    return value


def _not_a_worker(value: Any) -> Optional[str]:
    """What ``value`` is, when it is a well-known thing that is not a Worker factory."""
    if getattr(value, "__activity_name__", None):
        return f"the activity {value.__activity_name__!r}"
    if getattr(value, "__workflow_name__", None):
        return f"the workflow {value.__workflow_name__!r}"
    if not callable(value):
        return f"a {type(value).__name__}, neither a Worker nor a factory returning one"
    return None


class _Concurrency(click.ParamType):  # type: ignore[type-arg,unused-ignore]  # generic only in click >= 8.2
    """``-c N`` (fixed activity slots) or ``-c adaptive``."""

    name = "N|adaptive"

    def convert(self, value: Any, param: Optional[click.Parameter], ctx: Optional[click.Context]) -> Any:
        if isinstance(value, int) and not isinstance(value, bool):
            number = value
        else:
            text = str(value).strip().lower()
            if text == "adaptive":
                return "adaptive"
            try:
                number = int(text)
            except ValueError:
                self.fail(f"{value!r} is neither a number of slots nor 'adaptive'", param, ctx)
        if number < 1:
            self.fail(f"{number} is not a valid number of slots (at least 1)", param, ctx)
        return number


def _autoscale(value: Optional[str]) -> Optional[Dict[str, int]]:
    """Celery's ``--autoscale MAX,MIN`` (MIN optional, default 1) as adaptive bounds."""
    if value is None:
        return None
    parts = [p.strip() for p in value.split(",")]
    try:
        numbers = [int(p) for p in parts if p]
    except ValueError:
        raise click.BadParameter(f"expected MAX[,MIN], got {value!r}", param_hint="--autoscale")
    if not numbers or len(numbers) > 2 or min(numbers) < 1:
        raise click.BadParameter(f"expected MAX[,MIN] with numbers of at least 1, got {value!r}",
                                 param_hint="--autoscale")
    maximum, minimum = (numbers[0], numbers[1] if len(numbers) == 2 else 1)
    if minimum > maximum:
        raise click.BadParameter(f"MIN {minimum} is above MAX {maximum}", param_hint="--autoscale")
    return {"max": maximum, "min": minimum}


@click.command("run")
@click.argument("target")
@click.option("-Q", "--task-queue", default=None, help="Task queue the worker must serve.")
@click.option("-c", "--concurrency", type=_Concurrency(), default=None,
              help="Activity slots: a fixed N, or 'adaptive' (memory admission gate and adaptive limit).")
@click.option("--autoscale", default=None, metavar="MAX,MIN",
              help="Adaptive activity slots between MIN (default 1) and MAX (Celery's spelling).")
@click.option("--activity-pollers", type=click.IntRange(min=1), default=None, metavar="N",
              help="Activity pollers (max_concurrent_activity_task_polls; default 1). Each long-polls only while "
                   "it holds a free activity slot, so leases never exceed free slots; raise it when the "
                   "server's round trip, not the worker's CPU, limits throughput.")
@click.option("--workflow-pollers", type=click.IntRange(min=1), default=None, metavar="N",
              help="Workflow-task pollers (max_concurrent_workflow_task_polls; default 1).")
@click.option("-P", "--pool", envvar=POOL_ENV, default=None,
              help="Concurrency pool: threads or gevent (env SYNC_WORKER_POOL; default: gevent in a "
                   "monkey-patched process, else threads).")
@click.option("-l", "--loglevel", "--log-level", "loglevel", default="INFO", show_default=True,
              help="Logging level (DEBUG, INFO, WARNING, ERROR); the same -l/--loglevel on every command.")
@click.option("--health-port", type=click.IntRange(min=0, max=65535), default=None, envvar="SYNC_WORKER_HEALTH_PORT",
              help="Serve /healthz (liveness) and /readyz (readiness) on this port of 127.0.0.1 "
                   "(0: any free port, logged; env SYNC_WORKER_HEALTH_PORT).")
@click.option("--health-host", default="127.0.0.1", show_default=True, help="Interface of the --health-port server.")
@click.option("--max-startup-wait", default=60.0, show_default=True, type=click.FloatRange(min=0.0),
              help="Seconds to keep retrying discovery and registration while the server is unreachable or "
                   "refuses the credentials (0: exit at the first failure).")
@click.option("--server-url", envvar="DURABLE_WORKFLOW_SERVER_URL", default=None,
              help="Server origin (env DURABLE_WORKFLOW_SERVER_URL).")
@click.option("--token", envvar="DURABLE_WORKFLOW_AUTH_TOKEN", default=None,
              help="Auth token (env DURABLE_WORKFLOW_AUTH_TOKEN).")
@click.option("--namespace", envvar="DURABLE_WORKFLOW_NAMESPACE", default=None,
              help="Namespace (env DURABLE_WORKFLOW_NAMESPACE).")
def run_command(target: str, task_queue: Optional[str], concurrency: Union[int, str, None],
                autoscale: Optional[str], activity_pollers: Optional[int], workflow_pollers: Optional[int],
                pool: Optional[str], loglevel: str, health_port: Optional[int],
                health_host: str, max_startup_wait: float,
                server_url: Optional[str], token: Optional[str], namespace: Optional[str]) -> None:
    """Run the worker TARGET (MODULE:ATTR: a Worker, or a factory returning one) until signalled."""
    bounds = _autoscale(autoscale)
    if bounds is not None and concurrency is not None:
        raise click.UsageError("use either -c/--concurrency or --autoscale, not both")
    chosen: Union[int, str, Mapping[str, Any], None] = bounds if bounds is not None else concurrency
    try:
        # Checked before the target is imported: the app must not load into an unpatched gevent run.
        pool = check_pool(pool or default_pool())
    except (ValueError, RuntimeError) as error:
        raise click.UsageError(str(error))
    level = logging.getLevelName(loglevel.upper())
    if not isinstance(level, int):
        raise click.UsageError(f"unknown log level {loglevel!r}")
    logging.basicConfig(level=level, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    # A Worker built while the target is imported follows -P (its default pool reads the env).
    previous = os.environ.get(POOL_ENV)
    os.environ[POOL_ENV] = pool
    ctx = click.get_current_context()
    # Connection flags given only by the environment never conflict with a ready-made Worker.
    explicit = {name: value for name, value in (("server_url", server_url), ("token", token),
                                                 ("namespace", namespace))
                if ctx.get_parameter_source(name) is click.core.ParameterSource.COMMANDLINE}
    try:
        worker = load_worker(target, task_queue=task_queue, concurrency=chosen, pool=pool,
                             server_url=server_url, token=token, namespace=namespace, explicit=explicit)
    finally:
        if previous is None:
            os.environ.pop(POOL_ENV, None)
        else:
            os.environ[POOL_ENV] = previous
    worker.max_startup_wait = max_startup_wait
    worker.configure_pollers(workflow=workflow_pollers, activity=activity_pollers)
    logger.info("sync-worker %s: server %s, namespace %r, task queue %r, pool %s, slots %s workflow / %s activity, "
                "pollers %d workflow / %d activity, %d workflow and %d activity type(s); start-up waits up to "
                "%g s for the server",
                worker.worker_id, getattr(worker.client, "base_url", "?"), getattr(worker.client, "namespace", "?"),
                worker.task_queue, worker.backend.name, worker.max_concurrent_workflow_tasks,
                worker.max_concurrent_activity_tasks, worker.max_concurrent_workflow_task_polls,
                worker.max_concurrent_activity_task_polls, len(worker.workflows), len(worker.activities),
                max_startup_wait)
    health = None
    if health_port is not None:
        from ..health import HealthServer

        health = HealthServer(health_port, host=health_host).start()
        logger.info("health probes on http://%s:%d/healthz and /readyz", health_host, health.port)
    try:
        code = serve(worker)
    finally:
        if health is not None:
            health.stop()
    sys.exit(code)


def serve(worker: Worker) -> int:
    """Run ``worker`` in a thread, translate signals into warm/cold stops; returns the exit code.

    The calling (main) thread sleeps until a signal or the worker's end wakes it.
    """
    wakeup = _Wakeup()
    flags = _ShutdownFlags(wakeup.notify)
    ended: List[bool] = []
    previous = {
        signal.SIGTERM: signal.signal(signal.SIGTERM, flags.on_term),
        signal.SIGINT: signal.signal(signal.SIGINT, flags.on_term),
    }
    if hasattr(signal, "SIGQUIT"):
        previous[signal.SIGQUIT] = signal.signal(signal.SIGQUIT, flags.on_quit)
    errors: List[BaseException] = []

    def run() -> None:
        try:
            worker.run()
        except BaseException as error:
            errors.append(error)
        finally:
            ended.append(True)
            wakeup.notify()

    def request_stop(cold: bool) -> None:
        try:
            worker.stop(cold=cold)
        except BaseException:  # the run thread reports the shared result
            pass

    runner = threading.Thread(target=run, name="sync-worker-main", daemon=True)
    runner.start()
    warm_sent = cold_sent = False
    try:
        while not ended:
            wakeup.wait()
            if flags.cold and not cold_sent:
                cold_sent = warm_sent = True
                logger.warning("cold stop: abandoning running work and exiting")
                threading.Thread(target=request_stop, args=(True,), daemon=True).start()
            elif flags.warm and not warm_sent:
                warm_sent = True
                logger.info("warm shutdown: draining (send the signal again, or SIGQUIT, to stop at once)")
                threading.Thread(target=request_stop, args=(False,), daemon=True).start()
        runner.join()
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
        wakeup.close()
    error = errors[0] if errors else None
    if cold_sent:
        if error is not None and not isinstance(error, ShutdownIncomplete):
            logger.error("worker stopped with an error: %s", error)
        return EXIT_COLD_STOP
    if error is None:
        return EXIT_OK
    if isinstance(error, ShutdownIncomplete):
        logger.error("%s", error)
        return EXIT_INCOMPLETE
    logger.error("worker failed: %s: %s", type(error).__name__, error)
    return EXIT_FAILED
