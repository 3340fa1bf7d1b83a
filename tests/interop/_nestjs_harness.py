"""Real processes for the nestjs-durable interop tests and the bench.

* :class:`Engine` -- ``node tests/interop/nestjs/engine.mjs``: the npm engine (core 0.62.0 with
  transport-bullmq 0.19.0 or transport-db 0.2.0), driven by JSON lines.
* :class:`StepWorkerProcess` -- our ``sync-worker nestjs`` command (threads or gevent), or the
  published asyncio ``durable-worker`` 0.26.1 from its own venv (the control).

Everything needed is prepared by ``scripts/prepare.d/40-nestjs.sh``; :func:`missing` names what is
absent so a test can skip with a reason.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence

import pytest

ROOT = Path(__file__).resolve().parents[2]
ENGINE_DIR = Path(__file__).resolve().parent / "nestjs"
CONTROL_SCRIPT = Path(__file__).resolve().parent / "_nestjs_control.py"
CONTROL_PYTHON_ENV = "SYNC_WORKER_NESTJS_CONTROL_PYTHON"


def redis_url() -> Optional[str]:
    return os.environ.get("SYNC_WORKER_TEST_REDIS_URL")


def pg_admin_dsn() -> Optional[str]:
    return os.environ.get("SYNC_WORKER_TEST_PG_DSN")


def mysql_url() -> Optional[str]:
    return os.environ.get("SYNC_WORKER_TEST_MYSQL_URL")


def control_python() -> Optional[str]:
    path = os.environ.get(CONTROL_PYTHON_ENV)
    return path if path and os.path.exists(path) else None


def moto_available() -> bool:
    try:
        import boto3  # noqa: F401
        import moto.server  # noqa: F401
    except ImportError:
        return False
    return True


class MotoServer:
    """A local SQS: ``moto_server`` (PyPI ``moto[server]``) on a free loopback port."""

    def __init__(self, log_dir: Path) -> None:
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            self.port = probe.getsockname()[1]
        self.endpoint = f"http://127.0.0.1:{self.port}"
        with open(log_dir / "moto.log", "w", encoding="utf-8") as log:
            self.proc = subprocess.Popen([sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(self.port)],
                                         stdout=log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 90  # its imports take long on a busy machine
        while time.monotonic() < deadline:
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.5):
                    return
            except OSError:
                time.sleep(0.1)
        raise RuntimeError("moto_server did not start")

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(5)


#: What boto3 and the engine's AWS SDK need to talk to moto (fake credentials, a region).
AWS_ENV = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing", "AWS_DEFAULT_REGION": "us-east-1",
           "AWS_REGION": "us-east-1"}


def missing(transport: str, *, control: bool = False) -> Optional[str]:
    """Why the interop tests for ``transport`` cannot run here, or None."""
    if shutil.which("node") is None:
        return "node is not installed (scripts/prepare.d/40-nestjs.sh needs nodejs + npm)"
    if not (ENGINE_DIR / "node_modules" / "@dudousxd" / "nestjs-durable-core").is_dir():
        return "the npm engine is not installed: run scripts/prepare (npm ci in tests/interop/nestjs)"
    if transport == "redis" and not redis_url():
        return "no Redis: SYNC_WORKER_TEST_REDIS_URL is unset (scripts/services.sh starts one)"
    if transport == "sqs" and not moto_available():
        return "no local SQS: boto3 and moto[server] are not installed (the dev extra has them)"
    if transport == "postgresql" and not pg_admin_dsn():
        return "no PostgreSQL: SYNC_WORKER_TEST_PG_DSN is unset (scripts/services.sh starts one)"
    if transport == "mysql" and not mysql_url():
        return ("no MariaDB: SYNC_WORKER_TEST_MYSQL_URL is unset (scripts/prepare.d/41-mariadb.sh installs it, "
                "scripts/services.sh starts it)")
    if transport == "mysql" and not (ENGINE_DIR / "node_modules" / "mysql2").is_dir():
        return "the engine's mysql2 driver is not installed: run scripts/prepare (npm ci in tests/interop/nestjs)"
    if control and control_python() is None:
        return f"the published durable-worker venv is missing ({CONTROL_PYTHON_ENV}; scripts/prepare makes it)"
    return None


def pg_database(name: str) -> str:
    """A DSN for our own database ``name`` on the shared server (created when absent)."""
    import psycopg

    admin = pg_admin_dsn()
    assert admin is not None
    with psycopg.connect(admin, autocommit=True) as conn:
        if conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,)).fetchone() is None:
            conn.execute(f'CREATE DATABASE "{name}"')
    return admin.rsplit("/", 1)[0] + "/" + name


def drop_pg_tables(dsn: str, prefix: str) -> None:
    import psycopg

    with psycopg.connect(dsn, autocommit=True) as conn:
        for table in (f"{prefix}_transport_tasks", f"{prefix}_transport_results"):
            conn.execute(f"DROP TABLE IF EXISTS {table}")


def create_pg_tables(dsn: str, prefix: str) -> None:
    """The engine's DbTransport schema (as our PostgresTransport creates it)."""
    import psycopg

    from sync_worker.nestjs.pg_transport import PostgresTransport

    with psycopg.connect(dsn, autocommit=True) as conn:
        PostgresTransport(dsn, prefix=prefix)._prepare(conn)


