from __future__ import annotations

import pytest

from lamarck.agents.actions import parse_action

TOOLS = {"calculator", "reverse"}


@pytest.mark.parametrize(
    ("reply", "tool", "argument"),
    [
        ("CALL calculator: 12 * 7", "calculator", "12 * 7"),
        ("I should multiply.\nCALL calculator: 12*7\nRESULT: 84", "calculator", "12*7"),
        ("call calculator: (3+4)", "calculator", "(3+4)"),
        ("**CALL** calculator: 5-2", "calculator", "5-2"),
        ("CALL calculator(2 + 2)", "calculator", "2 + 2"),
        ("Action: reverse: 'hello'", "reverse", "hello"),
        ("CALL `calculator`: 9/3", "calculator", "9/3"),
    ],
)
def test_tool_calls_are_parsed_robustly(reply: str, tool: str, argument: str) -> None:
    action = parse_action(reply, known_tools=TOOLS)
    assert (action.kind, action.tool, action.argument) == ("call", tool, argument)


@pytest.mark.parametrize(
    ("reply", "answer"),
    [
        ("ANSWER: 84", "84"),
        ("Let me think.\nThe total is 84.\nAnswer: 84", "84"),
        ("FINAL ANSWER: **olleh**", "olleh"),
        ("answer = 7", "7"),
    ],
)
def test_answers_are_extracted(reply: str, answer: str) -> None:
    action = parse_action(reply, known_tools=TOOLS)
    assert (action.kind, action.answer) == ("answer", answer)


def test_fenced_code_answer_is_kept_whole() -> None:
    reply = "ANSWER:\n```python\ndef f(x):\n    return x + 1\n```\n"
    action = parse_action(reply)
    assert action.kind == "answer"
    assert action.answer == "```python\ndef f(x):\n    return x + 1\n```"


def test_the_first_action_wins() -> None:
    action = parse_action("CALL calculator: 1+1\nANSWER: 2", known_tools=TOOLS)
    assert action.kind == "call"


@pytest.mark.parametrize(
    ("reply", "message"),
    [
        ("", "empty reply"),
        ("CALL: ", "without a tool name"),
        ("CALL python: print(1)", "unknown tool 'python': available tools are calculator, reverse; write for example"),
    ],
)
def test_malformed_replies_explain_what_was_wrong(reply: str, message: str) -> None:
    action = parse_action(reply, known_tools=TOOLS)
    assert action.kind == "malformed" and message in action.error


def test_underscores_in_tool_names_survive() -> None:
    action = parse_action("CALL **run_python**: print(2)", known_tools={"run_python"})
    assert (action.kind, action.tool, action.argument) == ("call", "run_python", "print(2)")


def test_a_reply_without_an_action_is_the_answer() -> None:
    action = parse_action("She has 8 + 6 = 14 stickers now.", known_tools=TOOLS)
    assert (action.kind, action.answer, action.implicit) == ("answer", "She has 8 + 6 = 14 stickers now.", True)


def test_a_call_without_a_tool_name_goes_to_the_environments_tool_even_beside_skills() -> None:
    """The teacher's prompt lists skills too; `CALL: 38 - 6 + 1` must still reach the calculator, as for the
    student, whose only tool it is (rollouts once failed on `unknown tool '38'` until their steps ran out)."""
    tools = {"calculate", "calculator", "reverse_words", "word_count"}
    for reply, argument in [("CALL: 38 - 6 + 1", "38 - 6 + 1"), ("CALL: (6 - 4) + 9 = 11", "(6 - 4) + 9 = 11")]:
        action = parse_action(reply, known_tools=tools, primary_tool="calculator")
        assert (action.kind, action.tool, action.argument) == ("call", "calculator", argument)
    named = parse_action("CALL tool: 19 + 6", known_tools=tools, primary_tool="calculator")
    assert named.kind == "malformed" and "unknown tool 'tool'" in named.error
    assert "write for example `CALL calculator: ...`" in named.error  # not `calculate`, a skill the student lacks
    assert parse_action("CALL: 38 - 6", known_tools=tools).kind == "malformed"  # no environment tool to send it to


def test_a_call_without_a_tool_name_goes_to_the_only_tool() -> None:
    action = parse_action("CALL: 6 + 8", known_tools={"calculator"})
    assert (action.kind, action.tool, action.argument) == ("call", "calculator", "6 + 8")


def test_text_ends_with_the_first_action() -> None:
    rambling = "CALL calculator: 20 + 10 = 30\nThe answer is 30.\n\nCALCULUS: 20 + 10 = 30"
    assert parse_action(rambling).text == "CALL calculator: 20 + 10 = 30"
    thought = "First add them.\nANSWER: 30\nThe answer is 30."
    assert parse_action(thought).text == "First add them.\nANSWER: 30"
    fenced = "CALL python:\n```\nprint(2)\n```\nand then more"
    assert parse_action(fenced).text == "CALL python:\n```\nprint(2)\n```"
    code = "ANSWER:\n```python\ndef f():\n    return 1\n```\nDone."
    assert parse_action(code).text == "ANSWER:\n```python\ndef f():\n    return 1\n```"
    assert parse_action("just 30, I think").text == "just 30, I think"
