"""scripts/typecheck tells a dependency that mypy cannot analyse from an error in our code."""

from __future__ import annotations

import os
import runpy
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
guard = runpy.run_path(os.path.join(ROOT, "scripts", "typecheck"))


def test_an_error_in_site_packages_is_a_dependency_error() -> None:
    output = (
        "/venv/lib/python3.9/site-packages/click/utils.py:306: error: Pattern matching is only supported"
        " in Python 3.10 and greater  [syntax]\n"
        "Found 1 error in 1 file (errors prevented further checking)\n"
    )
    assert guard["foreign_errors"](output) == [
        ("/venv/lib/python3.9/site-packages/click/utils.py", "306",
         "Pattern matching is only supported in Python 3.10 and greater  [syntax]"),
    ]


def test_an_error_in_our_code_is_ours() -> None:
    output = (
        'sync_worker/worker/cli.py:239: error: Unused "type: ignore" comment  [unused-ignore]\n'
        "integrations/django/sync_worker_django/testing.py:164: error: Cannot find implementation  [import-not-found]\n"
        "sync_worker/worker/cli.py:240: note: a note is not an error\n"
    )
    assert guard["foreign_errors"](output) == []


def test_the_owner_of_an_installed_file_is_named_with_its_version() -> None:
    import click

    owner = guard["distribution_of"](sys.executable, click.__file__)
    from importlib.metadata import version

    assert owner == f"click {version('click')}"
