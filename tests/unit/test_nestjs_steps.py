"""The pure nestjs-durable step core: task in, wire result out (no broker)."""

from __future__ import annotations

import json
from typing import Any, Dict

import pytest

from sync_worker.errors import InvalidWorkflowDefinition, NonRetryableError
from sync_worker.failure_reports import MESSAGE_BYTES
from sync_worker.nestjs import FatalError, StepContext, StepWorker, current_step
from sync_worker.nestjs.bounds import encode_result
from sync_worker.nestjs.descriptor import build_descriptor, descriptor_hash, routing_token


def task(name: str, data: Any = None, **extra: Any) -> Dict[str, Any]:
    return {"runId": "run-1", "seq": 2, "name": name, "stepId": "run-1:2", "group": name, "input": data,
            "attempt": 1, **extra}


def test_completed_result_has_the_wire_fields() -> None:
    worker = StepWorker()

    @worker.step("payments.charge-card")
    def charge(data: Dict[str, Any]) -> Dict[str, Any]:
        return {"chargeId": f"ch_{data['amount']}"}

    result = worker.process_task(task("payments.charge-card", {"amount": 99}))
    assert isinstance(result.pop("startedAt"), int)
    assert result == {"runId": "run-1", "seq": 2, "stepId": "run-1:2", "status": "completed",
                      "output": {"chargeId": "ch_99"}}


def test_fatal_error_is_not_retryable_and_keeps_code_and_details() -> None:
    worker = StepWorker()

    @worker.step("pay")
    def pay(data: Any) -> None:
        raise FatalError("card declined", code="card_declined", details={"amount": 5})

    error = worker.process_task(task("pay"))["error"]
    assert "FatalError: card declined" in error.pop("stack")
    assert error == {"message": "card declined", "code": "card_declined", "retryable": False, "details": {"amount": 5}}


def test_any_non_retryable_error_is_fatal_and_other_errors_leave_retryable_out() -> None:
    worker = StepWorker()
    worker.register("a", lambda data: (_ for _ in ()).throw(NonRetryableError("nope")))
    worker.register("b", lambda data: 1 / 0)
    assert worker.process_task(task("a"))["error"]["retryable"] is False
    error = worker.process_task(task("b"))["error"]
    assert "retryable" not in error and "code" not in error  # the engine retries when the key is absent
    assert error["message"] == "division by zero"


def test_unknown_step_fails_without_retry() -> None:
    worker = StepWorker()
    worker.register("known", lambda data: None)
    result = worker.process_task(task("other"))
    assert result["status"] == "failed"
    assert result["error"] == {"message": "no handler for other", "retryable": False}


def test_async_handlers_are_refused() -> None:
    worker = StepWorker()
    with pytest.raises(InvalidWorkflowDefinition, match="async function"):
        @worker.step("x")
        async def handler(data: Any) -> None:  # pragma: no cover - never runs
            return None


def test_the_context_carries_identity_trace_and_logs() -> None:
    worker = StepWorker()
    seen: Dict[str, Any] = {}
    beats = []

    @worker.step("ctx")
    def handler(data: Any, ctx: StepContext) -> str:
        seen.update(run_id=ctx.run_id, seq=ctx.seq, step_id=ctx.step_id, attempt=ctx.attempt,
                    traceparent=ctx.traceparent, context=ctx.context, same=current_step() is ctx,
                    cancelled=ctx.cancelled)
        ctx.heartbeat_sync()
        ctx.log("charged", amount=3)
        ctx.warn("slow gateway", {"ms": 900})  # the asyncio SDK's spelling
        return "ok"

    result = worker.process_task(
        task("ctx", attempt=3, traceparent="00-abc-def-01", context={"tenant": "t1"}),
        heartbeat=lambda: beats.append(1), is_cancelled=lambda run_id: run_id == "run-1")
    assert seen == {"run_id": "run-1", "seq": 2, "step_id": "run-1:2", "attempt": 3,
                    "traceparent": "00-abc-def-01", "context": {"tenant": "t1"}, "same": True, "cancelled": True}
    assert beats == [1]
    assert [(e["level"], e["message"], e["data"]) for e in result["events"]] == [
        ("info", "charged", {"amount": 3}), ("warn", "slow gateway", {"ms": 900})]
    with pytest.raises(RuntimeError):
        current_step()


def test_huge_error_messages_are_bounded_like_failure_reports() -> None:
    worker = StepWorker()
    worker.register("big", lambda data: (_ for _ in ()).throw(RuntimeError("x" * (MESSAGE_BYTES * 3))))
    error = worker.process_task(task("big"))["error"]
    assert len(error["message"].encode()) <= MESSAGE_BYTES
    assert "truncated" in error["message"]


def test_an_output_json_cannot_carry_becomes_a_clear_failure() -> None:
    worker = StepWorker()
    worker.register("obj", lambda data: object())
    body = json.loads(encode_result(worker.process_task(task("obj"))))
    assert body["status"] == "failed" and body["stepId"] == "run-1:2"
    assert body["error"]["code"] == "unserializable_output" and body["error"]["retryable"] is False


