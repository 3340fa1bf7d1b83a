"""The Django project's DB-restart test, against a PostgreSQL instance of its own.

A private cluster (``initdb`` into a temporary directory, a free port, fsync off) is started
for this test alone and restarted by it mid-run, so the shared server other suites use is
never touched.
"""

from __future__ import annotations

import glob
import os
import shutil
import socket
import subprocess
import tempfile
from typing import Iterator, Tuple

import pytest

from tests._sdk_missing import DJANGO_TASKS_MISSING, DJANGO_TASKS_UNAVAILABLE
from tests.integrations.test_django_project import run_project_suite

if DJANGO_TASKS_UNAVAILABLE:
    pytest.skip(DJANGO_TASKS_MISSING, allow_module_level=True)
pytest.importorskip("django", reason="Django is not installed: pip install -e '.[dev]' installs it")
pytest.importorskip("psycopg", reason="psycopg 3 is not installed: pip install -e '.[dev]' installs it")


def _pg_bin() -> str:
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin"), key=lambda p: [int(x) for x in p.split("/")[4].split(".")])
    if not found:
        pytest.skip("PostgreSQL server binaries are not installed (scripts/services.sh installs them as root)")
    return found[-1]


def _as_postgres(command: str) -> None:
    if os.geteuid() == 0:
        subprocess.run(["su", "postgres", "-s", "/bin/sh", "-c", command], check=True, timeout=120)
    else:
        subprocess.run(["sh", "-c", command], check=True, timeout=120)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture
def private_postgres() -> Iterator[Tuple[str, str, int]]:
    bin_dir = _pg_bin()
    root = tempfile.mkdtemp(prefix="sw-django-pg-")
    data = os.path.join(root, "data")
    os.makedirs(data)
    if os.geteuid() == 0:
        shutil.chown(root, "postgres")
        shutil.chown(data, "postgres")
    port = _free_port()
    _as_postgres(f"'{bin_dir}/initdb' -D '{data}' -U postgres --auth=trust -E UTF8 >'{root}/initdb.log' 2>&1")
    options = f"-c listen_addresses=127.0.0.1 -p {port} -c unix_socket_directories='{root}' -c fsync=off"
    _as_postgres(f"'{bin_dir}/pg_ctl' -D '{data}' -l '{root}/pg.log' -w -t 60 -o \"{options}\" start >/dev/null")
    try:
        yield data, bin_dir, port
    finally:
        try:
            _as_postgres(f"'{bin_dir}/pg_ctl' -D '{data}' -m immediate -w stop >/dev/null 2>&1")
        finally:
            shutil.rmtree(root, ignore_errors=True)


def test_database_restart_mid_run(private_postgres: Tuple[str, str, int]) -> None:
    data, bin_dir, port = private_postgres
    run_project_suite("postgres", f"restart{os.getpid()}", ["restarttests"], timeout=400,
                      SYNC_WORKER_TEST_PG_DSN=f"postgresql://postgres@127.0.0.1:{port}/postgres",
                      SW_DJANGO_PRIVATE_PG_DATA=data, SW_DJANGO_PRIVATE_PG_BIN=bin_dir)
