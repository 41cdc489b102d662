"""The web UI's own routes (outside ``/v1`` and the OpenAPI document): sign in with an API key for a session cookie,
ask whether one is signed in, sign out; Swagger UI's page; the event types the live view listens for."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Annotated
from urllib.parse import parse_qs

from fastapi import APIRouter, Depends, Request, Response
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import FileResponse, JSONResponse, RedirectResponse
from pydantic import BaseModel, Field, ValidationError

from lamarck.api.deps import ContainerDep
from lamarck.api.errors import ApiError
from lamarck.api.keys import Principal, authenticate
from lamarck.api.session import COOKIE, SessionStore, key_still_valid, same_origin
from lamarck.platform.container import Container
from lamarck.platform.event_types import EVENT_TYPES

WEB_UI = Path(__file__).resolve().parents[2] / "web_ui"
SIGN_IN_PAGE = "/ui/signin.html"
# Where a form sign-in may send the browser afterwards: a page of this UI, nothing that leaves it.
NEXT_PATTERN = re.compile(r"^/ui/(?!/)[A-Za-z0-9._/?=&%-]{0,300}$")

router = APIRouter(include_in_schema=False)


class SignIn(BaseModel):
    key: str = Field(min_length=1, max_length=500)
    next: str | None = Field(None, max_length=400)


class SessionState(BaseModel):
    signed_in: bool
    expired: bool = Field(description="A session cookie came but is no longer valid (expired, signed out, revoked).")
    key_id: str | None = None
    scopes: list[str] = []


def get_sessions(request: Request) -> SessionStore:
    sessions: SessionStore = request.app.state.sessions
    return sessions


SessionsDep = Annotated[SessionStore, Depends(get_sessions)]


async def _sign_in_body(request: Request) -> tuple[SignIn | None, bool]:
    """The sign-in request (None for a form without a key) and whether it came as a form (then the answer is a
    redirect, not JSON)."""
    content_type = request.headers.get("content-type", "").split(";")[0].strip().lower()
    raw = await request.body()
    if content_type == "application/x-www-form-urlencoded":
        fields = {name: values[0] for name, values in parse_qs(raw.decode("utf-8", "replace")).items()}
        is_form = True
    elif content_type == "application/json":
        try:
            fields = json.loads(raw)
        except ValueError:
            raise ApiError(400, 'the request body is not valid JSON: send {"key": "<API key>"}') from None
        is_form = False
    else:
        raise ApiError(415, 'send the key as a form (key=...) or as JSON {"key": "<API key>"}')
    try:
        return SignIn.model_validate(fields), is_form
    except ValidationError:
        if is_form:
            return None, True
        raise ApiError(422, 'send {"key": "<API key>"}, the key a string from `lamarck keys create`') from None


def _principal_of(container: Container, key: str) -> Principal | None:
    configured = container.settings.api.api_key
    return authenticate(container.db, key, settings_key=configured.get_secret_value() if configured else None)


def _set_cookie(response: Response, request: Request, token: str, sessions: SessionStore) -> None:
    response.set_cookie(
        COOKIE,
        token,
        max_age=int(sessions.ttl_seconds),
        path="/",
        httponly=True,
        samesite="strict",
        secure=request.url.scheme == "https",
    )


@router.post("/ui/session")
async def sign_in(request: Request, container: ContainerDep, sessions: SessionsDep) -> Response:
    if "origin" in request.headers and not same_origin(request):
        raise ApiError(403, "sign in from this server's own sign-in page")
    body, is_form = await _sign_in_body(request)
    principal = None if body is None else await run_in_threadpool(_principal_of, container, body.key)
    if body is None or principal is None:
        if is_form:
            return RedirectResponse(f"{SIGN_IN_PAGE}?error=unknown_key", status_code=303)
        raise ApiError(401, "the API key is unknown or revoked: send a key from `lamarck keys create`")
    token = sessions.open(principal)
    response: Response
    if is_form:
        target = body.next if body.next and NEXT_PATTERN.match(body.next) and "//" not in body.next else "/ui/"
        response = RedirectResponse(target, status_code=303)
    else:
        response = JSONResponse(_signed_in(principal).model_dump())
    _set_cookie(response, request, token, sessions)
    return response


@router.get("/ui/session", response_model=SessionState)
def session_state(request: Request, container: ContainerDep, sessions: SessionsDep) -> SessionState:
    """Always 200, so a page that is not signed in shows the sign-in link without a failed request in its console."""
    token = request.cookies.get(COOKIE)
    if not token:
        return SessionState(signed_in=False, expired=False)
    principal = sessions.get(token)
    if principal is None or not key_still_valid(container.db, principal):
        return SessionState(signed_in=False, expired=True)
    return _signed_in(principal)


def _signed_in(principal: Principal) -> SessionState:
    scopes = sorted(scope.value for scope in principal.scopes)
    return SessionState(signed_in=True, expired=False, key_id=principal.key_id, scopes=scopes)


@router.delete("/ui/session", status_code=204)
def sign_out(request: Request, sessions: SessionsDep) -> Response:
    token = request.cookies.get(COOKIE)
    if token and not same_origin(request):
        raise ApiError(403, "sign out from this server's own pages")
    if token:
        sessions.close(token)
    response = Response(status_code=204)
    response.delete_cookie(COOKIE, path="/", httponly=True, samesite="strict")
    return response


@router.get("/ui/event-types")
def event_types() -> list[str]:
    return sorted(EVENT_TYPES)


@router.get("/docs")
def swagger_ui() -> FileResponse:
    return FileResponse(WEB_UI / "docs.html")


@router.get("/")
def home() -> RedirectResponse:
    return RedirectResponse("/ui/", status_code=307)
