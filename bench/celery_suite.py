"""Celery's own integration suite (``t/integration/test_canvas.py`` + ``test_tasks.py`` of Celery
5.6.3) on real Celery with Redis and through ``sync_worker_celery`` on the dev server, on this machine.

    python3 bench/celery_suite.py                    # both sides, then the comparison
    python3 bench/celery_suite.py --side celery      # real Celery only (rewrites the reference list)
    python3 bench/celery_suite.py --side facade      # ours only (as tests/celery_suite/run.py)

* real Celery: Celery 5.6.3 from PyPI in a venv at ``/tmp/celery-suite-venv`` (created when
  missing, ``--venv`` for another), the suite unchanged with Celery's own conftest (an in-process
  prefork worker, concurrency 1), a private ``redis-server`` on a free port as broker, result
  backend and the tasks' side channel (``TEST_BROKER``/``TEST_BACKEND``/``REDIS_HOST``/``REDIS_PORT``);
  the tests it passes are written to ``tests/celery_suite/celery_passed.txt``;
* ours: ``tests/celery_suite/run.py`` (the import lines pointed at ``sync_worker_celery``, our
  conftest: dev server, a ``sync-worker celery`` worker at concurrency 1, a private Redis as the
  tasks' side channel).

Both sides run with Celery's pytest settings (``python_classes = test_*``, ``xfail_strict``) and
the same plugins (pytest-subtests, pytest-timeout, pytest-rerunfailures). Printed: passed /
failed / skipped per side, and how many of Celery's passes pass through the facade.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Dict, Tuple

ROOT = Path(__file__).resolve().parents[1]
SUITE = ROOT / "tests" / "celery_suite"
sys.path.insert(0, str(SUITE))

from run import outcomes, run_pytest  # noqa: E402
from stage import CELERY_VERSION, stage  # noqa: E402

CELERY_PACKAGES = [f"celery[redis]=={CELERY_VERSION}", "pytest>=8", "pytest-subtests", "pytest-timeout",
                   "pytest-rerunfailures", "pydantic>=2.4"]


def ensure_venv(venv: Path) -> str:
    python = venv / "bin" / "python"
    if not python.exists():
        sys.stderr.write(f"creating {venv} with Celery {CELERY_VERSION}...\n")
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    probe = subprocess.run([str(python), "-c", f"import celery, pytest_subtests, pytest_rerunfailures, pydantic; "
                            f"assert celery.__version__ == {CELERY_VERSION!r}"], capture_output=True)
    if probe.returncode != 0:
        subprocess.run([str(python), "-m", "pip", "install", "-q", "--disable-pip-version-check", *CELERY_PACKAGES],
                       check=True)
    return str(python)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def summary(results: Dict[str, Tuple[str, str]]) -> str:
    counts: Dict[str, int] = {}
    for outcome, _ in results.values():
        counts[outcome] = counts.get(outcome, 0) + 1
    return ", ".join(f"{counts.get(k, 0)} {k}" for k in ("passed", "failed", "error", "skipped"))


def run_celery(venv: Path, work: Path, extra: list) -> Dict[str, Tuple[str, str]]:
    python = ensure_venv(venv)
    staged = stage(work / "celery", "celery").parents[1]
    redis_server = shutil.which("redis-server")
    if redis_server is None:
        raise SystemExit("redis-server is not installed (scripts/services.sh installs it)")
    port = free_port()
    redis = subprocess.Popen([redis_server, "--bind", "127.0.0.1", "--port", str(port), "--save", "",
                              "--appendonly", "no"], stdout=subprocess.DEVNULL, start_new_session=True)
    try:
        time.sleep(0.5)
        env = dict(os.environ, TEST_BROKER=f"redis://127.0.0.1:{port}/0", TEST_BACKEND=f"redis://127.0.0.1:{port}/0",
                   REDIS_HOST="127.0.0.1", REDIS_PORT=str(port), PYTHONPATH=str(staged))
        junit = work / "celery-junit.xml"
        # run_pytest gives every test a 300 s limit: on this machine, real Celery hung for over 8
        # minutes in test_chord::test_disabling_flag_allow_error_cb_on_chord_header (unmarked: no limit)
        run_pytest(staged, python, junit, extra, env=env, plugins=("celery.contrib.pytest",))
        return outcomes(junit)
    finally:
        redis.send_signal(signal.SIGTERM)
        redis.wait(10)


def run_facade(work: Path, extra: list) -> Dict[str, Tuple[str, str]]:
    env = dict(os.environ, SW_CELERY_SUITE_DIR=str(work / "facade"))
    subprocess.call([sys.executable, str(SUITE / "run.py"), *extra], env=env)
    return outcomes(work / "facade" / "junit.xml")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--side", choices=("both", "celery", "facade"), default="both")
    parser.add_argument("--venv", default="/tmp/celery-suite-venv", type=Path)
    parser.add_argument("--work", default=None, type=Path, help="scratch folder (default: a new temp folder)")
    parser.add_argument("pytest_args", nargs="*")
    args = parser.parse_args()
    work = args.work or Path(tempfile.mkdtemp(prefix="celery-suite-bench-"))
    work.mkdir(parents=True, exist_ok=True)
    real = ours = None
    if args.side in ("both", "celery"):
        real = run_celery(args.venv, work, args.pytest_args)
        print(f"real Celery {CELERY_VERSION} + Redis: {summary(real)} ({len(real)} tests)")
        if not args.pytest_args:
            passed = sorted(t for t, (o, _) in real.items() if o == "passed")
            (SUITE / "celery_passed.txt").write_text(
                f"# The tests of Celery {CELERY_VERSION}'s t/integration/test_canvas.py and test_tasks.py that real\n"
                "# Celery with Redis passes on this machine (bench/celery_suite.py --side celery).\n"
                + "\n".join(passed) + "\n")
    if args.side in ("both", "facade"):
        ours = run_facade(work, args.pytest_args)
        print(f"sync_worker_celery on the dev server: {summary(ours)} ({len(ours)} tests)")
    if real is not None and ours is not None:
        real_passed = {t for t, (o, _) in real.items() if o == "passed"}
        ours_passed = {t for t, (o, _) in ours.items() if o == "passed"}
        both = real_passed & ours_passed
        share = 100.0 * len(both) / max(1, len(real_passed))
        print(f"of real Celery's {len(real_passed)} passes, {len(both)} pass through the facade ({share:.1f}%); "
              f"the facade passes {len(ours_passed - real_passed)} that Celery does not")
    print(f"work folder: {work}")


if __name__ == "__main__":
    main()
