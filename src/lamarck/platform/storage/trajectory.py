"""The one trajectory format: OpenAI-style chat messages with tool calls.

A trajectory is stored as Step rows, one per message; ``to_chat`` and ``from_chat``
convert it to and from plain chat dicts without loss, so any stored trace can
become a training row.
"""

from __future__ import annotations

import json
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

Role = Literal["system", "user", "assistant", "tool"]


class ToolCall(BaseModel):
    model_config = ConfigDict(frozen=True)

    id: str
    name: str
    arguments: str = "{}"

    @field_validator("arguments", mode="before")
    @classmethod
    def _as_json_text(cls, value: Any) -> str:
        return value if isinstance(value, str) else json.dumps(value, sort_keys=True)

    def to_chat(self) -> dict[str, Any]:
        return {"id": self.id, "type": "function", "function": {"name": self.name, "arguments": self.arguments}}

    @classmethod
    def from_chat(cls, data: dict[str, Any]) -> ToolCall:
        function = data.get("function") or {}
        return cls(id=data["id"], name=function["name"], arguments=function.get("arguments", "{}"))


class Message(BaseModel):
    role: Role
    content: str | None = None
    name: str | None = None
    tool_calls: list[ToolCall] | None = None
    tool_call_id: str | None = None
    meta: dict[str, Any] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _consistent(self) -> Message:
        if self.tool_calls and self.role != "assistant":
            raise ValueError("only assistant messages carry tool_calls")
        if self.role == "tool" and not self.tool_call_id:
            raise ValueError("a tool message needs the tool_call_id it answers")
        return self

    def to_chat(self) -> dict[str, Any]:
        chat: dict[str, Any] = {"role": self.role, "content": self.content}
        if self.name is not None:
            chat["name"] = self.name
        if self.tool_calls:
            chat["tool_calls"] = [call.to_chat() for call in self.tool_calls]
        if self.tool_call_id is not None:
            chat["tool_call_id"] = self.tool_call_id
        return chat

    @classmethod
    def from_chat(cls, data: dict[str, Any]) -> Message:
        calls = data.get("tool_calls")
        return cls(
            role=data["role"],
            content=data.get("content"),
            name=data.get("name"),
            tool_calls=[ToolCall.from_chat(call) for call in calls] if calls else None,
            tool_call_id=data.get("tool_call_id"),
        )


class Trajectory(BaseModel):
    messages: list[Message] = Field(default_factory=list)

    def to_chat(self) -> list[dict[str, Any]]:
        return [message.to_chat() for message in self.messages]

    @classmethod
    def from_chat(cls, messages: list[dict[str, Any]]) -> Trajectory:
        return cls(messages=[Message.from_chat(message) for message in messages])

    def append(self, message: Message) -> None:
        self.messages.append(message)


OBSERVATION_PREFIX = "RESULT: "

# Message meta written by the executor and read by training (context distillation):
STUDENT_OPENING = "student_opening"  # on the system message: the chat the student harness would have shown
STUDENT_TOOLS = "student_tools"  # on the system message: the tools the student harness has
HINT = "hint"  # on messages the teacher added or changed: the hint level
HINT_TEXT = "hint_text"  # on the task message: the hint text appended to it


def render_for_model(trajectory: Trajectory) -> list[dict[str, str]]:
    """The chat the model sees: observations as ``RESULT:`` user turns, no structured tool fields.

    The executor prompts with it and training renders its rows with it, so the model learns the format it is
    prompted with.
    """
    chat: list[dict[str, str]] = []
    for message in trajectory.messages:
        if message.role == "tool":
            chat.append({"role": "user", "content": f"{OBSERVATION_PREFIX}{message.content or ''}"})
        else:
            chat.append({"role": message.role, "content": message.content or ""})
    return chat
