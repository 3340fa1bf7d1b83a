"""The embedded Durable Workflow development server (stdlib HTTP + SQLite).

A single-process stand-in for the real (PHP/Laravel) server, in the role of Temporal's
``start-dev``: for development, tests and the quickstart, never for production.
"""

from __future__ import annotations

from .app import DevServer

__all__ = ["DevServer"]
