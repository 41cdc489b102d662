from __future__ import annotations

import pytest
from pydantic import ValidationError

from lamarck.platform.storage.trajectory import Message, ToolCall, Trajectory

CHAT = [
    {"role": "system", "content": "be brief"},
    {"role": "user", "content": "reverse 'abc'"},
    {
        "role": "assistant",
        "content": None,
        "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "reverse", "arguments": '{"s": "abc"}'}}],
    },
    {"role": "tool", "content": "cba", "tool_call_id": "c1", "name": "reverse"},
    {"role": "assistant", "content": "cba"},
]


def test_chat_round_trip_is_lossless() -> None:
    assert Trajectory.from_chat(CHAT).to_chat() == CHAT


def test_arguments_given_as_a_dict_become_json_text() -> None:
    call = ToolCall(id="x", name="f", arguments={"b": 1, "a": 2})
    assert call.arguments == '{"a": 2, "b": 1}'


def test_inconsistent_messages_are_rejected() -> None:
    with pytest.raises(ValidationError, match="tool_call_id"):
        Message(role="tool", content="51")
    with pytest.raises(ValidationError, match="only assistant"):
        Message(role="user", content="hi", tool_calls=[ToolCall(id="x", name="f")])
