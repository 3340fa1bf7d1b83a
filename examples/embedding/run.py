"""Serve the shop with gunicorn or uWSGI and run checkouts in the web processes, end to end.

    python examples/embedding/run.py gunicorn      # or: uwsgi

Starts an embedded dev server, the web server from this folder's config (port 0: any free
port), waits for /readyz, starts three checkout workflows, prints which web process ran each
activity, then sends SIGTERM and prints the exit code (0: drained and deregistered).
"""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

from sync_worker import Client
from sync_worker.devserver import DevServer

HERE = Path(__file__).resolve().parent


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def main(kind: str) -> int:
    with DevServer(port=0) as server:
        port = free_port()
        env = dict(os.environ, DURABLE_WORKFLOW_SERVER_URL=server.url, PYTHONPATH=os.pathsep.join(
            [str(HERE), *filter(None, [os.environ.get("PYTHONPATH")])]))
        if kind == "gunicorn":
            argv = [sys.executable, "-m", "gunicorn", "-c", "gunicorn.conf.py", "-b", f"127.0.0.1:{port}",
                    "shop:application"]
        else:
            uwsgi = Path(sys.executable).parent / "uwsgi"
            argv = [str(uwsgi if uwsgi.exists() else "uwsgi"), "--ini", "uwsgi.ini", "--http-socket",
                    f"127.0.0.1:{port}"]
        web = subprocess.Popen(argv, cwd=HERE, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            deadline = time.monotonic() + 60
            while True:
                try:
                    with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=5) as response:
                        if response.status == 200:
                            break
                except OSError:
                    pass
                if time.monotonic() > deadline or web.poll() is not None:
                    print(f"{kind} did not become ready")
                    return 1
                time.sleep(0.2)
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=5) as response:
                print(response.read().decode().strip())
            client = Client(server.url)
            handles = [client.start_workflow("shop.checkout", order, task_queue="shop") for order in (1, 2, 3)]
            for handle in handles:
                print("checkout", handle.result(timeout=60))
            web.send_signal(signal.SIGTERM)
            code = web.wait(60)
            active = [w for w in client.list_workers(task_queue="shop").workers if w.status == "active"]
            print(f"{kind} exited {code}; active registrations left: {len(active)}")
            return 0 if code == 0 and not active else 1
        finally:
            if web.poll() is None:
                web.kill()
                web.wait()


if __name__ == "__main__":
    chosen = sys.argv[1] if len(sys.argv) > 1 else "gunicorn"
    if not re.fullmatch(r"gunicorn|uwsgi", chosen):
        raise SystemExit("usage: run.py gunicorn|uwsgi")
    sys.exit(main(chosen))