def _mysql(url: str) -> Any:
    import pymysql

    from sync_worker.nestjs.mysql_transport import connect_args

    return pymysql.connect(**connect_args(url), autocommit=True)


def drop_mysql_tables(url: str, prefix: str) -> None:
    conn = _mysql(url)
    try:
        with conn.cursor() as cur:
            for table in (f"{prefix}_transport_tasks", f"{prefix}_transport_results"):
                cur.execute(f"DROP TABLE IF EXISTS `{table}`")
    finally:
        conn.close()


def create_mysql_tables(url: str, prefix: str) -> None:
    """The engine's DbTransport schema in its MySQL dialect (as our MysqlTransport creates it)."""
    from sync_worker.nestjs.mysql_transport import MysqlTransport

    conn = _mysql(url)
    try:
        MysqlTransport(url, prefix=prefix)._prepare(conn)
    finally:
        conn.close()


def flush_redis_prefix(url: str, prefix: str) -> None:
    import redis

    client = redis.Redis.from_url(url)
    try:
        for pattern in (f"bull:{prefix}-*", f"{prefix}-*"):
            keys = list(client.scan_iter(match=pattern, count=500))
            for i in range(0, len(keys), 500):
                client.delete(*keys[i:i + 500])
    finally:
        client.close()


class Engine:
    """The real nestjs-durable engine in a node process."""

    def __init__(self, transport: str, prefix: str, *, url: str) -> None:
        kind = {"redis": "redis", "postgresql": "pg", "mysql": "mysql", "sqs": "sqs"}[transport]
        env = dict(os.environ, **AWS_ENV, ENGINE_TRANSPORT=kind, ENGINE_PREFIX=prefix)
        env[{"redis": "ENGINE_REDIS_URL", "pg": "ENGINE_PG_DSN", "mysql": "ENGINE_MYSQL_URL",
             "sqs": "ENGINE_SQS_ENDPOINT"}[kind]] = url
        #: SQS queue names cannot hold dots: the SQS workers serve ``payments-charge-card``...
        self.dashed = transport == "sqs"
        self.stderr: List[str] = []
        self.proc = subprocess.Popen(["node", str(ENGINE_DIR / "engine.mjs")], cwd=str(ENGINE_DIR), env=env,
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     text=True, bufsize=1)
        threading.Thread(target=self._drain_stderr, daemon=True).start()
        ready = self._read(timeout=60)
        if not ready.get("ready"):
            raise RuntimeError(f"engine did not start: {ready} {''.join(self.stderr)[-2000:]}")

    def _drain_stderr(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.stderr.append(line)

    def _read(self, timeout: float) -> Dict[str, Any]:
        assert self.proc.stdout is not None
        box: List[str] = []
        reader = threading.Thread(target=lambda: box.append(self.proc.stdout.readline()), daemon=True)  # type: ignore[union-attr]
        reader.start()
        reader.join(timeout)
        if not box or not box[0]:
            raise RuntimeError(f"engine gave no answer within {timeout}s; stderr: {''.join(self.stderr)[-2000:]}")
        answer: Dict[str, Any] = json.loads(box[0])
        return answer

    def call(self, op: str, timeout: float = 120.0, **fields: Any) -> Dict[str, Any]:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps({"op": op, **fields}) + "\n")
        self.proc.stdin.flush()
        answer = self._read(timeout)
        if isinstance(answer.get("error"), str):  # the op failed (a run's own error is an object)
            raise RuntimeError(f"engine {op} failed: {answer['error']}")
        return answer

    def step_name(self, name: str) -> str:
        return name.replace(".", "-") if self.dashed else name

    def run(self, run_id: str, step: str, step_input: Dict[str, Any], *, retries: int = 1, backoff: int = 100,
            timeout: float = 30.0) -> Dict[str, Any]:
        self.call("start", runId=run_id, step=self.step_name(step), input=step_input, retries=retries, backoff=backoff)
        return self.call("wait", runId=run_id, timeoutMs=int(timeout * 1000), timeout=timeout + 10)

    def close(self) -> None:
        if self.proc.poll() is None:
            try:
                self.call("close", timeout=15)
            except (RuntimeError, OSError, ValueError):
                pass
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(5)


