"""One error shape for every failure: ``{"error": {"code": ..., "message": ...}}``, the message one line saying what
to fix. Validation errors, malformed JSON, unknown routes and known domain errors all map here; a 500 says only
that something broke on the server, never what (the log has it)."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from fastapi.routing import iter_route_contexts
from pydantic import BaseModel
from starlette.exceptions import HTTPException as StarletteHTTPException

from lamarck.agents.runs import RunError
from lamarck.api.solving import TaskError
from lamarck.curriculum.registry import UnknownEnvironment
from lamarck.platform.storage.api_repositories import IdempotencyConflict
from lamarck.platform.storage.repositories import NotFound

log = logging.getLogger(__name__)

HTTP_CODES = {
    400: "bad_request",
    401: "unauthorized",
    403: "forbidden",
    404: "not_found",
    405: "method_not_allowed",
    409: "conflict",
    413: "payload_too_large",
    415: "unsupported_media_type",
    422: "invalid_input",
    500: "internal_error",
}


class ErrorBody(BaseModel):
    code: str
    message: str


class ErrorResponse(BaseModel):
    error: ErrorBody


KEYED_ERRORS = (400, 401, 403, 413, 422, 429)
"""What any keyed route may answer before it runs: a malformed JSON body, no or a bad key, a missing scope, a body
over the limit, invalid input, a key over its rate limit."""


def documented(*statuses: int) -> dict[int | str, dict[str, object]]:
    """OpenAPI ``responses`` for these error statuses, each in the one error shape."""
    return {status: {"model": ErrorResponse} for status in statuses}


class ApiError(Exception):
    def __init__(self, status: int, message: str, *, code: str | None = None, headers: dict[str, str] | None = None):
        super().__init__(message)
        self.status = status
        self.code = code or HTTP_CODES.get(status, "error")
        self.message = message
        self.headers = headers


def error_response(status: int, code: str, message: str, headers: dict[str, str] | None = None) -> JSONResponse:
    body = ErrorResponse(error=ErrorBody(code=code, message=" ".join(message.split())))
    return JSONResponse(body.model_dump(), status_code=status, headers=headers)


def validation_message(exc: RequestValidationError) -> tuple[int, str, str]:
    first = exc.errors()[0]
    if first.get("type") == "json_invalid":
        reason = (first.get("ctx") or {}).get("error", "not valid JSON")
        return 400, "malformed_json", f"the request body is not valid JSON ({reason}): send a JSON object"
    loc = [str(part) for part in first.get("loc", ())]
    where = ".".join(loc[1:] if len(loc) > 1 else loc) or "request"
    source = loc[0] if loc else "body"
    message = str(first.get("msg", "is invalid")).removeprefix("Value error, ")
    got = first.get("input")
    shown = "" if first.get("type") == "missing" or isinstance(got, dict) else f" (got {_short(got)})"
    return 422, "invalid_input", f"{source} field {where}: {message}{shown}"


def _short(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def allowed_methods(request: Request) -> list[str]:
    """Every method the routes of this path serve; Starlette's own ``Allow`` names only the first route's, so a
    path served by two routes (GET and POST ``/v1/runs``) would seem to take one method. A route of exactly this
    path wins over one whose template also matches it."""
    path = request.url.path
    matching = [
        route
        for route in iter_route_contexts(request.app.routes)
        if route.methods and (pattern := getattr(route, "path_regex", None)) is not None and pattern.match(path)
    ]
    exact = [route for route in matching if route.path_format == path]  # /v1/tasks/wait over /v1/tasks/{task_id}
    return sorted({method for route in exact or matching for method in route.methods or ()})


AuthCheck = Callable[[Request], Awaitable["ApiError | None"]]


def install(app: FastAPI, *, auth_first: AuthCheck | None = None) -> None:
    """The handlers; ``auth_first`` answers a request with a missing or bad key 401 before its input is judged."""

    @app.exception_handler(ApiError)
    async def _api_error(request: Request, exc: ApiError) -> JSONResponse:
        return error_response(exc.status, exc.code, exc.message, exc.headers)

    @app.exception_handler(RequestValidationError)
    async def _invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
        denied = await auth_first(request) if auth_first is not None else None
        if denied is not None:
            return error_response(denied.status, denied.code, denied.message, denied.headers)
        status, code, message = validation_message(exc)
        return error_response(status, code, message)

    @app.exception_handler(StarletteHTTPException)
    async def _http(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        message = str(exc.detail)
        if exc.status_code == 404:
            message = f"no route {request.method} {request.url.path}: see /docs for the routes"
        elif exc.status_code == 405:
            message = f"{request.method} is not allowed on {request.url.path}: see /docs for its methods"
        headers = dict(exc.headers) if exc.headers else None
        if exc.status_code == 405:
            headers = {**(headers or {}), "Allow": ", ".join(allowed_methods(request))}
        return error_response(exc.status_code, HTTP_CODES.get(exc.status_code, "error"), message, headers)

    @app.exception_handler(NotFound)
    async def _not_found(request: Request, exc: NotFound) -> JSONResponse:
        return error_response(404, "not_found", str(exc))

    @app.exception_handler(UnknownEnvironment)
    async def _unknown_env(request: Request, exc: UnknownEnvironment) -> JSONResponse:
        return error_response(422, "unknown_environment", str(exc))

    @app.exception_handler(TaskError)
    async def _task_error(request: Request, exc: TaskError) -> JSONResponse:
        return error_response(422, "invalid_task", str(exc))

    @app.exception_handler(IdempotencyConflict)
    async def _idempotency(request: Request, exc: IdempotencyConflict) -> JSONResponse:
        return error_response(422, "idempotency_key_reused", str(exc))

    @app.exception_handler(RunError)
    async def _run_error(request: Request, exc: RunError) -> JSONResponse:
        return error_response(409, "conflict", str(exc))

    @app.exception_handler(Exception)
    async def _unexpected(request: Request, exc: Exception) -> JSONResponse:
        log.exception("unhandled error on %s %s", request.method, request.url.path)
        return error_response(500, "internal_error", "the server failed on this request: see its log")
