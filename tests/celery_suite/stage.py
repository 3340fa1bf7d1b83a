"""Stage Celery's own integration suite (``t/integration``) in a scratch folder.

    python3 tests/celery_suite/stage.py DEST [--side facade|celery] [--version 5.6.3]

The files come from Celery's source distribution on PyPI (``pip download --no-binary :all:
celery==VERSION``; cached under ``~/.cache/sync-worker/celery-suite``), never from this repository.
``tasks.py``, ``test_canvas.py`` and ``test_tasks.py`` are written to ``DEST/t/integration/``:

* ``--side celery``: unchanged, with Celery's own ``conftest.py`` (real Celery runs them);
* ``--side facade``: only their import lines change. Every ``celery[.module]`` import is pointed at
  ``sync_worker_celery[.module]`` for each name the facade has; a name it lacks comes from
  ``t/integration/_standins.py`` (``stand_ins.py`` here: each stand-in raises when used, never
  when imported). Our ``conftest.py`` (``suite_conftest.py`` here) replaces Celery's: it starts the
  dev server, a ``sync-worker celery`` worker process and a private ``redis-server`` (the suite's
  tasks write to Redis as a side channel).

The rewrite is printed (``--show``) so a reader can check that no test body changed.
"""

from __future__ import annotations

import argparse
import difflib
import importlib
import importlib.util
import os
import re
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path
from typing import Dict, List, Optional, Tuple

HERE = Path(__file__).resolve().parent
CELERY_VERSION = "5.6.3"
SUITE_FILES = ("tasks.py", "test_canvas.py", "test_tasks.py")
CACHE = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "sync-worker" / "celery-suite"

_FROM = re.compile(r"^(?P<indent>\s*)from celery(?P<module>(?:\.\w+)*) import (?P<names>[^(#]+?)\s*$")
_IMPORT = re.compile(r"^(?P<indent>\s*)import celery\s*$")


def sdist(version: str = CELERY_VERSION) -> Path:
    """Celery's source distribution (downloaded once with pip, then cached)."""
    target = CACHE / f"celery-{version}.tar.gz"
    if target.exists():
        return target
    CACHE.mkdir(parents=True, exist_ok=True)
    subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--disable-pip-version-check", "--no-deps",
                    "--no-binary", ":all:", f"celery=={version}", "-d", str(CACHE)], check=True)
    if not target.exists():
        raise SystemExit(f"pip download did not produce {target}")
    return target


def suite_sources(version: str = CELERY_VERSION) -> Dict[str, str]:
    """``{file name: text}`` of ``t/integration`` in Celery's sdist."""
    found: Dict[str, str] = {}
    with tarfile.open(sdist(version)) as archive:
        for member in archive.getmembers():
            parts = member.name.split("/")
            if len(parts) == 4 and parts[1:3] == ["t", "integration"] and member.isfile():
                handle = archive.extractfile(member)
                assert handle is not None
                found[parts[3]] = handle.read().decode()
    return found


def _facade_module(module: str) -> Optional[object]:
    name = "sync_worker_celery" + module
    try:
        if importlib.util.find_spec(name) is None:
            return None
    except ModuleNotFoundError:
        return None
    return importlib.import_module(name)


def _split_names(names: str) -> List[Tuple[str, str]]:
    out = []
    for part in names.split(","):
        part = part.strip()
        if not part:
            continue
        name, _, alias = part.partition(" as ")
        out.append((name.strip(), alias.strip()))
    return out


def _join(pairs: List[Tuple[str, str]]) -> str:
    return ", ".join(f"{n} as {a}" if a else n for n, a in pairs)


def rewrite_line(line: str) -> str:
    """One import line of the suite, pointed at the facade (a stand-in for each name it lacks)."""
    match = _IMPORT.match(line)
    if match:
        return f"{match['indent']}import sync_worker_celery as celery"
    match = _FROM.match(line)
    if not match:
        return line
    indent, module = match["indent"], match["module"]
    have, lack = [], []
    target = _facade_module(module)
    for name, alias in _split_names(match["names"]):
        found = target is not None and (hasattr(target, name) or _facade_module(f"{module}.{name}") is not None)
        (have if found else lack).append((name, alias))
    lines = []
    if have:
        lines.append(f"{indent}from sync_worker_celery{module} import {_join(have)}")
    if lack:
        lines.append(f"{indent}from t.integration._standins import {_join(lack)}")
    return "\n".join(lines)


def rewrite(text: str) -> str:
    return "\n".join(rewrite_line(line) for line in text.split("\n"))


def stage(dest: Path, side: str = "facade", version: str = CELERY_VERSION, show: bool = False) -> Path:
    """Write ``DEST/t/integration``; returns that folder."""
    sources = suite_sources(version)
    package = dest / "t" / "integration"
    if package.exists():
        shutil.rmtree(package)
    package.mkdir(parents=True)
    (dest / "t" / "__init__.py").write_text("")
    # Celery's own pytest settings (its pyproject.toml): lowercase test classes, strict xfail
    (dest / "pytest.ini").write_text("[pytest]\npython_classes = test_*\nxfail_strict = true\n"
                                     "markers =\n    flaky\n    timeout\n")
    (package / "__init__.py").write_text("")
    for name in SUITE_FILES:
        text = sources[name]
        if side == "facade":
            new = rewrite(text)
            if show:
                sys.stdout.writelines(difflib.unified_diff(text.splitlines(True), new.splitlines(True),
                                                           f"celery/t/integration/{name}", f"staged/{name}"))
            text = new
        (package / name).write_text(text)
    if side == "facade":
        shutil.copy(HERE / "suite_conftest.py", package / "conftest.py")
        shutil.copy(HERE / "stand_ins.py", package / "_standins.py")
        shutil.copy(HERE / "worker_app.py", package / "_worker_app.py")
    else:
        (package / "conftest.py").write_text(sources["conftest.py"])
    return package


def main(argv: Optional[List[str]] = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("dest", type=Path)
    parser.add_argument("--side", choices=("facade", "celery"), default="facade")
    parser.add_argument("--version", default=CELERY_VERSION)
    parser.add_argument("--show", action="store_true", help="print the import-line diff")
    args = parser.parse_args(argv)
    print(stage(args.dest, args.side, args.version, args.show))


if __name__ == "__main__":
    main()