class StepWorkerProcess:
    """A step worker in its own process: ``kind`` is ``threads``, ``gevent`` or ``control``."""

    def __init__(self, kind: str, transport_url: str, prefix: str, *, lease: float, log_dir: Path,
                 concurrency: str = "4", extra: Sequence[str] = (), workflows: bool = False) -> None:
        self.kind = kind
        #: Ours also serves the interop workflows (the control always does over Redis).
        self.workflows = workflows
        self.transport_url = transport_url
        self.prefix = prefix
        self.lease = lease
        self.concurrency = concurrency
        self.extra = list(extra)
        self.log_dir = log_dir
        self.proc: Optional[subprocess.Popen[str]] = None
        self.starts = 0

    def command(self) -> List[str]:
        sqs = self.transport_url.startswith("http")  # a moto endpoint
        if self.kind == "control":
            python = control_python()
            assert python is not None
            concurrency = self.concurrency if self.concurrency.isdigit() else "4"
            url = f"sqs+{self.transport_url}" if sqs else self.transport_url
            return [python, str(CONTROL_SCRIPT), url, self.prefix, str(self.lease), concurrency]
        target = "tests.interop._nestjs_app:" + ("sqs_worker" if sqs else "worker")
        targets = [target, "tests.interop._nestjs_app:workflows"] if self.workflows else [target]
        url = f"sqs://us-east-1?endpoint={self.transport_url}" if sqs else self.transport_url
        cmd = [sys.executable, "-m", "sync_worker", "nestjs", *targets,
               "--transport", url, "--prefix", self.prefix, "-P", self.kind,
               "-c", self.concurrency, "--lock-duration", str(self.lease), "--shutdown-timeout", "10", *self.extra]
        if self.transport_url.startswith("redis"):
            cmd += ["--stalled-interval", str(max(0.5, self.lease / 2))]
        return cmd

    @property
    def log_path(self) -> Path:
        return self.log_dir / f"{self.kind}-{self.prefix}-{self.starts}.log"

    def start(self, timeout: float = 60.0) -> StepWorkerProcess:
        self.starts += 1
        env = dict(os.environ, **AWS_ENV)
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH", "")]))
        env["PYTHONUNBUFFERED"] = "1"
        env.pop("SYNC_WORKER_POOL", None)
        with open(self.log_path, "w", encoding="utf-8") as log:
            self.proc = subprocess.Popen(self.command(), cwd=str(ROOT), env=env, stdout=log,
                                         stderr=subprocess.STDOUT, text=True)
        ready = "control ready" if self.kind == "control" else "serving"
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if ready in self.log():
                time.sleep(0.3)  # the published worker subscribes its queues right after saying so
                return self
            if self.proc.poll() is not None:
                break
            time.sleep(0.05)
        raise RuntimeError(f"{self.kind} worker did not start:\n{self.log()[-3000:]}")

    def log(self) -> str:
        try:
            return self.log_path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            return ""

    def kill(self) -> None:
        """SIGKILL: the process dies holding whatever it runs (no cleanup at all)."""
        assert self.proc is not None
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(10)

    def stop(self, timeout: float = 20.0) -> Optional[int]:
        if self.proc is None or self.proc.poll() is not None:
            return None if self.proc is None else self.proc.returncode
        self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(5)
            return None


