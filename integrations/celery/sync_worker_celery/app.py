"""``Celery``: the application — configuration, the task registry, publishing, results.

    app = Celery("proj")
    app.config_from_object("django.conf:settings", namespace="CELERY")
    app.autodiscover_tasks()

    @app.task(bind=True, max_retries=5)
    def charge(self, order_id): ...

``broker``/``backend`` arguments and settings are accepted and ignored (with a notice): the
Durable Workflow server is both. It is chosen by ``durable_workflow_server_url`` (and
``_auth_token``, ``_namespace``) or the ``DURABLE_WORKFLOW_*`` environment variables.
"""

from __future__ import annotations

import importlib
import inspect
import logging
import os
import socket
import sys
import threading
from typing import Any, Callable, Dict, Iterable, List, Optional, Sequence, Type

from sync_worker.host import ClientOptions, OptionsError

from . import app_trace as trace  # noqa: F401 - Celery's celery.app.trace (its log lines)
from . import notices, signals
from .config import CLIENT_SETTINGS, Settings
from .exceptions import ImproperlyConfigured, NotRegistered, UnsupportedFeature
from .task import IGNORED_TASK_OPTIONS
from .task import Task as BaseTask

__all__ = ["Celery", "Control", "TaskRegistry", "current_app", "shared_task"]

logger = logging.getLogger("sync_worker.celery.app")

_state_lock = threading.RLock()
_current: Optional[Celery] = None
_default: Optional[Celery] = None
_shared: List[BaseTask] = []

#: Task decorator options accepted as class attributes.
TASK_OPTIONS = {
    "name", "bind", "base", "typing", "max_retries", "default_retry_delay", "autoretry_for", "dont_autoretry_for",
    "retry_kwargs", "retry_backoff", "retry_backoff_max", "retry_jitter", "time_limit", "soft_time_limit",
    "queue", "ignore_result", "acks_late", "rate_limit", "expires", "shared", "lazy", "filter", "pydantic",
    "track_started", "pydantic_strict", "pydantic_context", "pydantic_dump_kwargs",
    *IGNORED_TASK_OPTIONS,
}


def current_app() -> Celery:
    """The app most recently created (or set with ``set_current``); a default app if none."""
    global _default
    with _state_lock:
        if _current is not None:
            return _current
        if _default is None:
            _default = Celery("default", set_as_current=False)
        return _default


def _gen_task_name(app: Celery, name: str, module: str) -> str:
    if module == "__main__" and app.main:
        module = app.main
    return f"{module}.{name}"


class TaskRegistry(dict):  # type: ignore[type-arg]
    """``app.tasks``: task name → task; a missing name raises :class:`NotRegistered`."""

    def __missing__(self, key: str) -> BaseTask:
        raise NotRegistered(key)

    def register(self, task: BaseTask) -> BaseTask:
        self[str(task.name)] = task
        return task

    def unregister(self, name: Any) -> None:
        self.pop(getattr(name, "name", name), None)


class Control:
    """``app.control``: revoke, terminate; ``ping`` and ``inspect().ping()/registered()`` from the
    server's worker list (the rest of Celery's remote control is refused)."""

    def __init__(self, app: Celery) -> None:
        self.app = app

    def revoke(self, task_id: Any, destination: Any = None, terminate: bool = False, signal: Any = None,
               **kwargs: Any) -> None:
        from sync_worker.errors import NotFound

        ids = task_id if isinstance(task_id, (list, tuple, set)) else [task_id]
        reason = "revoked by celery control" + (" (terminate)" if terminate else "")
        client = self.app.client
        for one in ids:
            try:
                client.cancel_activity(str(one), reason=reason)
            except NotFound:
                try:
                    client.cancel_workflow(str(one), reason=reason)
                except NotFound:
                    logger.info("revoke: no task or canvas %s", one)

    def terminate(self, task_id: Any, signal: Any = None, **kwargs: Any) -> None:
        self.revoke(task_id, terminate=True, signal=signal)

    def inspect(self, destination: Any = None, timeout: float = 1.0, **kwargs: Any) -> Any:
        """``ping()`` and ``registered()`` from the server's worker list (``sync_worker_celery.inspect``)."""
        from .inspect import Inspect

        return Inspect(self.app, destination, timeout, **kwargs)

    def ping(self, destination: Any = None, timeout: float = 1.0, **kwargs: Any) -> List[Dict[str, Any]]:
        from .inspect import ping

        return ping(self.app, destination)

    def __getattr__(self, name: str) -> Any:
        raise UnsupportedFeature(f"app.control.{name} is not supported (there is no broadcast channel to workers); "
                                 "use the server's worker list: sync_worker.Client.list_workers()")


