"""CORS for the allow-listed origins (``api.cors_origins``); a refused preflight answers in the API's error shape
instead of Starlette's plain text."""

from __future__ import annotations

from starlette.datastructures import Headers
from starlette.middleware.cors import CORSMiddleware
from starlette.responses import Response

from lamarck.api.errors import error_response


class ShapedCORS(CORSMiddleware):
    def preflight_response(self, request_headers: Headers) -> Response:
        response = super().preflight_response(request_headers)
        if response.status_code < 400:
            return response
        refused = bytes(response.body).decode(errors="replace").removeprefix("Disallowed CORS ")
        origin = request_headers.get("origin", "")
        return error_response(
            400,
            "cors_refused",
            f"this server does not allow that CORS {refused} (origin {origin[:100]!r}): "
            "ask its operator to add the origin to api.cors_origins",
        )
