"""The LLM gateway: every model call in Lamarck goes through here, addressed by role.

Each role (curriculum, executor, critic, harness_critic) routes to its configured
litellm model. Transient failures are retried with exponential backoff, and every
call — successful or not — is recorded as an ``LLMCall`` row with tokens, latency
and cost where litellm knows it, linked to its run, episode and step (``tracing.call_context``), with its prompt and
reply (redacted; ``TracingSettings.store_text``), and traced as a ``chat {model}`` span (``call_trace``).
"""

from __future__ import annotations

import asyncio
import logging
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import litellm

from lamarck.platform.llm.call_trace import ChatTrace, chat_trace
from lamarck.platform.llm.version_names import served_model
from lamarck.platform.settings import ROLES, GatewaySettings, ModelRoute, ModelRoutes
from lamarck.platform.storage import repositories as repo
from lamarck.platform.storage.database import Database

log = logging.getLogger(__name__)

# litellm prints a provider-list banner to stdout each time it prices a model it has no table entry for (every
# call to a custom or self-hosted route); it interleaves with the CLI's output and says nothing about the call.
litellm.suppress_debug_info = True

TRANSIENT_ERRORS: tuple[type[Exception], ...] = (
    litellm.exceptions.RateLimitError,
    litellm.exceptions.APIConnectionError,
    litellm.exceptions.Timeout,
    litellm.exceptions.ServiceUnavailableError,
    litellm.exceptions.InternalServerError,
)
LOCAL_PREFIX = "lamarck/"
_LITELLM_PREFIX = re.compile(r"^litellm\.\w+:\s*(?:\w+:\s*)?(?:\w+Exception\s*-\s*)?")


class GatewayError(RuntimeError):
    """A model call that cannot succeed; the message is one line and names the fix."""


@dataclass(frozen=True)
class ChatResult:
    role: str
    model: str
    choices: list[str]
    finish_reasons: list[str]
    prompt_tokens: int
    completion_tokens: int
    latency_s: float
    cost_usd: float | None
    attempts: int = 1
    raw: Any = field(default=None, repr=False, compare=False)

    @property
    def text(self) -> str:
        return self.choices[0] if self.choices else ""


