"""examples/embedding/run.py end to end: the shop under real gunicorn and real uWSGI."""

from __future__ import annotations

import subprocess
import sys

import pytest

from ._servers import ROOT, base_env, uwsgi_binary

pytestmark = [pytest.mark.slow]


@pytest.mark.parametrize("server", ["gunicorn", "uwsgi"])
def test_embedding_example_runs_checkouts_in_the_web_processes(server: str, tmp_path: object) -> None:
    if server == "uwsgi" and uwsgi_binary() is None:
        pytest.skip("uWSGI is a dev dependency (pip install -e '.[dev]')")
    pytest.importorskip("gunicorn", reason="gunicorn is a dev dependency (pip install -e '.[dev]')")
    env = base_env("http://unused.invalid", "unused", ROOT)
    done = subprocess.run([sys.executable, str(ROOT / "examples" / "embedding" / "run.py"), server], env=env,
                          cwd=str(ROOT), capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].startswith("shop page served by ")
    assert sum(line.startswith("checkout {'order_id'") for line in lines) == 3
    assert lines[-1] == f"{server} exited 0; active registrations left: 0"
