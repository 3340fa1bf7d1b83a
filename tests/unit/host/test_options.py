"""``WorkerOptions`` / ``ClientOptions``: defaults, validation, settings and environment names, errors."""

from __future__ import annotations

import dataclasses
import inspect
from typing import Any, Dict

import pytest

from sync_worker import Worker
from sync_worker.host import ClientOptions, OptionsError, UnknownOption, WorkerOptions

from ..worker.fakes import FakeClient


def _error(fn: Any, *args: Any, **kwargs: Any) -> OptionsError:
    with pytest.raises(OptionsError) as raised:
        fn(*args, **kwargs)
    return raised.value


# -- WorkerOptions -------------------------------------------------------------------------------


def test_the_fields_are_the_worker_constructor_keywords_with_its_defaults() -> None:
    parameters = {name: p for name, p in inspect.signature(Worker.__init__).parameters.items()
                  if name not in ("self", "client")}
    fields = {f.name: f.default for f in dataclasses.fields(WorkerOptions)}
    assert list(fields) == list(parameters)
    for name, parameter in parameters.items():
        if parameter.default is inspect.Parameter.empty:  # task_queue: required by Worker, set later here
            assert fields[name] is None, name
        else:
            assert fields[name] == parameter.default, name


def test_options_are_frozen_and_replace_validates() -> None:
    options = WorkerOptions(task_queue="q")
    with pytest.raises(dataclasses.FrozenInstanceError):
        options.task_queue = "other"  # type: ignore[misc]
    assert options.replace(max_concurrent_workflow_tasks=3).max_concurrent_workflow_tasks == 3
    error = _error(options.replace, max_concurrent_workflow_tasks=0)
    assert (error.key, error.value) == ("max_concurrent_workflow_tasks", 0)
    assert str(error) == "max_concurrent_workflow_tasks must be a positive int, got 0"
    with pytest.raises(UnknownOption, match="nope is not a known option"):
        options.replace(nope=1)


@pytest.mark.parametrize("key, value, requirement", [
    ("poll_timeout", -1, "must be a non-negative number of seconds"),
    ("shutdown_timeout", "soon", "must be a non-negative number of seconds"),
    ("heartbeat_interval", 0, "must be a positive number of seconds"),
    ("max_startup_wait", True, "must be a non-negative number of seconds"),
    ("max_concurrent_activity_tasks", 0, "must be a positive int, 'adaptive' or a dict of adaptive knobs"),
    ("max_concurrent_activity_tasks", "lots", "must be a positive int, 'adaptive' or a dict of adaptive knobs"),
    ("max_concurrent_activity_task_polls", 1.5, "must be a positive int"),
    ("pool", "eventlet", "must be 'threads', 'gevent' or 'prefork'"),
    ("task_queue", "", "must be a non-empty string or None"),
    ("sticky_cache_capacity", -1, "must be an int of at least 0 (or unset for the default)"),
    ("sticky_cache_ttl_seconds", 7200, "must be a whole number of seconds from 1 to 3600"),
    ("workflows", "MyWorkflow", "must be a list"),
])
def test_every_bad_keyword_is_named_with_its_value(key: str, value: Any, requirement: str) -> None:
    error = _error(WorkerOptions.from_kwargs, **{key: value})
    assert (error.key, error.value, error.requirement) == (key, value, requirement)
    assert str(error).startswith(f"{key} {requirement}")
    assert isinstance(error, ValueError)


def test_values_are_normalised() -> None:
    options = WorkerOptions.from_kwargs(pool="thread", max_concurrent_activity_tasks=" Adaptive ", workflows=[1, 2],
                                        shutdown_timeout=5, max_concurrent_workflow_tasks=4)
    assert options.pool == "threads" and options.max_concurrent_activity_tasks == "adaptive"
    assert options.workflows == (1, 2) and options.shutdown_timeout == 5.0
    assert WorkerOptions.from_kwargs(max_concurrent_activity_tasks="12").max_concurrent_activity_tasks == 12
    knobs = WorkerOptions.from_kwargs(max_concurrent_activity_tasks={"max": 16, "ramAdmitPct": 70})
    assert knobs.max_concurrent_activity_tasks == {"max": 16, "ramAdmitPct": 70}
    with pytest.raises(OptionsError, match="unknown concurrency option"):
        WorkerOptions.from_kwargs(max_concurrent_activity_tasks={"maximum": 3})


