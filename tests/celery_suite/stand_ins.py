"""Stand-ins for the Celery names ``sync_worker_celery`` does not have (staged as
``t/integration/_standins.py``; ``stage.py`` imports a name from here only when the facade lacks
it). Importing one never fails; using one raises ``UnsupportedFeature`` saying why, or (for a
class only used with ``isinstance``/``except``) simply never matches."""

from sync_worker_celery.exceptions import UnsupportedFeature


class BaseKeyValueStoreBackend:
    """celery.backends.base.BaseKeyValueStoreBackend: the facade's backend is the Durable Workflow
    server, not a key-value store, so ``isinstance(app.backend, BaseKeyValueStoreBackend)`` is False."""

    def __init__(self, *args, **kwargs):
        raise UnsupportedFeature("celery.backends.base.BaseKeyValueStoreBackend: there is no key-value result "
                                 "backend (the Durable Workflow server keeps results)")


class _Refused:
    def __init__(self, name, why):
        self._name = name
        self._why = why

    def __getattr__(self, attribute):
        raise UnsupportedFeature(f"{self._name}.{attribute} is not supported by sync_worker_celery: {self._why}")


#: celery.worker.state: the worker's in-process state lives in another process here.
worker_state = state = _Refused("celery.worker.state", "the worker runs in its own process and keeps no "
                                "revoked-stamp set (revoke_by_stamped_headers is refused)")


class UnpickleableExceptionWrapper(Exception):
    """celery.utils.serialization.UnpickleableExceptionWrapper: never raised by the facade."""


states = _Refused("celery.backends.base.states", "use sync_worker_celery.states")
