"""``python -m sync_worker.cli``: the ``sync-worker`` command."""

from __future__ import annotations

from . import main

if __name__ == "__main__":  # pragma: no cover
    main()
