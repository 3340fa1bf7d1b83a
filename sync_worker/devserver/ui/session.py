"""Access to the UI: the server's token asked for once, kept in a session cookie, and a CSRF
token on every form.

When the dev server runs with a token, nothing but the token prompt renders until the browser
gives a token that opens the control plane and holds the session cookie it gets for it (an HMAC
keyed by a per-process secret, never the token itself, so a restart signs everyone out); it is
``HttpOnly``, ``SameSite=Strict`` and scoped to ``/ui``. Every state-changing form carries a CSRF
token derived from a per-process secret, checked before the action runs.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from http.cookies import SimpleCookie
from typing import Any, Optional, Sequence

__all__ = ["COOKIE", "Session"]

COOKIE = "sw_ui_session"


def _digest(key: str, message: str) -> str:
    return hmac.new(key.encode("utf-8"), message.encode("utf-8"), hashlib.sha256).hexdigest()


class Session:
    """``accepted``: the tokens that open the control plane (the shared development token and the
    operator token); ``required``: whether the server has any token at all (a worker token alone
    still closes the control plane, so the UI asks too)."""

    def __init__(self, accepted: Sequence[Optional[str]], *, required: bool) -> None:
        self.accepted = [t for t in accepted if t]
        self.required = required
        self._secret = secrets.token_hex(32)

    def cookie_value(self) -> str:
        return _digest(self._secret, "sync-worker-ui-session")

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
        supplied = offered.encode("utf-8")
        return any(hmac.compare_digest(supplied, token.encode("utf-8")) for token in self.accepted)

    def set_cookie_header(self) -> str:
        return f"{COOKIE}={self.cookie_value()}; Path=/ui; HttpOnly; SameSite=Strict"

    @staticmethod
    def clear_cookie_header() -> str:
        return f"{COOKIE}=; Path=/ui; HttpOnly; SameSite=Strict; Max-Age=0"

    def csrf(self) -> str:
        return _digest(self._secret, "csrf")

    def csrf_ok(self, offered: Optional[str]) -> bool:
        return offered is not None and hmac.compare_digest(offered, self.csrf())
