"""Request and response models of the REST API, separate from the ORM records: ``*Create`` is what a client sends,
``*Public`` what it gets back (never a key, a hash, a secret setting or a process's owner)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, JsonValue

from lamarck.agents.runs import RunConfig
from lamarck.agents.summary import GenerationSummary
from lamarck.api.solving import TaskRequest, TaskResult
from lamarck.api.text import NulFreeBody
from lamarck.api.times import UtcDatetime

TaskStatus = Literal["queued", "running", "succeeded", "failed", "cancelled"]
RunStatus = Literal["pending", "running", "stopping", "stopped", "finished", "budget_exhausted", "failed"]
TERMINAL_TASK = ("succeeded", "failed", "cancelled")


class TaskCreate(TaskRequest):
    """A task to solve (see TaskRequest)."""


class TaskWaitCreate(TaskRequest):
    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={"examples": [{"prompt": "What is 6 * 7?", "environment": "arithmetic", "timeout": 30}]},
    )

    timeout: float | None = Field(None, gt=0, le=600, description="Seconds to wait for the answer (default 30).")

    def task(self) -> TaskRequest:
        return TaskRequest.model_validate(self.model_dump(exclude={"timeout"}))


class TaskPublic(BaseModel):
    id: str
    status: TaskStatus
    request: TaskRequest
    result: TaskResult | None = None
    error: str | None = None
    created_at: UtcDatetime
    finished_at: UtcDatetime | None = None


class Health(BaseModel):
    status: Literal["ok", "degraded"]
    database: Literal["ok", "unreachable"]


class Info(BaseModel):
    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {
                    "version": "0.1.0",
                    "mode": "embedded",
                    "environments": ["arithmetic", "string_ops"],
                    "champion": "smollm2-135m",
                    "served_harnesses": {"arithmetic": "arithmetic-3f2a9c1e0b7d"},
                }
            ]
        }
    )

    version: str
    mode: Literal["embedded", "distributed"]
    environments: list[str]
    champion: str | None
    served_harnesses: dict[str, str] = Field(description="Environment -> promoted harness, where one was promoted.")


class EventPublic(BaseModel):
    id: int
    type: str
    run_id: str | None
    created_at: UtcDatetime
    known: bool = Field(description="False for a type this server does not know; its payload is then shown raw.")
    payload: dict[str, JsonValue]


class EventPage(BaseModel):
    events: list[EventPublic]
    next_after: int = Field(description="Pass as `after` to read on from here.")


class RunPublic(BaseModel):
    id: str
    name: str
    status: RunStatus | str
    config: dict[str, JsonValue]
    generations_done: int
    error: str | None
    created_at: UtcDatetime
    finished_at: UtcDatetime | None


class RunCreate(NulFreeBody):
    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [
                {"name": "nightly", "config": {"environments": ["arithmetic"], "generations": 3, "batch_size": 16}}
            ]
        },
    )

    name: str = Field("", max_length=200)
    config: RunConfig


class RunPage(BaseModel):
    runs: list[RunPublic]
    next_cursor: str | None = Field(description="Pass as `cursor` for the next page; null on the last page.")


class RunStopPublic(BaseModel):
    id: str
    status: Literal["stopping", "stopped"]


class GenerationPage(BaseModel):
    run_id: str
    generations: list[GenerationSummary]
