"""Celery's signals (``celery.signals``), sent with Celery's senders and keyword arguments.

Handlers written for Celery (Sentry, APM agents, Django hygiene) connect the same way::

    @task_prerun.connect
    def on_prerun(sender=None, task_id=None, task=None, args=None, kwargs=None, **extra): ...

    @task_success.connect(sender=add)            # only for this task
    def on_add(sender=None, result=None, **extra): ...

Every receiver is called as ``receiver(signal=<Signal>, sender=<sender>, **arguments)``.
As in Celery, an exception raised by a receiver is logged and does not stop the others
(nor the task); ``send`` returns ``[(receiver, response_or_exception), ...]``.

Who sends what (same as Celery):

=====================  ==================  ====================================================
signal                 sender              arguments
=====================  ==================  ====================================================
before_task_publish    task name (str)     body, exchange, routing_key, headers, properties,
                                           declare, retry_policy
after_task_publish     task name (str)     body, exchange, routing_key, headers
task_received          None                request (sent as the worker starts the call)
task_prerun            the task            task_id, task, args, kwargs
task_postrun           the task            task_id, task, args, kwargs, retval, state
task_success           the task            result
task_failure           the task            task_id, exception, args, kwargs, traceback, einfo
task_retry             the task            request, reason, einfo
task_revoked           the task            request, terminated, signum, expired
worker_init            the worker          (none)
worker_process_init    None                (none; once per worker process)
worker_ready           the worker          (none)
worker_shutdown        the worker          (none)
worker_process_shutdown None               pid, exitcode
import_modules         the app             (none)
celeryd_init           hostname (str)      instance, conf, options
=====================  ==================  ====================================================

Never sent here (connecting one logs a notice): ``task_sent``, ``task_rejected``, ``task_unknown``,
``task_internal_error``, ``beat_init``, ``beat_embedded_init``, ``setup_logging``,
``after_setup_logger``, ``after_setup_task_logger``, ``heartbeat_sent``, ``user_preload_options``,
``worker_before_create_process``.
"""

from __future__ import annotations

import logging
import threading
import weakref
from typing import Any, Callable, List, Optional, Tuple

__all__ = [
    "Signal",
    "after_task_publish",
    "before_task_publish",
    "after_setup_logger",
    "after_setup_task_logger",
    "beat_embedded_init",
    "beat_init",
    "celeryd_after_setup",
    "celeryd_init",
    "heartbeat_sent",
    "import_modules",
    "setup_logging",
    "task_failure",
    "task_internal_error",
    "task_postrun",
    "task_prerun",
    "task_received",
    "task_rejected",
    "task_retry",
    "task_revoked",
    "task_sent",
    "task_success",
    "task_unknown",
    "user_preload_options",
    "worker_before_create_process",
    "worker_init",
    "worker_process_init",
    "worker_process_shutdown",
    "worker_ready",
    "worker_shutdown",
    "worker_shutting_down",
]

logger = logging.getLogger("sync_worker.celery.signals")

_ANY = object()


def _sender_key(sender: Any) -> Any:
    if sender is None:
        return _ANY
    if isinstance(sender, str):  # task names: equal strings are the same sender
        return ("name", sender)
    return ("id", id(sender))


