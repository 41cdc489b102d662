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


_LOCKED_PARSE = "from lamarck.platform.python_ast import parse_expression"
_SANDBOX_PARSE = """\
def parse_expression(source: str) -> ast.Expression:
    return ast.parse(source, mode="eval")  # the sandbox runs one thread: no lock to take"""


def code() -> str:
    """The calculator module's source, standalone: without its ``__future__`` import, so it composes with other
    code, and parsing without the package's thread lock, since the sandbox has no ``lamarck`` to import."""
    source = inspect.getsource(_calculator)
    if _LOCKED_PARSE not in source:
        raise RuntimeError(f"the calculator no longer imports its parser as {_LOCKED_PARSE!r}: update code()")
    source = source.replace(_LOCKED_PARSE, _SANDBOX_PARSE)
    return "\n".join(line for line in source.splitlines() if not line.startswith("from __future__")) + "\n"


host = _calculator.calculate
