"""A request body size limit as plain ASGI middleware: a declared Content-Length over the limit is refused before the
body is read, and a chunked body is counted as it arrives and refused once it passes the limit (413 in the API's
error shape)."""

from __future__ import annotations

from starlette.exceptions import HTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from lamarck.api.errors import error_response


def _too_large_message(max_bytes: int) -> str:
    return f"the request body is over {max_bytes} bytes: send less (the limit is api.max_body_bytes)"


class _TooLarge(HTTPException):
    """An HTTPException, so FastAPI's body parsing passes it on and the app's handler answers 413 in its shape."""

    def __init__(self, max_bytes: int) -> None:
        super().__init__(413, _too_large_message(max_bytes), headers={"Connection": "close"})


class BodyLimit:
    def __init__(self, app: ASGIApp, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = _content_length(scope)
        if declared is not None and declared > self.max_bytes:
            await self._refuse(scope, receive, send)
            return
        seen = 0
        started = False

        async def counted_receive() -> Message:
            nonlocal seen
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > self.max_bytes:
                    raise _TooLarge(self.max_bytes)
            return message

        async def tracked_send(message: Message) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        try:
            await self.app(scope, counted_receive, tracked_send)
        except _TooLarge:
            if started:
                raise
            await self._refuse(scope, receive, send)

    async def _refuse(self, scope: Scope, receive: Receive, send: Send) -> None:
        response = error_response(
            413,
            "payload_too_large",
            _too_large_message(self.max_bytes),
            headers={"Connection": "close"},
        )
        await response(scope, receive, send)


def _content_length(scope: Scope) -> int | None:
    for name, value in scope.get("headers", []):
        if name == b"content-length":
            try:
                return int(value)
            except ValueError:
                return None
    return None
