"""``examples/operator_console.py`` runs end to end (a real process: dev server, worker, CLI processes)."""

from __future__ import annotations

import os
import subprocess
import sys

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_operator_console_example() -> None:
    done = subprocess.run([sys.executable, os.path.join(REPO, "examples", "operator_console.py")], cwd=REPO,
                          capture_output=True, text=True, timeout=180, env=dict(os.environ, PYTHONPATH=REPO))
    assert done.returncode == 0, done.stdout + done.stderr
    out = done.stdout
    assert "result -> {'title': 'printer on fire', 'notes': ['unplugged it']}" in out
    assert "schedule -> active triggered" in out
    assert "activity failed -> PermissionError | 50000 cents needs a manager" in out
    assert "$ sync-worker workflow list --type console.ticket   (exit 0)" in out
    assert "$ sync-worker workflow describe no-such-ticket   (exit 5)" in out
    assert "nightly-ticket  console.ticket  active  skip" in out
