"""An OpenAI-compatible HTTP server over the local engine: ``/v1/chat/completions`` (streaming or not) and
``/v1/models``.

The request's ``model`` field names a model version (``<version>`` or ``lamarck/<version>``): every version in the
server's model store on the engine's base is served, an adapter loading on its first request, so a version trained or
imported into that store after the server started is served without a restart. A version the store lacks is an
OpenAI-style 404 that lists the versions it has. Pointing an executor route here, and the vLLM equivalent:
``docs/remote-models.md``.
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from collections.abc import AsyncIterator
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, StreamingResponse
from pydantic import BaseModel, Field

from lamarck.platform.llm.frontend import ChatMessages
from lamarck.platform.llm.model_store import ModelStoreError, strip_prefix
from lamarck.platform.llm.sampling import SamplingParams
from lamarck.platform.llm.serving import ServingEngine


class ChatMessage(BaseModel):
    role: str
    content: str | list[dict[str, Any]] | None = None


class ChatRequest(BaseModel):
    model: str
    messages: list[ChatMessage] = Field(min_length=1)
    max_tokens: int | None = Field(None, ge=1)
    max_completion_tokens: int | None = Field(None, ge=1)
    temperature: float | None = Field(None, ge=0.0, le=5.0)
    top_p: float | None = Field(None, gt=0.0, le=1.0)
    seed: int | None = None
    stop: str | list[str] | None = None
    stop_after: str | list[str] | None = Field(
        None, description="Lamarck extension: regular expressions; the reply ends with the first match, which is kept"
    )
    n: int = Field(1, ge=1, le=64)
    stream: bool = False


class ApiError(Exception):
    def __init__(self, status: int, message: str, kind: str = "invalid_request_error") -> None:
        super().__init__(message)
        self.status, self.message, self.kind = status, message, kind


def _error(status: int, message: str, kind: str) -> JSONResponse:
    return JSONResponse(status_code=status, content={"error": {"message": message, "type": kind, "code": status}})


def missing_version(version: str, served: list[str], shown: int = 8) -> str:
    """The one-line answer to a request for a version this server's store lacks: what to do, and what it has."""
    names = ", ".join(served[:shown]) + (f" (and {len(served) - shown} more)" if len(served) > shown else "")
    return (
        f"model version {version!r} is not in this server's model store: train or import it there "
        f"(see `lamarck models list`), or ask for one of: {names or 'none'}"
    )


def _params(body: ChatRequest) -> SamplingParams:
    stop = [body.stop] if isinstance(body.stop, str) else list(body.stop or [])
    stop_after = [body.stop_after] if isinstance(body.stop_after, str) else list(body.stop_after or [])
    try:
        return SamplingParams(
            max_tokens=body.max_tokens or body.max_completion_tokens or 256,
            temperature=body.temperature if body.temperature is not None else 0.0,
            top_p=body.top_p if body.top_p is not None else 1.0,
            seed=body.seed,
            stop=stop,
            stop_after=stop_after,
            n=body.n,
        )
    except ValueError as exc:
        raise ApiError(400, str(exc)) from exc


def create_app(engine: ServingEngine) -> FastAPI:
    app = FastAPI(title="Lamarck local models", version="1")

    @app.exception_handler(ApiError)
    async def _api_error(_: Request, exc: ApiError) -> JSONResponse:
        return _error(exc.status, exc.message, exc.kind)

    @app.exception_handler(RequestValidationError)
    async def _bad_body(_: Request, exc: RequestValidationError) -> JSONResponse:
        first = exc.errors()[0] if exc.errors() else {"loc": (), "msg": "invalid request"}
        where = ".".join(str(p) for p in first["loc"] if p != "body") or "body"
        return _error(400, f"invalid request: {where}: {first['msg']}", "invalid_request_error")

    def check_model(model: str) -> str:
        version = strip_prefix(model)
        served = engine.versions()
        if version not in served:
            raise ApiError(404, missing_version(version, served), "model_not_found")
        return version

    @app.get("/v1/models")
    async def models() -> dict[str, object]:
        now = int(time.time())
        return {
            "object": "list",
            "data": [{"id": v, "object": "model", "created": now, "owned_by": "lamarck"} for v in engine.versions()],
        }

    @app.post("/v1/chat/completions", response_model=None)
    async def chat(body: ChatRequest) -> JSONResponse | StreamingResponse:
        version = check_model(body.model)
        params = _params(body)
        messages = [m.model_dump() for m in body.messages]
        ident, created = f"chatcmpl-{uuid.uuid4().hex}", int(time.time())
        if body.stream:
            if params.n != 1:
                raise ApiError(400, "stream=true supports n=1 only")
            return StreamingResponse(
                _stream(engine, version, messages, params, ident, created), media_type="text/event-stream"
            )
        try:
            completions = await asyncio.to_thread(engine.chat, version, messages, params)
        except ModelStoreError as exc:
            raise ApiError(404, str(exc), "model_not_found") from exc
        except ValueError as exc:
            raise ApiError(400, str(exc)) from exc
        prompt = completions[0].prompt_tokens
        generated = sum(c.completion_tokens for c in completions)
        return JSONResponse(
            {
                "id": ident,
                "object": "chat.completion",
                "created": created,
                "model": version,
                "choices": [
                    {
                        "index": i,
                        "message": {"role": "assistant", "content": c.text},
                        "finish_reason": c.finish_reason,
                        "logprobs": None,
                    }
                    for i, c in enumerate(completions)
                ],
                "usage": {"prompt_tokens": prompt, "completion_tokens": generated, "total_tokens": prompt + generated},
            }
        )

    return app


async def _stream(
    engine: ServingEngine, version: str, messages: ChatMessages, params: SamplingParams, ident: str, created: int
) -> AsyncIterator[str]:
    def chunk(delta: dict[str, str], finish: str | None, usage: dict[str, int] | None = None) -> str:
        body: dict[str, Any] = {
            "id": ident,
            "object": "chat.completion.chunk",
            "created": created,
            "model": version,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish, "logprobs": None}],
        }
        if usage is not None:
            body["usage"] = usage
        return f"data: {json.dumps(body)}\n\n"

    try:
        deltas, future = await asyncio.to_thread(engine.stream_chat, version, messages, params)
    except (ModelStoreError, ValueError) as exc:
        yield f"data: {json.dumps({'error': {'message': str(exc), 'type': 'invalid_request_error'}})}\n\n"
        return
    yield chunk({"role": "assistant", "content": ""}, None)
    while (delta := await asyncio.to_thread(next, deltas, None)) is not None:
        yield chunk({"content": delta}, None)
    done = await asyncio.wrap_future(future)
    usage = {
        "prompt_tokens": done.prompt_tokens,
        "completion_tokens": done.completion_tokens,
        "total_tokens": done.prompt_tokens + done.completion_tokens,
    }
    yield chunk({}, done.finish_reason, usage)
    yield "data: [DONE]\n\n"


def serve(engine: ServingEngine, host: str = "127.0.0.1", port: int = 8001) -> None:
    import uvicorn

    uvicorn.run(create_app(engine), host=host, port=port, log_level="info")
