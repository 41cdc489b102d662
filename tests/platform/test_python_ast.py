"""Parsing from many threads at once: the race CPython 3.11's AST constructor has, and the lock that closes it."""

from __future__ import annotations

import ast
import gc
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from lamarck.platform.python_ast import literal_value, parse_expression, parse_module

PACKAGE = Path(__file__).resolve().parents[2] / "src" / "lamarck"
SOURCE = "\n".join(
    f"def f{i}(x):\n    return [(a, b) for a in range(x) for b in (a + 1, a * 2, {{'k': a}})]" for i in range(30)
)


@pytest.fixture
def thread_switches_inside_parses() -> Iterator[None]:
    """A garbage collection runs every few allocations and its callback sleeps, which hands the GIL to another
    thread while a tree is half built: the interleaving that made rollout threads fail with ``SystemError: AST
    constructor recursion depth mismatch`` when unguarded."""
    threshold = gc.get_threshold()

    def yield_gil(phase: str, info: dict[str, int]) -> None:
        time.sleep(0.0001)

    gc.callbacks.append(yield_gil)
    gc.set_threshold(50)
    try:
        yield
    finally:
        gc.callbacks.remove(yield_gil)
        gc.set_threshold(*threshold)


def _in_threads(parse: Callable[[], object], threads: int = 4, rounds: int = 8) -> list[BaseException]:
    errors: list[BaseException] = []

    def work() -> None:
        for _ in range(rounds):
            try:
                parse()
            except BaseException as error:  # noqa: BLE001 - the test reports whatever a parse raised
                errors.append(error)

    workers = [threading.Thread(target=work) for _ in range(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    return errors


@pytest.mark.usefixtures("thread_switches_inside_parses")
def test_modules_parse_from_many_threads_without_corrupting_each_other() -> None:
    assert _in_threads(lambda: parse_module(SOURCE)) == []
    assert len(parse_module(SOURCE).body) == 30


@pytest.mark.usefixtures("thread_switches_inside_parses")
def test_expressions_and_literals_parse_from_many_threads() -> None:
    expression = " + ".join(f"({i} * {i + 1})" for i in range(60))
    literal = repr([{"k": i, "v": (i, str(i))} for i in range(60)])
    assert _in_threads(lambda: (parse_expression(expression), literal_value(literal))) == []
    assert literal_value("  [1, (2, 'x')]") == [1, (2, "x")]


def test_literal_value_refuses_what_literal_eval_refuses() -> None:
    with pytest.raises(ValueError):
        literal_value("__import__('os')")
    with pytest.raises(SyntaxError):
        literal_value("[1,")


def test_the_package_parses_python_only_through_the_lock() -> None:
    direct = {
        str(path.relative_to(PACKAGE))
        for path in PACKAGE.rglob("*.py")
        if path.name != "python_ast.py"
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.Attribute)
        and isinstance(node.value, ast.Name)
        and node.value.id == "ast"
        and node.attr in {"parse", "literal_eval"}
    }
    assert direct == set(), "parse with lamarck.platform.python_ast, which serialises CPython's AST constructor"