class Signal:
    """A named signal; ``connect`` is usable bare, with arguments, or as a plain call."""

    def __init__(self, name: str, providing_args: Optional[List[str]] = None, sent: bool = True) -> None:
        self.name = name
        #: False for the Celery signals this facade never sends (connecting logs a notice)
        self.sent = sent
        self.providing_args = list(providing_args or [])
        self._lock = threading.Lock()
        # (lookup key, sender key, receiver ref or callable, is_weak)
        self._receivers: List[Tuple[Any, Any, Any, bool]] = []

    def __repr__(self) -> str:
        return f"<Signal: {self.name}>"

    def connect(self, receiver: Optional[Callable[..., Any]] = None, sender: Any = None, weak: bool = True,
                dispatch_uid: Optional[str] = None, **_ignored: Any) -> Any:
        if receiver is None:
            def decorate(fn: Callable[..., Any]) -> Callable[..., Any]:
                self._connect(fn, sender, weak, dispatch_uid)
                return fn
            return decorate
        self._connect(receiver, sender, weak, dispatch_uid)
        return receiver

    def _connect(self, receiver: Callable[..., Any], sender: Any, weak: bool, dispatch_uid: Optional[str]) -> None:
        if not self.sent:
            from . import notices

            notices.once(f"signal:{self.name}", f"signal {self.name} is never sent by sync_worker_celery "
                                                "(nothing in it happens here); the receiver will not be called")
        skey = _sender_key(sender)
        lookup = (dispatch_uid or self._receiver_id(receiver), skey)
        ref: Any = receiver
        is_weak = False
        if weak:
            try:
                ref = weakref.WeakMethod(receiver) if hasattr(receiver, "__self__") else weakref.ref(receiver)
                is_weak = True
            except TypeError:
                ref, is_weak = receiver, False
        with self._lock:
            # Dead weak receivers go first (as Django's dispatcher clears them on connect): their key is an
            # id(), and a new function object can get a dead one's id -- it would be taken for a receiver
            # already connected and never called (Celery's suite met this: a test's local handler got the id
            # of an earlier test's, and the signal never reached it).
            self._receivers = [e for e in self._receivers if not e[3] or e[2]() is not None]
            if any(entry[0] == lookup for entry in self._receivers):
                return
            self._receivers.append((lookup, skey, ref, is_weak))

    @staticmethod
    def _receiver_id(receiver: Callable[..., Any]) -> Any:
        if hasattr(receiver, "__self__") and hasattr(receiver, "__func__"):
            return (id(receiver.__self__), id(receiver.__func__))
        return id(receiver)

    def disconnect(self, receiver: Optional[Callable[..., Any]] = None, sender: Any = None,
                   weak: bool = True, dispatch_uid: Optional[str] = None) -> bool:
        if receiver is None and dispatch_uid is None:
            return False
        lookup = (dispatch_uid or self._receiver_id(receiver), _sender_key(sender))  # type: ignore[arg-type]
        with self._lock:
            before = len(self._receivers)
            self._receivers = [entry for entry in self._receivers if entry[0] != lookup]
            return len(self._receivers) != before

    def has_listeners(self, sender: Any = None) -> bool:
        return bool(self._live_receivers(sender))

    def _live_receivers(self, sender: Any) -> List[Callable[..., Any]]:
        skey = _sender_key(sender)
        live: List[Callable[..., Any]] = []
        dead = False
        with self._lock:
            entries = list(self._receivers)
        for _lookup, entry_sender, ref, is_weak in entries:
            if entry_sender is not _ANY and entry_sender != skey:
                continue
            fn = ref() if is_weak else ref
            if fn is None:
                dead = True
                continue
            live.append(fn)
        if dead:
            with self._lock:
                self._receivers = [e for e in self._receivers if not e[3] or e[2]() is not None]
        return live

    def send(self, sender: Any, **named: Any) -> List[Tuple[Callable[..., Any], Any]]:
        """Call every matching receiver; receiver errors are logged, never raised."""
        responses: List[Tuple[Callable[..., Any], Any]] = []
        if not self._receivers:  # most signals of most tasks: no lock, no copy (the list is only replaced
            return responses     # or appended to, so reading its length is safe)
        for receiver in self._live_receivers(sender):
            try:
                response = receiver(signal=self, sender=sender, **named)
            except Exception as error:
                logger.exception("Signal handler %r raised: %r", receiver, error)
                responses.append((receiver, error))
            else:
                responses.append((receiver, response))
        return responses

    send_robust = send


before_task_publish = Signal("before_task_publish")
after_task_publish = Signal("after_task_publish")
task_sent = Signal("task_sent", sent=False)
task_received = Signal("task_received")
task_prerun = Signal("task_prerun")
task_postrun = Signal("task_postrun")
task_success = Signal("task_success")
task_failure = Signal("task_failure")
task_retry = Signal("task_retry")
task_revoked = Signal("task_revoked")
task_rejected = Signal("task_rejected", sent=False)
task_unknown = Signal("task_unknown", sent=False)
task_internal_error = Signal("task_internal_error", sent=False)
import_modules = Signal("import_modules")
celeryd_init = Signal("celeryd_init")
celeryd_after_setup = Signal("celeryd_after_setup")
worker_init = Signal("worker_init")
worker_process_init = Signal("worker_process_init")
worker_process_shutdown = Signal("worker_process_shutdown")
worker_ready = Signal("worker_ready")
worker_shutdown = Signal("worker_shutdown")
worker_shutting_down = Signal("worker_shutting_down")
beat_init = Signal("beat_init", sent=False)
beat_embedded_init = Signal("beat_embedded_init", sent=False)
setup_logging = Signal("setup_logging", sent=False)
after_setup_logger = Signal("after_setup_logger", sent=False)
after_setup_task_logger = Signal("after_setup_task_logger", sent=False)
heartbeat_sent = Signal("heartbeat_sent", sent=False)
user_preload_options = Signal("user_preload_options", sent=False)
worker_before_create_process = Signal("worker_before_create_process", sent=False)