class Celery:
    """A Celery application backed by the Durable Workflow server."""

    Task: Type[BaseTask]

    def __init__(self, main: Optional[str] = None, loader: Any = None, backend: Any = None, amqp: Any = None,
                 events: Any = None, log: Any = None, control: Any = None, set_as_current: bool = True,
                 tasks: Any = None, broker: Any = None, include: Optional[Sequence[str]] = None,
                 changes: Any = None, config_source: Any = None, fixups: Any = None, task_cls: Any = None,
                 autofinalize: bool = True, namespace: Optional[str] = None, strict_typing: bool = True,
                 **kwargs: Any) -> None:
        self.main = main
        self.conf = Settings()
        self.tasks = TaskRegistry()
        self.control = Control(self)
        self.namespace = namespace
        base = task_cls if isinstance(task_cls, type) else BaseTask
        self.Task = type("Task", (base,), {"_app": self, "__module__": __name__})
        self._client: Any = None
        self._backend: Any = None
        self._client_lock = threading.Lock()
        self._autodiscover: List[Any] = []
        self._periodic: List[Dict[str, Any]] = []
        self._finalized = False
        self.origin = f"gen{os.getpid()}@{socket.gethostname()}"
        self.on_after_configure = signals.Signal("on_after_configure")
        self.on_after_finalize = signals.Signal("on_after_finalize")
        self.on_configure = signals.Signal("on_configure")
        if broker is not None:
            notices.once("broker", "Celery(broker=...) is ignored: the Durable Workflow server is the broker")
        if backend is not None:
            notices.once("backend", "Celery(backend=...) is ignored: results are kept by the Durable Workflow server")
        if include:
            self.conf.include = tuple(include)
        if config_source is not None:
            self.config_from_object(config_source)
        for key, value in kwargs.items():
            self.conf[key] = value
        if set_as_current:
            self.set_current()
        with _state_lock:
            for task in _shared:
                self.tasks.setdefault(str(task.name), task)

    def __repr__(self) -> str:
        return f"<Celery {self.main or '__main__'} at {id(self):#x}>"

    # -- the app as current / configuration -------------------------------------------------------------

    def set_current(self) -> None:
        global _current
        with _state_lock:
            _current = self

    def set_default(self) -> None:
        self.set_current()

    def config_from_object(self, obj: Any, silent: bool = False, force: bool = False,
                           namespace: Optional[str] = None) -> None:
        """Read settings from ``obj`` (object, dict or ``"module:attr"``), ``CELERY_`` names with a namespace."""
        try:
            self.conf.add_source(obj, namespace or self.namespace, force=force)
        except ImportError:
            if not silent:
                raise

    def config_from_envvar(self, variable_name: str, silent: bool = False, force: bool = False) -> None:
        module = os.environ.get(variable_name)
        if not module:
            if silent:
                return
            raise ImproperlyConfigured(f"The environment variable {variable_name!r} is not set")
        self.config_from_object(module, silent=silent, force=force)

    def add_defaults(self, d: Any) -> None:
        for key, value in (d.items() if isinstance(d, dict) else vars(d).items()):
            self.conf.setdefault(key, value)

    # -- tasks --------------------------------------------------------------------------------------------

    def task(self, *args: Any, **opts: Any) -> Any:
        """``@app.task``, ``@app.task()``, ``@app.task(bind=True, name=..., ...)``."""
        if len(args) == 1 and callable(args[0]) and not opts:
            return self._task_from_fun(args[0])
        if args:
            raise TypeError("@task() takes exactly 1 argument; use keyword options")

        def decorate(fun: Callable[..., Any]) -> BaseTask:
            return self._task_from_fun(fun, **opts)
        return decorate

    def _task_from_fun(self, fun: Callable[..., Any], name: Optional[str] = None, base: Any = None,
                       bind: bool = False, shared: bool = True, **options: Any) -> BaseTask:
        if inspect.iscoroutinefunction(fun):
            raise TypeError(f"task {fun.__qualname__} is an 'async def'; tasks are plain synchronous functions")
        for key in options:
            if key not in TASK_OPTIONS:
                raise TypeError(f"unknown task option {key!r} for {fun.__qualname__}")
            if key in IGNORED_TASK_OPTIONS:
                notices.once(f"task:{key}", f"task option {key}= is ignored: {IGNORED_TASK_OPTIONS[key]}")
        for key in ("lazy", "filter"):
            if options.pop(key, None):
                notices.once(f"task:{key}", f"task option {key}= is ignored")
        if options.pop("pydantic", False):
            from .pydantic_args import wrap

            fun = wrap(fun, bool(options.pop("pydantic_strict", False)), options.pop("pydantic_context", None),
                       options.pop("pydantic_dump_kwargs", None))
        task_name = name or _gen_task_name(self, fun.__name__, fun.__module__)
        if task_name in self.tasks and getattr(self.tasks[task_name], "__wrapped__", None) is fun:
            existing: BaseTask = self.tasks[task_name]
            return existing
        if options.get("rate_limit") is not None:
            from .ratelimit import parse_rate

            parse_rate(options["rate_limit"])  # a bad rate is an error at definition time
        attrs: Dict[str, Any] = {
            "name": task_name, "run": fun if bind else staticmethod(fun), "bind": bind,
            "__doc__": fun.__doc__, "__module__": fun.__module__, "__wrapped__": staticmethod(fun),
            "__qualname__": fun.__qualname__, "_app": self,
        }
        for key, value in options.items():
            if key in IGNORED_TASK_OPTIONS:
                continue
            if key in ("autoretry_for", "dont_autoretry_for"):
                value = tuple(value or ())
            attrs[key] = value
        if "default_retry_delay" not in options and self.conf.get("task_default_retry_delay") is not None:
            attrs["default_retry_delay"] = self.conf.task_default_retry_delay
        cls = type(fun.__name__, (base or self.Task,), attrs)
        task: BaseTask = cls()
        self.tasks.register(task)
        return task

    def register_task(self, task: Any, **options: Any) -> BaseTask:
        """Register a class-based task (an instance or a Task subclass)."""
        instance = task() if isinstance(task, type) else task
        if instance.name is None:
            instance.name = _gen_task_name(self, type(instance).__name__, type(instance).__module__)
        instance.bind_app(self)
        return self.tasks.register(instance)

    def send_task(self, name: str, args: Optional[Sequence[Any]] = None, kwargs: Optional[Dict[str, Any]] = None,
                  countdown: Optional[float] = None, eta: Any = None, task_id: Optional[str] = None,
                  producer: Any = None, connection: Any = None, router: Any = None, result_cls: Any = None,
                  expires: Any = None, publisher: Any = None, link: Any = None, link_error: Any = None,
                  add_to_parent: bool = True, group_id: Optional[str] = None, group_index: Optional[int] = None,
                  retries: int = 0, chord: Any = None, reply_to: Any = None, time_limit: Optional[float] = None,
                  soft_time_limit: Optional[float] = None, root_id: Optional[str] = None,
                  parent_id: Optional[str] = None, route_name: Any = None, shadow: Any = None, chain: Any = None,
                  task_type: Any = None, replaced_task_nesting: int = 0, _task: Optional[BaseTask] = None,
                  **options: Any) -> Any:
        """Start task ``name`` (it need not be registered in this process)."""
        from .publish import send_task

        for key, value in (("countdown", countdown), ("eta", eta), ("expires", expires),
                           ("time_limit", time_limit), ("soft_time_limit", soft_time_limit),
                           ("root_id", root_id), ("parent_id", parent_id), ("group_id", group_id)):
            if value is not None:
                options[key] = value
        if chord is not None:
            raise UnsupportedFeature("send_task(chord=...) is not supported; use chord(header, body)")
        return send_task(self, name, tuple(args or ()), dict(kwargs or {}), task_id=task_id, link=link,
                         link_error=link_error, task=_task, **options)

    def signature(self, *args: Any, **kwargs: Any) -> Any:
        from .canvas import signature

        kwargs.setdefault("app", self)
        return signature(*args, **kwargs)

    def AsyncResult(self, id: str, **kwargs: Any) -> Any:
        from .result import AsyncResult

        return AsyncResult(id, app=self, **kwargs)

    def GroupResult(self, id: Optional[str] = None, results: Any = None, **kwargs: Any) -> Any:
        from .result import GroupResult

        return GroupResult(id, results, app=self, **kwargs)

    # -- discovery ------------------------------------------------------------------------------------------

    def autodiscover_tasks(self, packages: Any = None, related_name: Optional[str] = "tasks",
                           force: bool = False) -> None:
        """Import ``<package>.tasks`` for each package (Django: every ``INSTALLED_APPS`` entry).

        As in Celery this is lazy: the modules load when the worker starts (or on
        :meth:`loader_import_default_modules`), or at once with ``force=True``.
        """
        self._autodiscover.append((packages, related_name))
        if force:
            self._run_autodiscovery()

    def _packages(self, packages: Any) -> List[str]:
        if callable(packages):
            packages = packages()
        if packages is None:
            try:
                from django.conf import settings

                packages = list(settings.INSTALLED_APPS) if settings.configured else []
            except ImportError:
                packages = []
        return [str(p) for p in packages]

    def _run_autodiscovery(self) -> None:
        pending, self._autodiscover = self._autodiscover, []
        for packages, related_name in pending:
            for package in self._packages(packages):
                module_name = f"{package}.{related_name}" if related_name else package
                try:
                    importlib.import_module(module_name)
                except ModuleNotFoundError as error:
                    if error.name not in (module_name, package):  # the module itself failed to import
                        raise
                    try:  # a Django AppConfig path: use its package
                        from django.apps import apps

                        config = next((c for c in apps.get_app_configs() if c.name == package
                                       or f"{c.__module__}.{type(c).__name__}" == package), None)
                    except Exception:
                        config = None
                    if config is not None and config.name != package:
                        try:
                            importlib.import_module(f"{config.name}.{related_name}")
                        except ModuleNotFoundError:
                            pass

    def loader_import_default_modules(self) -> None:
        """Import ``imports``/``include`` settings and run pending autodiscovery (the worker does this).

        In a Django project (``DJANGO_SETTINGS_MODULE`` set) ``django.setup()`` runs first, as
        Celery's Django fixup does, so task modules may import models at the top.
        """
        setup_django()
        signals.import_modules.send(sender=self)
        for module in list(self.conf.get("imports") or ()) + list(self.conf.get("include") or ()):
            importlib.import_module(module)
        self._run_autodiscovery()

    def finalize(self, auto: bool = False) -> None:
        """Import the task modules, apply ``task_annotations``, say which settings change nothing."""
        if self._finalized:
            return
        self._finalized = True
        self.on_after_configure.send(sender=self, source=self.conf)
        self.loader_import_default_modules()
        with _state_lock:
            for task in _shared:
                self.tasks.setdefault(str(task.name), task)
        self._apply_annotations()
        self._notice_settings()
        self.on_after_finalize.send(sender=self)

    def _apply_annotations(self) -> None:
        """``task_annotations``: ``{name-or-"*": {attr: value}}`` (or a list of those) set on the tasks."""
        annotations = self.conf.get("task_annotations")
        if not annotations:
            return
        for mapping in annotations if isinstance(annotations, (list, tuple)) else [annotations]:
            if not isinstance(mapping, dict):
                raise UnsupportedFeature("task_annotations objects with annotate() are not supported; use a dict")
            for pattern, attributes in mapping.items():
                for task in self.tasks.values():
                    if pattern == "*" or pattern == task.name:
                        for key, value in dict(attributes).items():
                            if key.startswith("on_") and callable(value):
                                raise UnsupportedFeature(f"task_annotations handler {key!r} is not supported")
                            setattr(task, key, value)

    def _notice_settings(self) -> None:
        from .config import DEFAULTS, IGNORED_SETTINGS

        for key, value in self.conf.items():
            if key in IGNORED_SETTINGS and value != DEFAULTS.get(key):
                notices.once(f"setting:{key}", f"setting {key} is ignored: {IGNORED_SETTINGS[key]}")
            elif key not in DEFAULTS and key not in IGNORED_SETTINGS:
                notices.once(f"setting:{key}", f"setting {key} is not known to sync_worker_celery and is ignored")

    # -- periodic tasks ----------------------------------------------------------------------------------

    def add_periodic_task(self, schedule: Any, sig: Any, args: Sequence[Any] = (), kwargs: Any = (),
                          name: Optional[str] = None, **opts: Any) -> str:
        key = name or repr(sig)
        self._periodic.append({"name": key, "schedule": schedule, "sig": sig, "options": opts})
        return key

    # -- the server ----------------------------------------------------------------------------------------

    @property
    def client(self) -> Any:
        """The ``sync_worker.Client`` this app talks to (built from settings or the environment)."""
        with self._client_lock:
            if self._client is None:
                # Publishes and result reads go on the stdlib socket pool, as the worker plane does:
                # a fraction of a requests session's CPU per call (docs/celery.md#speed).
                self._client = self.client_options().build_client(control_plane_transport="stdlib")
            return self._client

    @client.setter
    def client(self, value: Any) -> None:
        with self._client_lock:
            self._client = value

    def client_options(self) -> ClientOptions:
        """How this app reaches the server: its ``durable_workflow_*`` settings, else the
        ``DURABLE_WORKFLOW_*`` environment (:class:`sync_worker.host.ClientOptions`)."""
        settings = {key: self.conf.get(key) for key in CLIENT_SETTINGS if self.conf.get(key)}
        try:
            options = ClientOptions.from_mapping(settings, base=ClientOptions.from_env(), source="app.conf")
        except OptionsError as error:
            raise ImproperlyConfigured(str(error)) from None
        # As every sync-worker command (and as Celery's own broker_url default to localhost): the
        # local server when none is configured; the start-up line names it.
        return options.or_default_server()

    @property
    def backend(self) -> Any:
        """Celery's result-backend API over the server (:class:`~sync_worker_celery.backend.DurableBackend`)."""
        if self._backend is None:
            from .backend import DurableBackend

            self._backend = DurableBackend(self)
        return self._backend

    def connection_for_write(self, *args: Any, **kwargs: Any) -> Any:
        raise UnsupportedFeature("broker connections are not supported: there is no broker")

    connection = connection_for_read = connection_for_write

    # -- workers -----------------------------------------------------------------------------------------

    def workers_for(self, queues: Optional[Iterable[str]] = None, **options: Any) -> List[Any]:
        """``sync_worker.Worker`` objects serving this app's tasks (and canvases) on ``queues``."""
        from .worker import build_workers

        return build_workers(self, list(queues) if queues else None, **options)

    def worker_main(self, argv: Optional[Sequence[str]] = None) -> None:
        """Run ``celery worker`` with ``argv`` (default :data:`sys.argv`), as Celery's does: ``argv``
        must name the ``worker`` sub-command."""
        args = _command_args(argv)
        if "worker" not in args:
            raise ValueError("The worker sub-command must be specified in argv.\n"
                             "Use app.start() to programmatically start other commands.")
        self.start(args)

    def start(self, argv: Optional[Sequence[str]] = None) -> None:
        """Run the ``celery`` command with ``argv`` (default :data:`sys.argv`): ``python proj.py worker
        -l INFO`` serves exactly as ``sync-worker celery -A proj worker -l INFO`` (same flags, ready
        line and exit codes)."""
        from .cli import main

        main(_command_args(argv) or ["worker"], app=self)

    def close(self) -> None:
        with self._client_lock:
            client, self._client = self._client, None
        if client is not None and hasattr(client, "close"):
            client.close()

    def __enter__(self) -> Celery:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def _command_args(argv: Optional[Sequence[str]]) -> List[str]:
    """The command's arguments: ``argv`` (default :data:`sys.argv`) without the program name that
    :data:`sys.argv` starts with (Celery passes it on whole; click would read it as a command)."""
    args = list(sys.argv if argv is None else argv)
    if args and (args[0] == sys.argv[0] or args[0].endswith(".py")):
        args = args[1:]
    return args


def django_configured() -> bool:
    """True when this process runs a Django project (``DJANGO_SETTINGS_MODULE`` and Django importable)."""
    if not os.environ.get("DJANGO_SETTINGS_MODULE"):
        return False
    try:
        import django  # noqa: F401
    except ImportError:
        return False
    return True


def setup_django() -> None:
    """``django.setup()`` once, when this process runs a Django project."""
    if not django_configured():
        return
    from django.apps import apps

    if not apps.ready:
        import django

        django.setup()


def shared_task(*args: Any, **kwargs: Any) -> Any:
    """``@shared_task``: a task usable from any app (reusable Django apps); it binds to the current app."""

    def create(fun: Callable[..., Any]) -> BaseTask:
        app = current_app()
        task: BaseTask = app._task_from_fun(fun, **kwargs)
        task._app = None  # resolve the app at call time, like Celery's proxy
        with _state_lock:
            _shared.append(task)
            apps = {id(a): a for a in (_current, _default) if a is not None}
        for other in apps.values():
            other.tasks.setdefault(str(task.name), task)
        return task

    if len(args) == 1 and callable(args[0]) and not kwargs:
        return create(args[0])
    return create