def test_from_mapping_reads_the_django_and_celery_names_and_says_where() -> None:
    settings = {"CONCURRENCY": 8, "WORKFLOW_CONCURRENCY": 4, "ACTIVITY_POLLERS": 2, "WORKFLOW_POLLERS": 3,
                "SHUTDOWN_TIMEOUT": "12.5", "POLL_TIMEOUT": 20, "HEARTBEAT_INTERVAL": 30, "POOL": "threads",
                "BUILD_ID": "b1", "STICKY_CACHE_CAPACITY": 100, "TASK_QUEUE": "shop"}
    options = WorkerOptions.from_mapping(settings, source="settings.SYNC_WORKER")
    assert (options.max_concurrent_activity_tasks, options.max_concurrent_workflow_tasks) == (8, 4)
    assert (options.max_concurrent_activity_task_polls, options.max_concurrent_workflow_task_polls) == (2, 3)
    assert (options.shutdown_timeout, options.poll_timeout, options.heartbeat_interval) == (12.5, 20.0, 30.0)
    assert (options.pool, options.build_id, options.sticky_cache_capacity, options.task_queue) == (
        "threads", "b1", 100, "shop")
    assert WorkerOptions.from_mapping({"worker_concurrency": 6}).max_concurrent_activity_tasks == 6
    assert WorkerOptions.from_mapping({"max_concurrent_workflow_tasks": 2}).max_concurrent_workflow_tasks == 2
    error = _error(WorkerOptions.from_mapping, {"CONCURRENCY": 0}, source="settings.SYNC_WORKER")
    assert (error.key, error.value, error.source) == ("CONCURRENCY", 0, "settings.SYNC_WORKER['CONCURRENCY']")
    assert str(error).startswith("CONCURRENCY (settings.SYNC_WORKER['CONCURRENCY']) must be a positive int")
    with pytest.raises(UnknownOption) as unknown:
        WorkerOptions.from_mapping({"CONCURENCY": 3}, source="settings.SYNC_WORKER")
    assert unknown.value.key == "CONCURENCY" and "CONCURRENCY" in unknown.value.known
    assert str(unknown.value).startswith("CONCURENCY (settings.SYNC_WORKER) is not a known option")
    # keys another adapter reads are skipped only when named
    assert WorkerOptions.from_mapping({"SERVER_URL": "http://x", "POOL": "gevent"},
                                      ignore={"SERVER_URL"}).pool == "gevent"


def test_readers_layer_over_a_base() -> None:
    base = WorkerOptions.from_env({"SYNC_WORKER_CONCURRENCY": "3", "SYNC_WORKER_SHUTDOWN_TIMEOUT": "9"})
    merged = WorkerOptions.from_mapping({"CONCURRENCY": 5}, base=base)
    assert (merged.max_concurrent_activity_tasks, merged.shutdown_timeout) == (5, 9.0)


def test_from_env_reads_the_sync_worker_variables_and_names_a_bad_one() -> None:
    env: Dict[str, str] = {"SYNC_WORKER_CONCURRENCY": "adaptive", "SYNC_WORKER_WORKFLOW_CONCURRENCY": "3",
                           "SYNC_WORKER_POOL": "threads", "SYNC_WORKER_ACTIVITY_POLLERS": "2",
                           "SYNC_WORKER_SHUTDOWN_TIMEOUT": "7", "SYNC_WORKER_TASK_QUEUE": "mail",
                           "SYNC_WORKER_BUILD_ID": "", "SYNC_WORKER_FACTORY": "not:ours", "OTHER": "x"}
    options = WorkerOptions.from_env(env)
    assert options.max_concurrent_activity_tasks == "adaptive" and options.max_concurrent_workflow_tasks == 3
    assert (options.pool, options.max_concurrent_activity_task_polls, options.shutdown_timeout) == ("threads", 2, 7.0)
    assert options.task_queue == "mail" and options.build_id is None  # an empty variable is unset
    error = _error(WorkerOptions.from_env, {"SYNC_WORKER_WORKFLOW_POLLERS": "two"})
    assert (error.key, error.value, error.source) == ("SYNC_WORKER_WORKFLOW_POLLERS", "two", "environment")
    assert str(error) == "SYNC_WORKER_WORKFLOW_POLLERS (environment) must be a positive int, got 'two'"


def test_worker_sessions_are_a_setting_and_a_variable() -> None:
    assert WorkerOptions.from_env({}).max_concurrent_worker_sessions == 10  # the SDK's default
    options = WorkerOptions.from_env({"SYNC_WORKER_MAX_CONCURRENT_WORKER_SESSIONS": "3"})
    assert options.max_concurrent_worker_sessions == 3
    assert WorkerOptions.from_mapping({"MAX_CONCURRENT_WORKER_SESSIONS": 4}).max_concurrent_worker_sessions == 4
    error = _error(WorkerOptions.from_env, {"SYNC_WORKER_MAX_CONCURRENT_WORKER_SESSIONS": "0"})
    assert error.key == "SYNC_WORKER_MAX_CONCURRENT_WORKER_SESSIONS"


