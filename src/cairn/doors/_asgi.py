"""A base for the servers' ASGI middlewares that act on HTTP requests only."""

from __future__ import annotations

from abc import ABC, abstractmethod

from starlette.types import ASGIApp, Receive, Scope, Send

__all__ = ["HttpMiddleware"]


class HttpMiddleware(ABC):
    """Wraps an ASGI app and sees its HTTP requests (``handle``); every other scope (the
    lifespan, a websocket) goes to the app untouched."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        await self.handle(scope, receive, send)

    @abstractmethod
    async def handle(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Serve one HTTP request, passing it on to ``self.app`` as it sees fit."""
