"""Real web server processes for the embedding tests: start, find the port, signal, reap.

The server's output goes to a log file (never a pipe that could fill up and block it); the
port is read from the server's own "listening" line; on exit every process left in the
server's process group is killed, so a failed test never leaves a web server behind.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Sequence, Set, Tuple

ROOT = Path(__file__).resolve().parents[3]
HERE = Path(__file__).resolve().parent


def wait_for(predicate: Callable[[], Any], timeout: float, what: str, interval: float = 0.1) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise AssertionError(f"not reached within {timeout:.0f} s: {what}")
        time.sleep(interval)


def children_of(pid: int) -> Set[int]:
    """Live (non-zombie) child processes of ``pid``, from /proc."""
    found: Set[int] = set()
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", encoding="ascii", errors="replace") as handle:
                fields = handle.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid and fields[0] != "Z":
            found.add(int(entry))
    return found


def thread_count(pid: int) -> int:
    with open(f"/proc/{pid}/status", encoding="ascii") as handle:
        for line in handle:
            if line.startswith("Threads:"):
                return int(line.split()[1])
    raise AssertionError(f"no Threads line for {pid}")


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as handle:
            return handle.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


class ServerProcess:
    """One web server (gunicorn or uWSGI master) in its own process group."""

    def __init__(self, argv: Sequence[str], env: Dict[str, str], log_path: Path,
                 listening: str = r"Listening at: http://127\.0\.0\.1:(\d+)") -> None:
        self.argv = list(argv)
        self.env = env
        self.log_path = log_path
        self._listening = re.compile(listening)
        self.proc: Optional[subprocess.Popen[bytes]] = None
        self.port = 0

    def start(self, timeout: float = 60.0) -> ServerProcess:
        log = open(self.log_path, "wb")  # noqa: SIM115 - the child keeps writing after this returns
        self.proc = subprocess.Popen(self.argv, env=self.env, cwd=str(ROOT), stdout=log, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL, start_new_session=True)
        log.close()

        def port() -> Optional[int]:
            assert self.proc is not None
            if self.proc.poll() is not None:
                raise AssertionError(f"server exited with {self.proc.returncode}:\n{self.log()}")
            match = self._listening.search(self.log())
            return int(match.group(1)) if match else None

        self.port = wait_for(port, timeout, "the server's listening line")
        return self

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def log(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except OSError:
            return ""

    def get(self, path: str = "/", timeout: float = 10.0) -> Tuple[int, bytes]:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.port}{path}", timeout=timeout) as response:
                return int(response.status), bytes(response.read())
        except urllib.error.HTTPError as error:
            return int(error.code), bytes(error.read())

    def signal(self, signum: int) -> None:
        os.kill(self.pid, signum)

    def wait(self, timeout: float) -> int:
        assert self.proc is not None
        return int(self.proc.wait(timeout))

    def web_workers(self) -> Set[int]:
        return children_of(self.pid)

    def close(self) -> None:
        if self.proc is None:
            return
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except OSError:
                pass
            self.proc.wait(10)
        else:
            try:  # reap stragglers of an exited master (a web worker it failed to kill)
                os.killpg(self.proc.pid, signal.SIGKILL)
            except OSError:
                pass

    def __enter__(self) -> ServerProcess:
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.close()


def base_env(server_url: str, queue: str, marker_dir: Path, **extra: str) -> Dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SYNC_WORKER_", "DURABLE_WORKFLOW_"))}
    path = [str(ROOT), str(ROOT / "integrations" / "django"), str(ROOT / "integrations" / "celery")]
    if env.get("PYTHONPATH"):
        path.append(env["PYTHONPATH"])
    env.update({
        "PYTHONPATH": os.pathsep.join(path),
        "DURABLE_WORKFLOW_SERVER_URL": server_url,
        "EMBED_TEST_QUEUE": queue,
        "EMBED_TEST_DIR": str(marker_dir),
        "PYTHONUNBUFFERED": "1",
    })
    env.update(extra)
    return env


def gunicorn_argv(worker_class: str, *extra: str, workers: int = 2) -> List[str]:
    argv = [sys.executable, "-m", "gunicorn", "-c", str(HERE / "gunicorn_conf.py"), "-k", worker_class,
            "-w", str(workers)]
    if worker_class == "gthread":
        argv += ["--threads", "4"]
    return [*argv, *extra, "tests.integrations.embed.worker_app:application"]


def marker(marker_dir: Path, name: str) -> Optional[int]:
    """The pid written in a marker file, or None while it does not exist."""
    path = marker_dir / name
    try:
        text = path.read_text().strip()
    except OSError:
        return None
    return int(text) if text else None


def registrations(client: Any, queue: str) -> List[Dict[str, Any]]:
    return list(client.list_workers(task_queue=queue).get("workers") or [])


def active_pids(client: Any, queue: str) -> List[int]:
    return sorted(int((w.get("process_metrics") or {}).get("process_id") or 0)
                  for w in registrations(client, queue) if w.get("status") == "active")


def free_port() -> int:
    """A free loopback port (uWSGI picks a new one on every reload when given port 0)."""
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def uwsgi_binary() -> Optional[str]:
    """The PyPI uWSGI installed beside this Python (the dev extra), else one on PATH."""
    import shutil

    beside = Path(sys.executable).parent / "uwsgi"
    return str(beside) if beside.exists() else shutil.which("uwsgi")


UWSGI_LISTENING = r"bound to TCP address 127\.0\.0\.1:(\d+)"


def uwsgi_argv(binary: str, port: int, *extra: str, processes: int = 2) -> List[str]:
    return [binary, "--master", "--processes", str(processes), "--http-socket", f"127.0.0.1:{port}",
            "--module", "tests.integrations.embed.uwsgi_app", "--die-on-term", "--need-app",
            "--worker-reload-mercy", "15", "--disable-logging", *extra]
