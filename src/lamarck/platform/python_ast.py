"""Parse Python source into ``ast`` trees safely from many threads at once.

CPython 3.11 keeps the AST constructor's recursion counter in per-interpreter state, so two threads
that build trees at the same moment can corrupt each other's count and one of them fails with
``SystemError: AST constructor recursion depth mismatch``. Rollouts run episodes in threads and their
tools, verifiers and skill checks all parse code, so every parse in the package goes through one lock.
"""

from __future__ import annotations

import ast
import threading
from typing import Any

_PARSE_LOCK = threading.Lock()


def parse_module(source: str) -> ast.Module:
    """``ast.parse(source)`` under the package-wide parse lock."""
    with _PARSE_LOCK:
        return ast.parse(source)


def parse_expression(source: str) -> ast.Expression:
    """``ast.parse(source, mode="eval")`` under the package-wide parse lock."""
    with _PARSE_LOCK:
        return ast.parse(source, mode="eval")


def literal_value(text: str) -> Any:
    """``ast.literal_eval(text)``, whose parse takes the same lock; raises what it raises."""
    return ast.literal_eval(parse_expression(text.lstrip(" \t")))
