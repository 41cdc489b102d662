"""A safe calculator: parses with ``ast`` and evaluates only numbers and arithmetic operators. Never ``eval``."""

from __future__ import annotations

import ast
import math
import operator
from collections.abc import Callable

from lamarck.platform.python_ast import parse_expression

MAX_EXPRESSION_CHARS = 300
MAX_EXPONENT = 64
MAX_MAGNITUDE = 10**60
MAX_NODES = 200


class CalculatorError(ValueError):
    """An expression the calculator refuses or cannot evaluate; the message says why in one line."""


Number = int | float

_BINARY: dict[type[ast.operator], Callable[[Number, Number], Number]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
}
_UNARY: dict[type[ast.unaryop], Callable[[Number], Number]] = {ast.UAdd: operator.pos, ast.USub: operator.neg}


def calculate(expression: str) -> Number:
    text = expression.strip().replace("×", "*").replace("÷", "/").replace("^", "**")
    if not text:
        raise CalculatorError("empty expression")
    if len(text) > MAX_EXPRESSION_CHARS:
        raise CalculatorError(f"expression longer than {MAX_EXPRESSION_CHARS} characters")
    try:
        tree = parse_expression(text)
    except SyntaxError as exc:
        raise CalculatorError(f"not an arithmetic expression: {exc.msg}") from None
    if sum(1 for _ in ast.walk(tree)) > MAX_NODES:
        raise CalculatorError(f"expression has more than {MAX_NODES} parts")
    return _eval(tree.body)


def _eval(node: ast.AST) -> Number:
    if isinstance(node, ast.Constant):
        if isinstance(node.value, bool) or not isinstance(node.value, int | float):
            raise CalculatorError(f"only numbers are allowed, not {node.value!r}")
        return _bounded(node.value)
    if isinstance(node, ast.UnaryOp) and type(node.op) in _UNARY:
        return _UNARY[type(node.op)](_eval(node.operand))
    if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
        left, right = _eval(node.left), _eval(node.right)
        if isinstance(node.op, ast.Pow):
            _check_power(left, right)
        try:
            return _bounded(_BINARY[type(node.op)](left, right))
        except ZeroDivisionError:
            raise CalculatorError("division by zero") from None
        except OverflowError:
            raise CalculatorError("result too large") from None
    raise CalculatorError(f"{type(node).__name__} is not allowed: use numbers, + - * / // % ** and parentheses")


def _check_power(base: Number, exponent: Number) -> None:
    if abs(exponent) > MAX_EXPONENT:
        raise CalculatorError(f"exponent {exponent} is larger than {MAX_EXPONENT}")
    if base == 0 and exponent < 0:
        raise CalculatorError("division by zero")
    if abs(base) > 1 and exponent > 0 and exponent * math.log10(abs(base)) > math.log10(MAX_MAGNITUDE):
        raise CalculatorError("result too large")


def _bounded(value: Number) -> Number:
    if isinstance(value, complex):
        raise CalculatorError("result is not a real number")
    if isinstance(value, float) and not math.isfinite(value):
        raise CalculatorError("result is not finite")
    if abs(value) > MAX_MAGNITUDE:
        raise CalculatorError("result too large")
    return value


def format_number(value: Number) -> str:
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    if isinstance(value, float):
        return f"{value:.10g}"
    return str(value)


# No numbers in the advice: a small model copies an example expression from the observation into its next call.
HOW_TO_CALL = "write only the expression after `CALL calculator:`, without `=` and a guess"


def calculator_tool(expression: str) -> str:
    """The tool callable: the result as text, or ``error: ...`` that says how to fix the call.

    A model often writes ``14 + 13 = 27``: the expression and its own guess. The calculator evaluates the part
    before ``=`` and returns only its value. It used to add a note saying what it ignored and how to call it; the
    135M model copied that note into its next call or answer and looped until its step budget ran out: on 24 level
    1-2 tasks x 2 samples, 7 of 48 attempts passed with the note (20 out of steps) and 19 without it (3 out of steps).
    """
    text = expression.strip().strip("`").strip()
    left, equals, right = text.partition("=")
    if equals and left.strip() and not right.startswith("=") and not left.endswith(("<", ">", "!")):
        try:
            value = format_number(calculate(left))
        except CalculatorError as exc:
            return f"error: {exc}; {HOW_TO_CALL}"
        return value
    try:
        return format_number(calculate(text))
    except CalculatorError as exc:
        return f"error: {exc}; {HOW_TO_CALL}"