class LLMGateway:
    def __init__(
        self,
        routes: ModelRoutes,
        settings: GatewaySettings,
        *,
        db: Database | None = None,
        ensure_local_provider: Callable[[], None] | None = None,
        default_api_key: str | None = None,
    ) -> None:
        self.routes = routes
        self.settings = settings
        self.db = db
        self._ensure_local_provider = ensure_local_provider
        self._default_api_key = default_api_key

    def route(self, role: str) -> ModelRoute:
        if role not in ROLES:
            raise GatewayError(f"unknown role {role!r}: use one of {', '.join(ROLES)}")
        return self.routes.route(role)

    def complete(
        self,
        role: str,
        messages: list[dict[str, Any]],
        *,
        run_id: str | None = None,
        episode_id: str | None = None,
        **params: Any,
    ) -> ChatResult:
        route = self.route(role)
        kwargs = self._call_kwargs(route, messages, params)
        with chat_trace(role, kwargs, run_id=run_id, episode_id=episode_id, secrets=self._secrets()) as traced:
            started = time.perf_counter()
            attempts = 0
            while True:
                attempts += 1
                try:
                    response = litellm.completion(**kwargs)
                except TRANSIENT_ERRORS as exc:
                    if attempts <= self.settings.retries:
                        time.sleep(self._backoff(attempts))
                        continue
                    raise self._failed(role, route, kwargs["model"], exc, started, attempts, traced) from exc
                except Exception as exc:
                    raise self._failed(role, route, kwargs["model"], exc, started, attempts, traced) from exc
                return self._succeeded(role, route, kwargs["model"], response, started, attempts, traced)

    def _secrets(self) -> list[str]:
        """The keys this gateway sends, so no stored prompt or reply can keep one."""
        keys = [route.api_key.get_secret_value() for route in map(self.routes.route, ROLES) if route.api_key]
        return keys + ([self._default_api_key] if self._default_api_key else [])

    async def acomplete(
        self,
        role: str,
        messages: list[dict[str, Any]],
        *,
        run_id: str | None = None,
        episode_id: str | None = None,
        **params: Any,
    ) -> ChatResult:
        """The async twin of ``complete``: the same call, retries and record, off the event loop."""
        return await asyncio.to_thread(self.complete, role, messages, run_id=run_id, episode_id=episode_id, **params)

    def _backoff(self, attempt: int) -> float:
        return self.settings.backoff_seconds * 2.0 ** (attempt - 1)

    def _call_kwargs(self, route: ModelRoute, messages: list[dict[str, Any]], params: dict[str, Any]) -> dict[str, Any]:
        if not messages:
            raise GatewayError("messages is empty: pass at least one chat message")
        if route.model.startswith(LOCAL_PREFIX) and route.api_base is None and self._ensure_local_provider:
            self._ensure_local_provider()
        kwargs: dict[str, Any] = {
            "model": route.model,
            "messages": messages,
            "temperature": route.sampling.temperature,
            "top_p": route.sampling.top_p,
            "max_tokens": route.sampling.max_tokens,
            "timeout": self.settings.timeout_seconds,
            "num_retries": 0,
        }
        if route.api_base:
            kwargs["api_base"] = route.api_base
        api_key = route.api_key.get_secret_value() if route.api_key else self._default_api_key
        if api_key:
            kwargs["api_key"] = api_key
        elif route.api_base and route.model.startswith(LOCAL_PREFIX):
            kwargs["api_key"] = "unused"  # `lamarck serve-model` checks no key; litellm's OpenAI client wants one
        kwargs.update({key: value for key, value in params.items() if value is not None})
        kwargs["model"] = served_model(route, kwargs["model"])
        return kwargs

    def _succeeded(
        self,
        role: str,
        route: ModelRoute,
        model: str,
        response: Any,
        started: float,
        attempts: int,
        traced: ChatTrace,
    ) -> ChatResult:
        latency = time.perf_counter() - started
        usage = getattr(response, "usage", None)
        prompt_tokens = int(getattr(usage, "prompt_tokens", 0) or 0)
        completion_tokens = int(getattr(usage, "completion_tokens", 0) or 0)
        result = ChatResult(
            role=role,
            model=model,
            choices=[choice.message.content or "" for choice in response.choices],
            finish_reasons=[str(choice.finish_reason or "") for choice in response.choices],
            prompt_tokens=prompt_tokens,
            completion_tokens=completion_tokens,
            latency_s=latency,
            cost_usd=_cost(response, model, lamarck_server=route.model.startswith(LOCAL_PREFIX)),
            attempts=attempts,
            raw=response,
        )
        traced.succeeded(response, result.choices, result.finish_reasons, prompt_tokens, completion_tokens, attempts)
        self._record(role, model, prompt_tokens, completion_tokens, latency, result.cost_usd, attempts, None, traced)
        return result

    def _failed(
        self,
        role: str,
        route: ModelRoute,
        model: str,
        exc: Exception,
        started: float,
        attempts: int,
        traced: ChatTrace,
    ) -> GatewayError:
        reason = _first_line(exc)
        traced.failed(exc, reason, attempts)
        self._record(role, model, 0, 0, time.perf_counter() - started, None, attempts, reason, traced)
        if isinstance(exc, GatewayError):
            return exc
        env = f"LAMARCK_MODELS__{role.upper()}__"
        if isinstance(exc, TRANSIENT_ERRORS):
            where = route.api_base or route.model
            return GatewayError(
                f"cannot reach model {route.model} at {where} for role {role} after {attempts} attempts: {reason}"
                f" (start the model server or fix {env}API_BASE)"
            )
        if isinstance(exc, (litellm.exceptions.NotFoundError, litellm.exceptions.BadRequestError)):
            if model != route.model:  # a model version asked for by name: the server's answer says what to do
                answer = _server_message(_first_line(exc, 400))[:300]
                return GatewayError(f"model {model} for role {role} refused the call: {answer}")
            return GatewayError(f"model {route.model} for role {role} refused the call: {reason} (fix {env}MODEL)")
        if isinstance(exc, litellm.exceptions.AuthenticationError):
            return GatewayError(f"model {route.model} for role {role} rejected the API key (set {env}API_KEY)")
        return GatewayError(f"call to {route.model} for role {role} failed: {reason}")

    def _record(
        self,
        role: str,
        model: str,
        prompt_tokens: int,
        completion_tokens: int,
        latency: float,
        cost: float | None,
        attempts: int,
        error: str | None,
        traced: ChatTrace,
    ) -> None:
        if self.db is None:
            return
        try:
            with self.db.session() as session:
                repo.record_llm_call(
                    session,
                    role=role,
                    model=model,
                    prompt_tokens=prompt_tokens,
                    completion_tokens=completion_tokens,
                    latency_s=latency,
                    cost_usd=cost,
                    ok=error is None,
                    error=error,
                    attempts=attempts,
                    run_id=traced.run_id,
                    episode_id=traced.episode_id,
                    step=traced.step,
                    prompt=traced.prompt,
                    response=traced.response,
                    trace_id=traced.trace_id,
                )
        except Exception:
            log.exception("could not record the LLM call for role %s", role)


def _cost(response: Any, model: str, *, lamarck_server: bool) -> float | None:
    """Nothing for a Lamarck engine, in-process or ``lamarck serve-model`` (which litellm cannot price)."""
    if lamarck_server or model.startswith(LOCAL_PREFIX):
        return 0.0
    try:
        return float(litellm.completion_cost(completion_response=response))
    except Exception:
        return None


def _server_message(reason: str) -> str:
    """The server's own words in a litellm error line, without litellm's ``litellm.X: X: ProviderException -``."""
    return _LITELLM_PREFIX.sub("", reason, count=1) or reason


def _first_line(exc: BaseException, limit: int = 300) -> str:
    text = str(exc).strip() or type(exc).__name__
    return text.splitlines()[0][:limit]