def wait_for_file(path: Path, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if path.exists():
            return True
        time.sleep(0.05)
    return False


def record(result: Dict[str, Any]) -> Dict[str, Any]:
    """What the engine recorded for a one-step run, minus timestamps and the worker's stack text."""
    checkpoint = dict(result["checkpoints"][0]) if result.get("checkpoints") else {}
    error = dict(checkpoint.get("error") or {})
    error.pop("stack", None)
    return {
        "run_status": result.get("status"),
        "step_status": checkpoint.get("status"),
        "attempts": checkpoint.get("attempts"),
        "output": checkpoint.get("output"),
        "error": error or None,
        "run_error": (result.get("error") or {}).get("message"),
    }


class Fleet:
    """One engine and one worker process per worker kind, each on its own prefix, started lazily."""

    def __init__(self, transport: str, url: str, base_dir: Path, *, lease: float = 2.0, workflows: bool = False,
                 tag: str = "") -> None:
        self.transport = transport
        self.url = url
        self.base_dir = base_dir
        self.lease = lease
        self.workflows = workflows
        self.tag = tag
        self.members: Dict[str, Any] = {}
        self.records: Dict[Any, Dict[str, Any]] = {}

    def prefix(self, kind: str) -> str:
        tag = f"{self.tag}{kind[:3]}{os.getpid()}"
        return f"swnj_{tag}" if self.transport in ("postgresql", "mysql") else f"swnj-{tag}"

    def get(self, kind: str) -> Any:
        if kind not in self.members:
            prefix = self.prefix(kind)
            if self.transport == "postgresql":
                drop_pg_tables(self.url, prefix)
                if kind == "control":
                    create_pg_tables(self.url, prefix)
            elif self.transport == "mysql":
                drop_mysql_tables(self.url, prefix)
                if kind == "control":
                    create_mysql_tables(self.url, prefix)
            elif self.transport == "redis":
                flush_redis_prefix(self.url, prefix)
            log_dir = self.base_dir / "logs"
            log_dir.mkdir(parents=True, exist_ok=True)
            worker = StepWorkerProcess(kind, self.url, prefix, lease=self.lease, log_dir=log_dir,
                                       workflows=self.workflows).start()
            engine = Engine(self.transport, prefix, url=self.url)
            if self.workflows:
                from ._nestjs_workflows import GROUP, NAMES

                for name in NAMES:
                    engine.call("remote", workflow=name, group=GROUP)
                engine.call("serveTsSteps")
            self.members[kind] = (engine, worker)
        return self.members[kind]

    def member(self, kind: str) -> Any:
        """``get``, skipping (with the reason) when the published control is not installed."""
        if kind == "control":
            reason = missing(self.transport, control=True)
            if reason:
                pytest.skip(reason)
        return self.get(kind)

    def assert_matches_control(self, scenarios: Any) -> None:
        """What the engine recorded for our workers equals what it recorded for the control."""
        control = {s: self.records.get(("control", s)) for s in scenarios}
        if not all(control.values()):
            reason = missing(self.transport, control=True)
            if reason:  # the control is not installed here: its scenarios skipped with this reason
                pytest.skip(reason)
            pytest.fail("the control (the published durable-worker) did not record every scenario, so there is "
                        "nothing to compare with: " + ", ".join(s for s, r in control.items() if not r)
                        + " (failed above, or left out of a focused run: the comparison needs every control scenario)")
        differences = []
        for kind in ("threads", "gevent"):
            for scenario in scenarios:
                ours = self.records.get((kind, scenario))
                if ours != control[scenario]:
                    differences.append(f"{kind}/{scenario}: ours={ours} control={control[scenario]}")
        assert not differences, "\n".join(differences)

    def workdir(self, kind: str, scenario: str) -> Path:
        path = self.base_dir / kind / scenario
        path.mkdir(parents=True, exist_ok=True)
        return path

    def close(self) -> None:
        for engine, worker in self.members.values():
            worker.stop()
            engine.close()
        for kind in self.members:
            if self.transport == "postgresql":
                drop_pg_tables(self.url, self.prefix(kind))
            elif self.transport == "mysql":
                drop_mysql_tables(self.url, self.prefix(kind))
            elif self.transport == "redis":
                flush_redis_prefix(self.url, self.prefix(kind))
