"""``python -m sync_worker ...``: the same as the ``sync-worker`` command (gevent patched first)."""

from __future__ import annotations

from ._launcher import main

main()
