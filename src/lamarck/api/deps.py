"""Request dependencies: the container, the task runner, and the authenticated key (or web UI session) with its
scopes."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Annotated

from fastapi import Depends, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from lamarck.api.db_work import run_db
from lamarck.api.errors import ApiError
from lamarck.api.keys import Principal, Scope, authenticate
from lamarck.api.rate_limit import RateLimiter, RateLimiterUnavailable, retry_after
from lamarck.api.run_launcher import Launcher
from lamarck.api.session import COOKIE, SAFE_METHODS, SessionStore, key_still_valid, same_origin
from lamarck.api.task_runner import TaskRunner
from lamarck.platform.container import Container

_bearer = HTTPBearer(
    auto_error=False,
    scheme_name="ApiKey",
    description="An API key from `lamarck keys create`, sent as `Authorization: Bearer <key>`.",
)


# Dependencies that do not block are ``async def``: FastAPI runs a plain ``def`` dependency in its thread pool, and
# each such hop costs a thread switch on every request.


async def get_container(request: Request) -> Container:
    container: Container = request.app.state.container
    return container


async def get_runner(request: Request) -> TaskRunner:
    runner: TaskRunner = request.app.state.runner
    return runner


async def get_launcher(request: Request) -> Launcher:
    launcher: Launcher = request.app.state.launcher
    return launcher


ContainerDep = Annotated[Container, Depends(get_container)]
LauncherDep = Annotated[Launcher, Depends(get_launcher)]
RunnerDep = Annotated[TaskRunner, Depends(get_runner)]


async def get_principal(
    request: Request,
    container: ContainerDep,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)],
) -> Principal:
    """The caller: by its Bearer key, or else by the web UI's session cookie (see ``api.session``)."""
    challenge = {"WWW-Authenticate": "Bearer"}
    if credentials is None:
        token = request.cookies.get(COOKIE)
        if token:
            return await _session_principal(request, container, token)
        raise ApiError(
            401,
            "no API key: send `Authorization: Bearer <key>` (create one with `lamarck keys create`)",
            headers=challenge,
        )
    configured = container.settings.api.api_key
    principal = await run_db(
        container.db,
        authenticate,
        container.db,
        credentials.credentials,
        settings_key=configured.get_secret_value() if configured else None,
    )
    if principal is None:
        raise ApiError(
            401, "the API key is unknown or revoked: send a key from `lamarck keys create`", headers=challenge
        )
    return principal


async def _session_principal(request: Request, container: Container, token: str) -> Principal:
    sessions: SessionStore = request.app.state.sessions
    principal = sessions.get(token)
    if principal is None or not await run_db(container.db, key_still_valid, container.db, principal):
        raise ApiError(
            401,
            "the browser's sign-in has expired, was signed out or its key revoked: sign in again at /ui/",
            code="session_expired",
        )
    if request.method not in SAFE_METHODS and not same_origin(request):
        raise ApiError(
            403,
            "a change made with the browser's sign-in must come from this server's own pages (Origin header): "
            "or send the API key as `Authorization: Bearer <key>`",
        )
    return principal


PUBLIC_PATHS = frozenset({"/v1/health"})


async def auth_failure(request: Request) -> ApiError | None:
    """The 401 a request's missing or bad key earns, for the error handlers to answer before judging its body: a
    caller without a valid key learns nothing about what it sent."""
    if request.url.path in PUBLIC_PATHS or not request.url.path.startswith("/v1/"):
        return None
    credentials = await _bearer(request)
    try:
        await get_principal(request, await get_container(request), credentials)
    except ApiError as exc:
        return exc
    return None


def require(scope: Scope) -> Callable[[Request, Principal], Awaitable[Principal]]:
    """A dependency that takes a token of the caller's rate limit and checks ``scope``."""

    async def check(request: Request, principal: Annotated[Principal, Depends(get_principal)]) -> Principal:
        limiter: RateLimiter = request.app.state.rate_limiter
        try:
            if limiter.blocking:
                decision = await run_in_threadpool(limiter.take, principal.key_id)
            else:
                decision = limiter.take(principal.key_id)
        except RateLimiterUnavailable as exc:
            raise ApiError(503, str(exc), code="service_unavailable", headers={"Retry-After": "1"}) from None
        if not decision.allowed:
            wait = retry_after(decision.retry_after)
            raise ApiError(
                429,
                f"this API key is over {limiter.rate:g} requests a second: retry after {wait} s",
                code="rate_limited",
                headers={"Retry-After": wait},
            )
        if not principal.allows(scope):
            raise ApiError(
                403, f"this API key lacks the {scope.value!r} scope: use a key created with --scope {scope.value}"
            )
        return principal

    return check


ReadKey = Annotated[Principal, Depends(require(Scope.READ))]
TasksKey = Annotated[Principal, Depends(require(Scope.TASKS))]
RunsKey = Annotated[Principal, Depends(require(Scope.RUNS))]
ModelsKey = Annotated[Principal, Depends(require(Scope.MODELS))]
