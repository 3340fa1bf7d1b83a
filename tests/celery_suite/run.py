"""Run Celery's integration suite (``test_canvas.py``, ``test_tasks.py``) through ``sync_worker_celery``.

    python3 tests/celery_suite/run.py                 # stage, run, check (the CI leg)
    python3 tests/celery_suite/run.py -k chord -x     # more arguments go to pytest

Stages the suite from Celery's sdist (``stage.py``), runs it with our conftest (dev server, a
``sync-worker celery`` worker, a private Redis as the tasks' side channel) and checks the outcome
against ``celery_passed.txt`` -- the tests real Celery 5.6 with Redis passes on this machine,
recorded by ``bench/celery_suite.py --side celery``:

* at least ``THRESHOLD`` of Celery's passes pass here -- until that is reached, at least ``FLOOR``
  of them (a ratchet; issue 32);
* every test that fails here either failed on a refusal naming the feature
  (``UnsupportedFeature``) or is listed, with its reason, in docs/celery.md's table
  "Celery's integration suite: what does not pass".

Exits non-zero when either check fails (a focused run with pytest arguments only reports).
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Dict, List, Optional, Set, Tuple

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
THRESHOLD = 0.90
#: The CI leg's ratchet until THRESHOLD is reached (issue 32): at least this many of real Celery's
#: passes must pass here. Measured 2026-12-02 (scripts/suites.d/65-celery-suite.sh, 3 processes):
#: 184 of 203 in 189 s once canvas stamping was supported (173 before); the floor leaves room (8)
#: for the three 1000-task tests listed as too slow here under load and a few timing-sensitive
#: ones. Raise it as the facade improves; replace it by THRESHOLD once that holds under load.
FLOOR = 176
TEST_FILES = ["t/integration/test_canvas.py", "t/integration/test_tasks.py"]

sys.path.insert(0, str(HERE))
from stage import stage  # noqa: E402


def run_pytest(staged: Path, python: str, junit: Path, extra: List[str], env: Optional[Dict[str, str]] = None,
               plugins: Tuple[str, ...] = (), processes: int = 0) -> int:
    # every test gets a limit (Celery's own unmarked tests have none; one of them hangs on real Celery too).
    # --tb=native: pytest's own traceback style re-parses the test file with ast.parse, and on CPython 3.11
    # that raised "SystemError: AST constructor recursion depth mismatch" while formatting one failure in
    # CI; the SystemError crashed that xdist process and ended the session with every later test unrun.
    # Python's traceback module formats a failure without parsing anything.
    argv = [python, "-m", "pytest", *TEST_FILES, "-p", "no:cacheprovider", "-q", "-rfE", "--show-capture=no",
            "--tb=native",
            "--timeout=300", "--rootdir", str(staged), "--durations=15",
            "-o", "junit_family=xunit2", f"--junitxml={junit}", *[a for p in plugins for a in ("-p", p)], *extra]
    if processes > 1:
        argv[3:3] = ["-n", str(processes), "--dist", "worksteal"]  # an idle process takes tests from a busy one
    proc = subprocess.Popen(argv, cwd=str(staged), env=env)

    def stop(signum: int, frame: object) -> None:  # e.g. the leg's timeout: pytest (and its services) stop too
        proc.terminate()

    previous = signal.signal(signal.SIGTERM, stop)
    try:
        return proc.wait()
    finally:
        signal.signal(signal.SIGTERM, previous)


def processes() -> int:
    """Test processes (``SW_CELERY_SUITE_PROCESSES``, default 3): each has its own dev server, worker and Redis
    (suite_conftest.py), so the suite's waits overlap; 1 runs without pytest-xdist."""
    wanted = int(os.environ.get("SW_CELERY_SUITE_PROCESSES", "3"))
    if wanted > 1:
        try:
            import xdist  # noqa: F401
        except ImportError:
            print("pytest-xdist is not installed (the dev extra has it): running in one process")
            return 1
    return wanted


