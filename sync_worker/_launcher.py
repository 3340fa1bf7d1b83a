"""Process entry point that monkey-patches for gevent *before* anything else is imported.

``sync-worker run -P gevent ...``, ``python -m sync_worker run -P gevent ...`` and the
environment variable ``SYNC_WORKER_POOL=gevent`` all come through here. Only stdlib modules
(and this package's light ``__init__``) are imported before the patch, so ``requests``,
``urllib3``, ``ssl`` users and the user's own app load already cooperative.
"""

from __future__ import annotations

import os
import sys
from typing import List, Mapping, Optional, Sequence

POOL_ENV = "SYNC_WORKER_POOL"

#: ``sys.modules`` just before monkey-patching (None when this launcher did not patch).
EARLY_MODULES: Optional[List[str]] = None


def requested_pool(argv: Sequence[str], environ: Optional[Mapping[str, str]] = None) -> Optional[str]:
    """The pool named by ``-P/--pool`` on the command line, else by ``SYNC_WORKER_POOL``."""
    args: List[str] = list(argv)
    for index, arg in enumerate(args):
        if arg in ("-P", "--pool") and index + 1 < len(args):
            return args[index + 1]
        if arg.startswith("--pool="):
            return arg.split("=", 1)[1]
        if arg.startswith("-P") and len(arg) > 2:
            return arg[2:]
        if arg == "--":
            break
    env = os.environ if environ is None else environ
    return env.get(POOL_ENV) or None


def main(argv: Optional[Sequence[str]] = None) -> None:
    args = list(sys.argv[1:] if argv is None else argv)
    if requested_pool(args) == "gevent":
        try:
            from gevent import monkey
        except ImportError:
            sys.stderr.write(
                "sync-worker: the gevent pool needs gevent installed: pip install 'sync-worker[gevent]'\n"
            )
            raise SystemExit(2) from None
        global EARLY_MODULES
        EARLY_MODULES = sorted(sys.modules)
        monkey.patch_all()
        os.environ[POOL_ENV] = "gevent"  # so the worker knows the process was patched first
    from .cli import main as cli_main

    cli_main(args=args, prog_name="sync-worker")


if __name__ == "__main__":  # pragma: no cover
    main()
