"""External payload storage end to end: a 2 MiB argument and result through the local driver.

Runs on threads, then under gevent (tests/gevent_suite.py reruns tests/e2e). The dev server
keeps only references (checked on its raw history); every workflow task replays (cold, or
from the sticky cache) reading the stored payloads back; a client without the driver gets the
typed refusal.
"""

from __future__ import annotations

import hashlib
import json
import time
from pathlib import Path
from typing import Any, Iterator, List

import pytest

from sync_worker import (
    ExternalPayloadCache,
    ExternalPayloadUnsupported,
    LocalFilesystemExternalStorage,
    activity,
    errors,
    workflow,
)
from sync_worker.client import Client

from ._worker_support import RunningWorker, make_worker, unique_queue, wait_for

MIB = 1024 * 1024
THRESHOLD = 64 * 1024


class CountingStorage(LocalFilesystemExternalStorage):
    """The local driver, counting reads (so a test sees replay fetch the stored payloads)."""

    def __init__(self, root: Path) -> None:
        super().__init__(root)
        self.gets: List[str] = []

    def get(self, uri: str) -> bytes:
        self.gets.append(uri)
        return super().get(uri)


@activity.defn(name="e2e.ext.grow")
def grow(text: str) -> str:
    return text + "!"


@workflow.defn(name="e2e.ext.big")
class Big:
    def __init__(self) -> None:
        self.signalled: List[str] = []

    @workflow.signal("more")
    def more(self, text: str) -> None:
        self.signalled.append(text)

    @workflow.update("echo")
    def echo(self, text: str) -> str:
        return text[::-1]

    def run(self, ctx: Any, text: str) -> Any:
        grown = yield ctx.schedule_activity("e2e.ext.grow", [text])
        yield ctx.wait_condition(lambda: bool(self.signalled))
        return {"arg": hashlib.sha256(text.encode()).hexdigest(), "grown": grown,
                "signal": hashlib.sha256(self.signalled[0].encode()).hexdigest()}


@pytest.fixture
def storage(tmp_path: Path) -> CountingStorage:
    return CountingStorage(tmp_path / "payloads")


@pytest.fixture
def client(dev_server_session: Any, storage: CountingStorage) -> Iterator[Client]:
    c = Client(dev_server_session.url, external_storage=storage, external_storage_threshold_bytes=THRESHOLD)
    try:
        yield c
    finally:
        c.close()