def outcomes(junit: Path) -> Dict[str, Tuple[str, str]]:
    """``{test id: (outcome, message)}``; outcome is passed, failed, error, skipped."""
    found: Dict[str, Tuple[str, str]] = {}
    for case in ET.parse(junit).getroot().iter("testcase"):
        module = case.get("classname", "").split(".")
        name = case.get("name", "")
        test_id = f"{module[2] if len(module) > 2 else '?'}.py::{'::'.join([*module[3:], name])}"
        outcome, message = "passed", ""
        for child in case:
            if child.tag in ("failure", "error", "skipped"):
                outcome = {"failure": "failed", "error": "error", "skipped": "skipped"}[child.tag]
                message = (child.get("message") or "") + "\n" + (child.text or "")
                break
        if outcome == "passed" or test_id not in found or found[test_id][0] == "passed":
            found.setdefault(test_id, (outcome, message))
            if outcome != "passed":
                found[test_id] = (outcome, message)
    return found


def celery_passes() -> Set[str]:
    path = HERE / "celery_passed.txt"
    if not path.exists():
        raise SystemExit(f"{path} is missing: record it with python3 bench/celery_suite.py --side celery")
    return {line.strip() for line in path.read_text().splitlines() if line.strip() and not line.startswith("#")}


def documented_failures() -> Dict[str, str]:
    """Test ids listed in docs/celery.md's table of tests that do not pass, with their reasons."""
    text = (REPO / "docs" / "celery.md").read_text()
    section = text.partition("### Celery's integration suite: what does not pass")[2]
    listed: Dict[str, str] = {}
    for line in section.splitlines():
        if line.startswith("## "):
            break
        match = re.match(r"\|\s*`([^`]+)`\s*\|\s*(.+?)\s*\|", line)
        if match:
            for test_id in match.group(1).split(", "):
                listed[test_id.strip()] = match.group(2)
    return listed


def _listed(test_id: str, listed: Dict[str, str]) -> bool:
    base = test_id.split("[")[0]
    return test_id in listed or base in listed or any(base.endswith("::" + k) or test_id.endswith("::" + k)
                                                      for k in listed)


def report(results: Dict[str, Tuple[str, str]], strict: bool) -> int:
    passed = {t for t, (o, _) in results.items() if o == "passed"}
    reference = celery_passes()
    both = passed & reference
    print(f"\nsync_worker_celery: {len(passed)} of {len(results)} passed; "
          f"{len(both)} of the {len(reference)} real Celery passes on this machine "
          f"({100.0 * len(both) / max(1, len(reference)):.1f}%, target {THRESHOLD:.0%})")
    listed = documented_failures()
    unexplained = []
    for test_id, (outcome, message) in sorted(results.items()):
        # a failure, or a skip of a test real Celery passes (never a silent skip)
        if outcome in ("failed", "error") or (outcome == "skipped" and test_id in reference):
            refused = "UnsupportedFeature" in message
            if not refused and not _listed(test_id, listed):
                unexplained.append((test_id, message.strip().splitlines()[0][:200] if message.strip() else ""))
    for test_id, first in unexplained:
        print(f"  not refused by name and not listed in docs/celery.md: {test_id}: {first}")
    if not strict:
        return 0
    if len(both) < THRESHOLD * len(reference):
        print(f"  below the {THRESHOLD:.0%} target of issue 32; the leg holds the floor of {FLOOR}")
    ok = len(both) >= min(FLOOR, THRESHOLD * len(reference)) and not unexplained
    return 0 if ok else 1


def main(argv: Optional[List[str]] = None) -> int:
    extra = list(sys.argv[1:] if argv is None else argv)
    work = Path(os.environ.get("SW_CELERY_SUITE_DIR") or tempfile.mkdtemp(prefix="celery-suite-"))
    staged = stage(work, "facade").parents[1]
    junit = work / "junit.xml"
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(staged), env.get("PYTHONPATH")]))
    env.setdefault("SW_CELERY_SUITE_LOGS", str(work / "logs"))
    listed = work / "listed.txt"  # the tests given a tight limit: not those listed as only too slow here
    listed.write_text("\n".join(sorted(k for k, why in documented_failures().items()
                                        if not why.startswith("**too slow here**"))) + "\n")
    env.setdefault("SW_CELERY_SUITE_LISTED", str(listed))
    code = run_pytest(staged, sys.executable, junit, extra, env=env, processes=processes())
    if not junit.exists():
        return code or 1
    return report(outcomes(junit), strict=not extra)


if __name__ == "__main__":
    sys.exit(main())
