"""Pure checks on skill code: parsing, signatures, normalisation, and how a text argument becomes a call."""

from __future__ import annotations

import pytest

from lamarck.skills_library.skill import (
    SkillError,
    analyse,
    call_expression,
    code_digest,
    format_result,
    parse_argument,
)
from lamarck.skills_library.source_file import candidate_from_source


def test_analyse_gives_signature_and_docstring() -> None:
    info = analyse('import math\n\ndef f(a: int, b: float = 2.0) -> float:\n    """Add."""\n    return a + b\n', "f")
    assert info.signature == "f(a: int, b: float=2.0) -> float"
    assert info.description == "Add." and info.required == 1


@pytest.mark.parametrize(
    ("code", "reason"),
    [
        ("def f(:\n", "syntax error at line 1"),
        ("def g():\n    return 1\n", "does not define a top-level function 'f'"),
        ("def f():\n    return 1\ndef f():\n    return 2\n", "defines 'f' 2 times"),
        ("def f():\n    return 1\nprint(f())\n", "only imports, definitions and assignments"),
        ("def f(*args):\n    return 1\n", "*args"),
    ],
)
def test_analyse_rejects_with_one_line(code: str, reason: str) -> None:
    with pytest.raises(SkillError, match=None) as caught:
        analyse(code, "f")
    assert reason in str(caught.value) and "\n" not in str(caught.value)


def test_same_code_modulo_comments_and_docstrings() -> None:
    a = "def f(x):\n    # double it\n    return x * 2\n"
    b = 'def f(x):\n    """Double."""\n    return x*2\n'
    assert code_digest(a) == code_digest(b)
    assert code_digest(a) != code_digest("def f(x):\n    return x * 3\n")


def test_argument_conventions() -> None:
    text = analyse("def f(s: str):\n    return s\n", "f")
    assert parse_argument("123", text) == (["123"], {})
    anything = analyse("def f(x):\n    return x\n", "f")
    assert parse_argument("10", anything) == ([10], {})
    assert parse_argument("[1, 2]", anything) == ([[1, 2]], {})
    assert parse_argument("hello world", anything) == (["hello world"], {})
    two = analyse("def f(a, b):\n    return a\n", "f")
    assert parse_argument("10, 'km'", two) == ([10, "km"], {})
    assert parse_argument("[1, 2]", two) == ([1, 2], {})
    assert parse_argument('{"a": 1, "b": 2}', two) == ([], {"a": 1, "b": 2})
    with pytest.raises(SkillError, match="takes several arguments"):
        parse_argument("just words", two)
    assert call_expression("f", [1, "x"], {"b": [2]}) == "f(1, 'x', b=[2])"
    assert format_result("text") == "text" and format_result([1]) == "[1]"


def test_source_file_with_tests_string_or_test_functions() -> None:
    with_string = 'def inc(x):\n    return x + 1\n\ntests = """\nassert inc(1) == 2\n"""\n'
    candidate = candidate_from_source(with_string)
    assert candidate.name == "inc" and "tests =" not in candidate.code and "assert inc(1) == 2" in candidate.tests
    with_functions = "def inc(x):\n    return x + 1\n\n\ndef test_inc():\n    assert inc(1) == 2\n"
    candidate = candidate_from_source(with_functions)
    assert "test_inc" not in candidate.code and candidate.tests.rstrip().endswith("test_inc()")
    with pytest.raises(SkillError, match="exactly one skill function"):
        candidate_from_source("def a():\n    pass\n\ndef b():\n    pass\n")