def _text(seed: str, size: int = 2 * MIB) -> str:
    return (seed * (size // len(seed) + 1))[:size]


@pytest.mark.parametrize("sticky", [0, 16], ids=["cold", "sticky"])
def test_a_2mib_argument_signal_update_and_result_round_trip(
    client: Client, dev_server_session: Any, storage: CountingStorage, sticky: int,
) -> None:
    queue = unique_queue("ext")
    text, signal = _text("abcdefgh"), _text("signal!", MIB + 7)
    # max_bytes=1: nothing is cached, so every replay has to read the stored payloads again
    worker = make_worker(client, task_queue=queue, workflows=[Big], activities=[grow], poll_timeout=2.0,
                         sticky_cache_capacity=sticky, external_storage_cache=ExternalPayloadCache(max_bytes=1))
    handle = client.start_workflow("e2e.ext.big", text, task_queue=queue)
    with RunningWorker(worker):
        assert client.update_workflow(handle.workflow_id, "echo", args=[text], wait_for="completed")["result"] \
            == text[::-1]
        client.signal_workflow(handle.workflow_id, "more", args=[signal])
        result = handle.result(timeout=120)
    assert result == {"arg": hashlib.sha256(text.encode()).hexdigest(), "grown": text + "!",
                      "signal": hashlib.sha256(signal.encode()).hexdigest()}

    # The server kept references, not the bytes: its raw history is small and names our objects.
    run_id = client.describe_workflow(handle.workflow_id).run_id or ""
    raw = Client(dev_server_session.url)
    try:
        events = list(raw.iter_history(handle.workflow_id, run_id))
    finally:
        raw.close()
    dumped = json.dumps(events)
    assert len(dumped) < 200 * 1024, len(dumped)
    uris = {ref["uri"] for ref in _references(events)}
    assert len(uris) >= 5, uris  # argument, activity args + result, update args + result, signal, result
    assert all(uri.startswith("file://") and Path(uri[len("file://"):]).is_file() for uri in uris)
    # every workflow task after the first replays the 2 MiB start argument: fetched each time
    started = [e for e in events if e.get("event_type") == "WorkflowStarted"]
    start_uri = _references(started)[0]["uri"]
    reads = storage.gets.count(start_uri)
    assert reads >= (3 if sticky == 0 else 1), (reads, sticky)

    # Cold replay of the finished history (resolved by the storage client) reaches the same result.
    from sync_worker.workflow import replay

    history = [e for e in client.iter_history(handle.workflow_id, run_id) if e.get("event_type") != "WorkflowCompleted"]
    wire = replay(Big, history, [text], workflow_id=handle.workflow_id, run_id=run_id).commands[-1].to_wire("q")
    from sync_worker import payloads

    assert payloads.decode_envelope(wire["result"]) == result


def test_a_client_without_the_driver_is_refused_with_a_typed_error(client: Client, dev_server_session: Any) -> None:
    queue = unique_queue("ext-nodriver")
    worker = make_worker(client, task_queue=queue, workflows=[Big], activities=[grow], poll_timeout=2.0)
    handle = client.start_workflow("e2e.ext.big", _text("xyz", 200 * 1024), task_queue=queue)
    with RunningWorker(worker):
        client.signal_workflow(handle.workflow_id, "more", args=["small"])
        handle.result(timeout=60)
    plain = Client(dev_server_session.url)
    try:
        with pytest.raises(ExternalPayloadUnsupported) as caught:
            plain.get_workflow_handle(handle.workflow_id).result(timeout=10)
        assert caught.value.reason == "external_payload_unsupported"
    finally:
        plain.close()


def _references(node: Any) -> List[Any]:
    found: List[Any] = []
    if isinstance(node, dict):
        if isinstance(node.get("external_storage"), dict):
            found.append(node["external_storage"])
        for value in node.values():
            found.extend(_references(value))
    elif isinstance(node, list):
        for value in node:
            found.extend(_references(value))
    return found


def test_the_example_keeps_the_history_small() -> None:
    import importlib.util

    path = Path(__file__).resolve().parents[2] / "examples" / "external_storage.py"
    spec = importlib.util.spec_from_file_location("external_storage_example", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    summary = module.main(["--size", str(2 * MIB)])
    assert summary["report_ok"] and summary["history_json_bytes"] < 64 * 1024, summary


def test_the_dev_server_refuses_a_malformed_reference(dev_server_session: Any) -> None:
    import requests

    bad = {"codec": "avro", "external_storage": {"schema": "durable-workflow.v2.external-payload-reference.v1",
                                                 "uri": "file:///x", "sha256": "nothex", "size_bytes": 1,
                                                 "codec": "avro"}}
    answer = requests.post(f"{dev_server_session.url}/api/workflows", timeout=10, json={
        "workflow_type": "e2e.ext.big", "task_queue": "nowhere", "input": bad},
        headers={"X-Durable-Workflow-Control-Plane-Version": "2"})
    assert answer.status_code == 422, answer.text
    assert answer.json()["reason"] == "validation_failed" and "input.external_storage" in answer.text
    for shape, words in (({"external_storage": bad["external_storage"]}, "codec is required"),
                         ({**bad, "extra": 1}, "unexpected keys")):
        refused = requests.post(f"{dev_server_session.url}/api/workflows", timeout=10, json={
            "workflow_type": "e2e.ext.big", "task_queue": "nowhere", "input": shape},
            headers={"X-Durable-Workflow-Control-Plane-Version": "2"})
        assert refused.status_code == 422 and words in refused.text, refused.text


def test_recorded_histories_with_references_replay_offline_and_from_the_cli(
    client: Client, dev_server_session: Any, storage: CountingStorage, tmp_path: Path,
) -> None:
    import subprocess
    import sys

    from sync_worker import Replayer

    queue = unique_queue("ext-replay")
    worker = make_worker(client, task_queue=queue, workflows=[Big], activities=[grow], poll_timeout=2.0)
    text = _text("replay me ", 300 * 1024)
    handle = client.start_workflow("e2e.ext.big", text, task_queue=queue)
    with RunningWorker(worker):
        client.signal_workflow(handle.workflow_id, "more", args=["go"])
        handle.result(timeout=60)
    run_id = client.describe_workflow(handle.workflow_id).run_id or ""
    raw = Client(dev_server_session.url)
    try:
        events = list(raw.iter_history(handle.workflow_id, run_id))  # as recorded: references
    finally:
        raw.close()
    assert _references(events)
    path = tmp_path / "history.json"
    path.write_text(json.dumps({"events": events}), encoding="utf-8")

    without = Replayer(workflows=[Big]).check({"events": events})
    assert without.status == "failed" and isinstance(without.error, ExternalPayloadUnsupported), without.message
    with_driver = Replayer(workflows=[Big], external_storage=LocalFilesystemExternalStorage(storage.root))
    assert with_driver.check({"events": events}).status == "replayed"

    def cli(*extra: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "sync_worker", "replay", "tests.e2e.test_external_storage:Big",
                               "-f", str(path), *extra], cwd=Path(__file__).resolve().parents[2],
                              capture_output=True, text=True, timeout=120)

    refused = cli()
    assert refused.returncode == 1 and "external_payload_unsupported" in refused.stdout, refused.stdout
    done = cli("--external-storage", storage.root.as_uri())
    assert done.returncode == 0, done.stdout + done.stderr


def test_a_missing_or_tampered_object_is_refused_typed_and_the_run_recovers(
    client: Client, dev_server_session: Any, storage: CountingStorage,
) -> None:
    from sync_worker.external_storage import ExternalPayloadReference

    queue = unique_queue("ext-missing")
    text = _text("lost and found ", 200 * 1024)
    handle = client.start_workflow("e2e.ext.big", text, task_queue=queue)  # stored before any worker runs
    raw = Client(dev_server_session.url)  # no driver: the server's records as kept (what an operator sees)
    run_id = client.describe_workflow(handle.workflow_id).run_id or ""
    started = [e for e in raw.iter_history(handle.workflow_id, run_id) if e.get("event_type") == "WorkflowStarted"]
    ref = ExternalPayloadReference.from_dict(_references(started)[0])

    def task_failure() -> str:
        failure = raw.request("GET", f"/workflows/{handle.workflow_id}").get("last_task_failure") or {}
        return str(failure.get("message") or "")

    path = Path(ref.uri[len("file://"):])
    original = path.read_bytes()
    path.unlink()
    client.external_storage_cache.clear()  # the starting client cached what it wrote
    worker = make_worker(client, task_queue=queue, workflows=[Big], activities=[grow], poll_timeout=2.0,
                         external_storage_cache=ExternalPayloadCache())
    try:
        with RunningWorker(worker):
            failure = wait_for(lambda: "external_payload_not_found" in task_failure() and task_failure(), timeout=30)
            assert ref.uri in failure, failure
            # the client reading the run's input refuses the same way
            with pytest.raises(errors.ExternalPayloadNotFound):
                client.describe_workflow(handle.workflow_id)
            path.write_bytes(original[:-1] + (b"A" if original[-1:] != b"A" else b"B"))  # same size, tampered
            wait_for(lambda: "external_payload_integrity_mismatch" in task_failure(), timeout=30)
            path.write_bytes(original)  # restored: the next task attempt reads it and the run goes on
            client.signal_workflow(handle.workflow_id, "more", args=["go"])
            result = handle.result(timeout=60)
    finally:
        raw.close()
    assert result["arg"] == hashlib.sha256(text.encode()).hexdigest() and result["grown"] == text + "!"


@workflow.defn(name="e2e.ext.collect")
class Collect:
    def __init__(self) -> None:
        self.seen: List[str] = []

    @workflow.signal("item")
    def item(self, text: str) -> None:
        self.seen.append(hashlib.sha256(text.encode()).hexdigest())

    @workflow.update("peek")
    def peek(self, text: str) -> int:
        self.seen.append(hashlib.sha256(text.encode()).hexdigest())
        return len(text)

    def run(self, ctx: Any, expected: int) -> Any:
        yield ctx.wait_condition(lambda: len(self.seen) >= expected)
        return list(self.seen)


def test_large_signals_and_updates_racing_a_running_workflow(client: Client, storage: CountingStorage) -> None:
    import random
    import threading

    queue = unique_queue("ext-race")
    rng = random.Random()
    seed = rng.randrange(1 << 30)
    rng.seed(seed)
    signals = [_text(f"signal-{i}-", 150 * 1024 + rng.randrange(4096)) for i in range(6)]
    updates = [_text(f"update-{i}-", 150 * 1024 + rng.randrange(4096)) for i in range(3)]
    worker = make_worker(client, task_queue=queue, workflows=[Collect], activities=[], poll_timeout=2.0,
                         sticky_cache_capacity=rng.choice([0, 8]))
    handle = client.start_workflow("e2e.ext.collect", len(signals) + len(updates), task_queue=queue)
    errors_seen: List[BaseException] = []
    answers: List[int] = []

    def send(kind: str, text: str, delay: float) -> None:
        try:
            time.sleep(delay)
            if kind == "signal":
                client.signal_workflow(handle.workflow_id, "item", args=[text])
            else:
                answers.append(client.update_workflow(handle.workflow_id, "peek", args=[text],
                                                      wait_for="completed")["result"])
        except BaseException as error:  # reported below with the seed
            errors_seen.append(error)

    with RunningWorker(worker):
        threads = [threading.Thread(target=send, args=("signal", text, rng.uniform(0, 0.3))) for text in signals]
        threads += [threading.Thread(target=send, args=("update", text, rng.uniform(0, 0.3))) for text in updates]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(60)
        result = handle.result(timeout=60)
    assert not errors_seen, (seed, errors_seen)
    expected = {hashlib.sha256(text.encode()).hexdigest() for text in signals + updates}
    assert sorted(result) == sorted(expected), seed
    assert sorted(answers) == sorted(len(text) for text in updates), seed
