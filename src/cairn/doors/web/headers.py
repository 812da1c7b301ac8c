"""Security headers on every response of the web console."""

from __future__ import annotations

from starlette.datastructures import MutableHeaders
from starlette.types import Message, Receive, Scope, Send

from cairn.doors._asgi import HttpMiddleware

__all__ = ["CONTENT_SECURITY_POLICY", "SecurityHeaders"]

# Scripts and styles come from our own static files only: no inline script, no eval, no
# third-party origin. Forms post to us only; nobody may frame the console.
CONTENT_SECURITY_POLICY = "; ".join(
    [
        "default-src 'none'",
        "script-src 'self'",
        "style-src 'self'",
        "img-src 'self' data:",
        "connect-src 'self'",
        "form-action 'self'",
        "frame-ancestors 'none'",
        "base-uri 'none'",
    ]
)

HEADERS = {
    "Content-Security-Policy": CONTENT_SECURITY_POLICY,
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "no-referrer",
    "X-Content-Type-Options": "nosniff",
    "Cross-Origin-Opener-Policy": "same-origin",
    "Permissions-Policy": "camera=(), microphone=(), geolocation=()",
}


class SecurityHeaders(HttpMiddleware):
    """Adds ``HEADERS`` to every response, and ``Cache-Control: no-store`` to all but the
    static files (pages show memory a shared browser cache should not keep)."""

    async def handle(self, scope: Scope, receive: Receive, send: Send) -> None:
        static = "/static/" in scope.get("path", "")

        async def with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = MutableHeaders(scope=message)
                for name, value in HEADERS.items():
                    headers[name] = value
                if not static:
                    headers["Cache-Control"] = "no-store"
            await send(message)

        await self.app(scope, receive, with_headers)
