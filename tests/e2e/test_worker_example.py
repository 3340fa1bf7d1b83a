"""The README quickstart example runs end to end (embedded dev server, real sockets)."""

from __future__ import annotations

import os
import subprocess
import sys

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_activities_worker_example_runs() -> None:
    result = subprocess.run(
        [sys.executable, os.path.join(REPO, "examples", "activities_worker.py")],
        cwd=REPO, capture_output=True, text=True, timeout=60,
        env=dict(os.environ, PYTHONPATH=REPO),
    )
    assert result.returncode == 0, result.stdout + result.stderr
    out = result.stdout
    assert "activity result: Hello, standalone world!" in out
    assert "activity result: 3" in out
    assert "workflow result: {'greeting': 'Hello, Ada!', 'words': 2}" in out
    assert "state=running ready=True live=True" in out
    assert out.rstrip().endswith("stopped")
