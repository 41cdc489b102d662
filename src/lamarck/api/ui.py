"""The web UI on the API's own origin: its static pages under ``/ui``, Swagger UI at ``/docs`` from vendored files,
the sign-in routes, and the security headers every response carries (a Content-Security-Policy of
``default-src 'self'``: no inline script or style, nothing from another host)."""

from __future__ import annotations

from fastapi import FastAPI
from starlette.datastructures import MutableHeaders
from starlette.staticfiles import StaticFiles
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from lamarck.api.routes import ui as ui_routes
from lamarck.api.session import DatabaseSessionStore, SessionStore

CSP = "default-src 'self'; base-uri 'self'; form-action 'self'; frame-ancestors 'none'"
# swagger-ui.css draws its icons as data: SVG images; nothing else on /docs needs more than the UI's policy.
DOCS_CSP = f"{CSP}; img-src 'self' data:"


class SecurityHeaders:
    """Adds the policy to every response (plain ASGI, so event streams pass through unbuffered)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        policy = DOCS_CSP if scope["path"] == "/docs" else CSP

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = MutableHeaders(scope=message)
                headers.setdefault("Content-Security-Policy", policy)
                headers.setdefault("X-Content-Type-Options", "nosniff")
                headers.setdefault("Referrer-Policy", "same-origin")
            await send(message)

        await self.app(scope, receive, send_with_headers)


def install(app: FastAPI, sessions: SessionStore | None = None) -> None:
    """Mounts the UI; call after the ``/v1`` routers (the static mount matches last)."""
    app.state.sessions = sessions or DatabaseSessionStore(app.state.container.db)
    app.add_middleware(SecurityHeaders)
    app.include_router(ui_routes.router)
    app.mount("/ui", StaticFiles(directory=ui_routes.WEB_UI, html=True), name="ui")
