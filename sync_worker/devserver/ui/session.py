"""Access to the UI: the server's token asked for once, kept in a session cookie, and a CSRF
token on every form.

When the dev server runs with a token, nothing but the token prompt renders until the browser
holds a session cookie derived from that token (an HMAC, never the token itself); the cookie is
``HttpOnly``, ``SameSite=Strict`` and scoped to ``/ui``. Every state-changing form carries a CSRF
token derived from a per-process secret, checked before the action runs.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from http.cookies import SimpleCookie
from typing import Any, Optional

__all__ = ["COOKIE", "Session"]

COOKIE = "sw_ui_session"


def _digest(key: str, message: str) -> str:
    return hmac.new(key.encode("utf-8"), message.encode("utf-8"), hashlib.sha256).hexdigest()


class Session:
    def __init__(self, token: Optional[str]) -> None:
        self.token = token
        self._secret = secrets.token_hex(32)

    @property
    def required(self) -> bool:
        return bool(self.token)

    def cookie_value(self) -> str:
        assert self.token
        return _digest(self.token, "sync-worker-ui-session")

    def authenticated(self, headers: Any) -> bool:
        if not self.required:
            return True
        raw = headers.get("Cookie") if headers is not None else None
        if not raw:
            return False
        jar: SimpleCookie = SimpleCookie()
        try:
            jar.load(raw)
        except Exception:  # a malformed cookie header is just "not signed in"
            return False
        morsel = jar.get(COOKIE)
        return morsel is not None and hmac.compare_digest(morsel.value, self.cookie_value())

    def token_matches(self, offered: str) -> bool:
        return bool(self.token) and hmac.compare_digest(offered.encode("utf-8"), str(self.token).encode("utf-8"))

    def set_cookie_header(self) -> str:
        return f"{COOKIE}={self.cookie_value()}; Path=/ui; HttpOnly; SameSite=Strict"

    @staticmethod
    def clear_cookie_header() -> str:
        return f"{COOKIE}=; Path=/ui; HttpOnly; SameSite=Strict; Max-Age=0"

    def csrf(self) -> str:
        return _digest(self._secret, "csrf")

    def csrf_ok(self, offered: Optional[str]) -> bool:
        return offered is not None and hmac.compare_digest(offered, self.csrf())
