"""The executor's action format, chosen so a 135M model can learn to emit it.

One line per action::

    CALL calculator: 12 * (3 + 4)
    ANSWER: 84

Parsing is forgiving about case, markdown decoration and ``name(input)`` spelling,
and never raises. A reply with neither line is taken whole as the answer (the
environment's verifier extracts what it needs); a broken ``CALL`` becomes a
``malformed`` action whose ``error`` tells the model what was wrong, which the
executor feeds back as an observation.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from typing import Literal

ActionKind = Literal["call", "answer", "malformed"]

_DECORATION = "*_`> \t"
_CALL = re.compile(r"^\s*[*_`>]*\s*(?:CALL|ACTION|TOOL)\s*[*_`]*\s*:?\s*(?P<rest>.*)$", re.IGNORECASE)
_ANSWER = re.compile(r"^\s*[*_`>]*\s*(?:FINAL\s+)?ANSWER\s*[*_`]*\s*[:=]\s*(?P<answer>.*)$", re.IGNORECASE)
_NAME_COLON = re.compile(r"^(?P<name>[A-Za-z_][\w.\-]*)\s*:\s*(?P<arg>.*)$", re.DOTALL)
_NAME_PAREN = re.compile(r"^(?P<name>[A-Za-z_][\w.\-]*)\s*\((?P<arg>.*)\)\s*$", re.DOTALL)
_FENCE_OPEN = re.compile(r"^\s*```")
_NAME_START = re.compile(r"[A-Za-z_]")  # a tool name starts so; `CALL: 38 - 6` or `CALL: (2 + 3)` has none

_ANSWER_KEY = r"[ \t]*[*_`>]*[ \t]*(?:FINAL[ \t]+)?ANSWER[ \t]*[*_`]*[ \t]*[:=]"
_CALL_KEY = r"[ \t]*[*_`>]*[ \t]*(?:CALL|ACTION|TOOL)"
_FENCE = r"[ \t]*```"
ACTION_END = (
    rf"(?i)\A(?:(?!{_ANSWER_KEY}|{_CALL_KEY})[^\n]*\n)*?"  # lines before the first action line
    rf"(?:{_ANSWER_KEY}(?![ \t]*```)|{_CALL_KEY})[^\n]*\n"  # the first action line (an answer that opens a fence
    # on its own line takes the rest of the reply, so never ends early)
    rf"(?:(?=[ \t]*(?:\n|[^ \t`\n]|`[^`]|``[^`]))"  # and the next line has begun without a fence: end here
    rf"|{_FENCE}[^\n]*\n(?:(?!{_FENCE})[^\n]*\n)*{_FENCE}[^\n]*\n)"  # or a fenced block, through its closing line
)
"""Matches a reply through the end of its first complete action, as ``parse_action`` reads it: the executor's
``stop_after`` pattern, so the engine stops decoding where ``Action.text`` would cut the reply anyway. Cutting a
reply at the end of this match never changes what ``parse_action`` returns (see tests/agents/test_action_end.py)."""


@dataclass(frozen=True)
class Action:
    kind: ActionKind
    tool: str | None = None
    argument: str = ""
    answer: str = ""
    error: str = ""
    implicit: bool = False  # a reply without CALL or ANSWER is taken whole as the answer
    text: str = ""  # the reply up to the end of this action: what the model should have stopped after


def parse_action(reply: str, *, known_tools: set[str] | None = None, primary_tool: str | None = None) -> Action:
    """The first action in a reply: a tool call or an answer; otherwise a malformed action saying why.

    A call whose input starts where the tool name should be (``CALL: 38 - 6 + 1``) goes to ``primary_tool`` (the
    environment's own tool) or, without one, to the only tool there is: the student, who sees only the
    environment's tools, parses it that way, so the teacher, whose prompt also lists skills, must too. Error
    messages name ``primary_tool`` in their example, never a skill the student lacks.

    ``text`` drops whatever the model wrote after its first action (a small model keeps going: a guessed result,
    a second call, a paragraph). The executor records only ``text``, so later steps and training rows never see
    the rambling tail, which no observation answered."""
    lines = reply.splitlines()
    for index, line in enumerate(lines):
        answer = _ANSWER.match(line)
        if answer:
            text, used = _answer_text(answer.group("answer"), lines[index + 1 :])
            return Action(kind="answer", answer=text, text=_through(lines, index + used))
        call = _CALL.match(line)
        if call:
            action, used = _call(call.group("rest").strip(), lines[index + 1 :], known_tools, primary_tool)
            return replace(action, text=_through(lines, index + used))
    if not reply.strip():
        return Action(kind="malformed", error="empty reply: use a tool with a `CALL` line or finish with `ANSWER: ...`")
    return Action(kind="answer", answer=reply.strip(), implicit=True, text=reply.strip())


def _through(lines: list[str], last: int) -> str:
    return "\n".join(lines[: last + 1]).strip()


def _call(
    rest: str, following: list[str], known_tools: set[str] | None, primary_tool: str | None = None
) -> tuple[Action, int]:
    """The call, and how many of the following lines it took its input from (a fenced block)."""
    rest = _undecorate_name(rest.strip(_DECORATION))
    match = _NAME_COLON.match(rest) or _NAME_PAREN.match(rest)
    if match is None:
        name, argument = (rest.split(None, 1) + [""])[:2] if rest else ("", "")
    else:
        name, argument = match.group("name"), match.group("arg")
    name = name.strip(_DECORATION)
    argument, used = argument.strip(), 0
    if not argument and following and _FENCE_OPEN.match(following[0]):
        argument, used = _fenced_block(following)
    if not name:
        return (
            Action(kind="malformed", error=f"CALL without a tool name: {_how_to_call(known_tools, primary_tool)}"),
            used,
        )
    if known_tools is not None and name not in known_tools and match is None:
        target = next(iter(known_tools)) if len(known_tools) == 1 else None
        if primary_tool in known_tools and not _NAME_START.match(name):
            target = primary_tool
        if target is not None:
            return Action(kind="call", tool=target, argument=_unquote(rest.strip())), used
    if known_tools is not None and name not in known_tools:
        listed = ", ".join(sorted(known_tools)) or "none"
        error = f"unknown tool {name!r}: available tools are {listed}; {_how_to_call(known_tools, primary_tool)}"
        return Action(kind="malformed", tool=name, error=error), used
    return Action(kind="call", tool=name, argument=_unquote(argument)), used


def _how_to_call(known_tools: set[str] | None, primary_tool: str | None = None) -> str:
    if not known_tools:
        return "there are no tools here, so finish with `ANSWER: ...`"
    example = primary_tool if primary_tool in known_tools else sorted(known_tools)[0]
    return f"write for example `CALL {example}: ...` or finish with `ANSWER: ...`"


def _undecorate_name(rest: str) -> str:
    """Drop markdown around the tool name (`calculator`: or **calculator**:), keeping the input as written."""
    cut = min((i for i in (rest.find(":"), rest.find("(")) if i >= 0), default=len(rest))
    return re.sub(r"[*`]", "", rest[:cut]).strip() + rest[cut:]


def _answer_text(first: str, following: list[str]) -> tuple[str, int]:
    """The answer, and how many of the following lines it took."""
    text = first.strip()
    if not text and following and _FENCE_OPEN.match(following[0]):
        return _fenced_block(following, keep_fence=True)
    if text.startswith("```"):
        return "\n".join([first.strip(), *following]).strip(), len(following)
    return text.strip("*_` ").strip(), 0


def _fenced_block(lines: list[str], keep_fence: bool = False) -> tuple[str, int]:
    """The block that ``lines`` opens, and how many lines it spans with its fences."""
    body: list[str] = []
    used = len(lines)
    for offset, line in enumerate(lines[1:], start=1):
        if _FENCE_OPEN.match(line):
            used = offset + 1
            break
        body.append(line)
    block = "\n".join(body)
    return (f"```python\n{block}\n```" if keep_fence else block), used


def _unquote(argument: str) -> str:
    if len(argument) >= 2 and argument[0] == argument[-1] and argument[0] in "'\"`":
        return argument[1:-1]
    return argument
