from __future__ import annotations

import pytest

from lamarck.curriculum.calculator import CalculatorError, calculate, calculator_tool


@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        ("1 + 2", 3),
        ("(12 + 7) * 3 // 4", 14),
        ("17 % 5", 2),
        ("2 ** 10", 1024),
        ("-3 * -(4)", 12),
        ("7 / 2", 3.5),
        ("1,000" if False else "1000 - 1", 999),
        ("3 × 4", 12),
        ("2^3", 8),
    ],
)
def test_calculates(expression, expected):
    assert calculate(expression) == expected


@pytest.mark.parametrize(
    "expression",
    [
        "__import__('os').system('id')",
        "x + 1",
        "abs(-3)",
        "(1).real",
        "[1, 2]",
        "'a' * 3",
        "lambda: 1",
        "9 ** 9 ** 9",
        "10 ** 1000",
        "2 ** 65",
        "True + 1",
        "1 if 1 else 2",
        "1; 2",
        "",
        "a.b",
        "(-8) ** 0.5",
        "1" * 400,
    ],
)
def test_rejects_unsafe_or_huge(expression):
    with pytest.raises(CalculatorError):
        calculate(expression)


def test_tool_reports_errors_as_text():
    assert calculator_tool("6 * 7") == "42"
    assert calculator_tool("8 / 2") == "4"
    assert calculator_tool("1 / 0").startswith("error: division by zero; write only the expression")
    assert calculator_tool("open('x')").startswith("error: Call is not allowed")


def test_calculator_evaluates_the_expression_before_a_guess_and_returns_only_its_value() -> None:
    assert calculator_tool("14 + 13 = 21") == "27"  # a note about the guess was copied by the model, and it looped
    assert not any(ch.isdigit() for ch in calculator_tool("1 / 0").split(";", 1)[1])  # no example to copy
    assert calculator_tool("`(16 - 2) + 12`") == "26"
    assert calculator_tool("3 == 3").startswith("error: ")
    assert calculator_tool("= 5").startswith("error: ")
    bad = calculator_tool("sells 5 apples")
    assert bad.startswith("error: not an arithmetic expression") and "write only the expression" in bad