def test_build_makes_the_worker_the_options_describe() -> None:
    with pytest.raises(OptionsError, match="task_queue must be set"):
        WorkerOptions().build(FakeClient())

    def echo(value: Any) -> Any:
        return value

    options = WorkerOptions.from_kwargs(task_queue="q", activities=[echo], max_concurrent_activity_tasks=3,
                                        max_concurrent_workflow_task_polls=2, shutdown_timeout=4,
                                        worker_id="w-1", pool="threads")
    worker = options.build(FakeClient())
    assert (worker.task_queue, worker.worker_id, worker.pool) == ("q", "w-1", "threads")
    assert (worker.max_concurrent_activity_tasks, worker.max_concurrent_workflow_task_polls) == (3, 2)
    assert worker.shutdown_timeout == 4.0 and list(worker.activities) == ["echo"]


# -- ClientOptions -------------------------------------------------------------------------------


def test_client_options_from_env_with_flags_winning_and_empty_values_unset() -> None:
    env = {"DURABLE_WORKFLOW_SERVER_URL": "http://env:7233/", "DURABLE_WORKFLOW_AUTH_TOKEN": "env-token",
           "DURABLE_WORKFLOW_NAMESPACE": "", "SYNC_WORKER_REQUEST_TIMEOUT": "15", "SYNC_WORKER_CONNECT_TIMEOUT": "2"}
    options = ClientOptions.from_env(env)
    assert (options.server_url, options.token, options.namespace) == ("http://env:7233", "env-token", "default")
    assert (options.timeout, options.connect_timeout) == (15.0, 2.0)
    flagged = ClientOptions.from_env(env, server_url="http://flag:1", token=None, namespace="ns")
    assert (flagged.server_url, flagged.token, flagged.namespace) == ("http://flag:1", "env-token", "ns")
    assert ClientOptions.from_env({}, token="").token is None  # an empty flag is a flag not given
    assert ClientOptions.from_env({}).server_url is None


@pytest.mark.parametrize("url, message", [
    ("ftp://x", "server_url must be an http(s) origin, got 'ftp://x'"),
    ("http://x:1/api", "server_url is the server origin; leave out the trailing /api"),
    ("http://x:1/?q=1", "server_url must be an http(s) origin, got 'http://x:1/?q=1'"),
    (42, "server_url must be a string"),
])
def test_a_bad_server_url_is_named(url: Any, message: str) -> None:
    assert str(_error(ClientOptions, server_url=url)) == message


def test_tokens_are_never_echoed_back() -> None:
    error = _error(ClientOptions.from_mapping, {"TOKEN": ""}, source="settings.SYNC_WORKER")
    assert str(error) == "TOKEN (settings.SYNC_WORKER['TOKEN']) must be a non-empty string or None"
    error = _error(ClientOptions, worker_token=12345)
    assert "12345" not in str(error)


def test_client_options_read_the_django_and_celery_setting_names() -> None:
    django = ClientOptions.from_mapping({"SERVER_URL": "http://d:1", "TOKEN": "t", "CONTROL_TOKEN": "c",
                                         "WORKER_TOKEN": "w", "NAMESPACE": "n", "REQUEST_TIMEOUT": 5})
    assert (django.server_url, django.token, django.control_token, django.worker_token, django.namespace,
            django.timeout) == ("http://d:1", "t", "c", "w", "n", 5.0)
    celery = ClientOptions.from_mapping({"durable_workflow_server_url": "http://c:2",
                                         "durable_workflow_auth_token": "ct", "durable_workflow_namespace": "cn"},
                                        base=ClientOptions.from_env({"DURABLE_WORKFLOW_NAMESPACE": "env"}))
    assert (celery.server_url, celery.token, celery.namespace) == ("http://c:2", "ct", "cn")
    error = _error(ClientOptions.from_mapping, {"NAMESPACE": ""})
    assert (error.key, str(error)) == ("NAMESPACE", "NAMESPACE must be a non-empty string")
    with pytest.raises(UnknownOption):
        ClientOptions.from_mapping({"SERVER": "http://x"})


def test_build_client_needs_a_server_and_passes_every_option() -> None:
    with pytest.raises(OptionsError, match="DURABLE_WORKFLOW_SERVER_URL"):
        ClientOptions().build_client()
    seen: Dict[str, Any] = {}

    class Recorder:
        def __init__(self, base_url: str, **kwargs: Any) -> None:
            seen.update(kwargs, base_url=base_url)

    options = ClientOptions(server_url="http://s:1", token="t", namespace="n", timeout=3, transport_retries=2)
    assert isinstance(options.build_client(Recorder, max_body_bytes=10), Recorder)
    assert seen == {"base_url": "http://s:1", "token": "t", "control_token": None, "worker_token": None,
                    "namespace": "n", "timeout": 3.0, "connect_timeout": 10.0, "transport_retries": 2,
                    "max_body_bytes": 10}
    client = options.build_client()
    try:
        assert (client.base_url, client.namespace, client.timeout, client.transport_retries) == (
            "http://s:1", "n", 3.0, 2)
    finally:
        client.close()
