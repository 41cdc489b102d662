"""The ``calculate`` skill: the curriculum's safe calculator (``ast`` only, never ``eval``), as a skill."""

from __future__ import annotations

import inspect

from lamarck.curriculum import calculator as _calculator

DESCRIPTION = "Evaluate an arithmetic expression safely: numbers, + - * / // % ** and parentheses."

TESTS = """
assert calculate("2 + 3 * 4") == 14
assert calculate("(12 + 7) * 3 // 4") == 14
assert calculate("2 ^ 10") == 1024
for _bad in ("__import__('os').getcwd()", "1 / 0", "9 ** 9 ** 9", "[1] * 10", ""):
    try:
        calculate(_bad)
    except CalculatorError:
        pass
    else:
        raise AssertionError("calculate accepted " + repr(_bad))
"""


def code() -> str:
    """The calculator module's source without its ``__future__`` import, so it composes with other code."""
    source = inspect.getsource(_calculator)
    return "\n".join(line for line in source.splitlines() if not line.startswith("from __future__")) + "\n"


host = _calculator.calculate