def test_routing_tokens_and_descriptor() -> None:
    assert routing_token("billing:charge") == "billing-charge"
    assert routing_token("a.b", "eu") == "a.b@eu" and routing_token("a.b", "default") == "a.b"
    descriptor = build_descriptor(instance_id="py-h-1", steps=["b", "a"], sdk_version="0.1.0", started_at_ms=1)
    assert descriptor["steps"] == ["a", "b"] and descriptor["runtime"] == "python"
    same = dict(descriptor, steps=["b", "a", "a"])
    assert descriptor_hash(descriptor) == descriptor_hash(same)  # set-like fields are canonical
    assert descriptor_hash(descriptor) != descriptor_hash(dict(descriptor, startedAt=2))
    assert len(descriptor_hash(descriptor)) == 16


def test_transport_urls_and_names() -> None:
    from sync_worker.nestjs import transport_for_url

    redis_t = transport_for_url("redis://h:1/0", prefix="durable", namespace="eu", partition="p1")
    assert redis_t.kind == "redis" and redis_t.prefix == "durable-eu"
    assert redis_t.tasks_queue(routing_token("a:b", "p1")) == "durable-eu-tasks-a-b@p1"
    assert redis_t.results_queue == "durable-eu-results" and redis_t.control_channel == "durable-eu-control"
    assert redis_t.heartbeat_key("tok", "py-h-1") == "durable-eu-worker-heartbeat:tok:py-h-1"
    assert transport_for_url("redis://h:1/0", namespace="default").prefix == "durable"
    pg = transport_for_url("postgresql://u@h/db", prefix="app")
    assert (pg.kind, pg.tasks_table, pg.results_table) == ("postgresql", "app_transport_tasks", "app_transport_results")
    sqs = transport_for_url("sqs://eu-west-1?endpoint=http://127.0.0.1:4566", lock_duration=90)
    assert (sqs.kind, sqs.region, sqs.lease_seconds) == ("sqs", "eu-west-1", 90)
    assert sqs.endpoint_url == "http://127.0.0.1:4566"
    for bad in ("amqp://h", "nats://h"):
        with pytest.raises(ValueError, match="unsupported nestjs transport"):
            transport_for_url(bad)
    with pytest.raises(ValueError, match="namespace or partition"):
        transport_for_url("postgresql://u@h/db", namespace="eu")
    with pytest.raises(ValueError, match="table prefix"):
        transport_for_url("postgresql://u@h/db", prefix="x; drop table y")


def test_a_worker_needs_steps_and_valid_concurrency() -> None:
    from sync_worker.nestjs import NestjsWorker, transport_for_url

    transport = transport_for_url("redis://h:1/0")
    with pytest.raises(ValueError, match="no steps"):
        NestjsWorker(StepWorker(), transport)
    steps = StepWorker()
    steps.register("x", lambda data: data)
    with pytest.raises(ValueError):
        NestjsWorker(steps, transport, concurrency=0)
    adaptive = NestjsWorker(steps, transport, concurrency={"min": 2, "max": 6}, pool="threads")
    assert adaptive.concurrency == 6 and adaptive.concurrency_config.adaptive
    assert adaptive.heartbeat_status()["concurrency"] == {"mode": "adaptive", "limit": 2, "min": 2, "max": 6}


def test_the_cli_refuses_bad_arguments_with_a_reason() -> None:
    from click.testing import CliRunner

    from sync_worker.cli import main

    runner = CliRunner()
    bad_url = runner.invoke(main, ["nestjs", "tests.interop._nestjs_app:worker", "--transport", "amqp://x"])
    assert bad_url.exit_code == 2 and "unsupported nestjs transport 'amqp'" in bad_url.output
    not_steps = runner.invoke(main, ["nestjs", "sync_worker.nestjs:FatalError", "--transport", "redis://h:1"])
    assert not_steps.exit_code == 2 and "not a sync_worker.nestjs.StepWorker" in not_steps.output
    stalled = runner.invoke(main, ["nestjs", "tests.interop._nestjs_app:worker", "--transport", "postgresql://h/db",
                                   "--stalled-interval", "5"])
    assert stalled.exit_code == 2 and "redis transport only" in stalled.output
    assert "nestjs" in runner.invoke(main, ["--help"]).output


def test_mysql_urls_pick_the_mysql_transport_and_parse() -> None:
    from sync_worker.nestjs.mysql_transport import MysqlTransport, connect_args
    from sync_worker.nestjs.urls import transport_for_url

    transport = transport_for_url("mysql://sw:p%40ss@db.local:3307/engine", prefix="svc", lock_duration=5)
    assert isinstance(transport, MysqlTransport) and transport.kind == "mysql"
    assert transport.tasks_table == "`svc_transport_tasks`" and transport.lease_seconds == 5
    assert connect_args("mariadb://db.local/engine?charset=utf8") == {
        "host": "db.local", "port": 3306, "user": "root", "password": "", "database": "engine", "charset": "utf8"}
    assert connect_args("mysql://sw:p%40ss@db.local:3307/engine")["password"] == "p@ss"
    with pytest.raises(ValueError):
        connect_args("mysql://db.local")  # no database
    with pytest.raises(ValueError):
        transport_for_url("mysql://h/db", partition="eu")
    with pytest.raises(ValueError):
        MysqlTransport("mysql://h/db", prefix="bad-prefix")
