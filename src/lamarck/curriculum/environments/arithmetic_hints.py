"""Teacher hints for arithmetic: a glossary of the training families' phrasings, and partial reference solutions.

Both are plain text for the caller to append to a task; the student never sees them.
"""

from __future__ import annotations

import ast
import math
from collections.abc import Callable, Iterable

from lamarck.curriculum.environment import TaskSpec
from lamarck.curriculum.environments.arithmetic_families import OPS, Family
from lamarck.platform.python_ast import parse_expression

_OP_NAMES = {
    "add": "add (+)",
    "sub": "subtract (-)",
    "mul": "multiply (*)",
    "div": "whole-number division, dropping leftovers (//)",
    "mod": "what is left over after making full groups (%)",
}
_SYMBOLS: dict[type[ast.operator], str] = {
    ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/", ast.FloorDiv: "//", ast.Mod: "%", ast.Pow: "**",
}  # fmt: skip
_STEP_OPS: dict[type[ast.operator], Callable[[int, int], int]] = {
    ast.Add: lambda a, b: a + b, ast.Sub: lambda a, b: a - b, ast.Mult: lambda a, b: a * b,
    ast.FloorDiv: lambda a, b: a // b, ast.Mod: lambda a, b: a % b,
}  # fmt: skip
CALL_EXAMPLE = "CALL calculator: (16 - 2) + 12"
MAX_CUES_PER_OP = 8  # the glossary goes into a small model's prompt: keep it short


def glossary(families: Iterable[Family]) -> str:
    """General help: which phrasings mean which operation (N, A, B stand for numbers) and how to use the tool."""
    families = tuple(families)
    cues: dict[str, list[str]] = {op: [] for op in OPS}
    for op in OPS:
        per_family = [list(family.cues.get(op, ())) for family in families]
        for rank in range(max(map(len, per_family), default=0)):
            for phrases in per_family:
                if rank < len(phrases) and phrases[rank] not in cues[op] and len(cues[op]) < MAX_CUES_PER_OP:
                    cues[op].append(phrases[rank])
    lines = ["How the words of these problems map to operations (N, A and B stand for numbers in the problem):"]
    lines += [f"- {_OP_NAMES[op]}: " + "; ".join(cues[op]) for op in OPS if cues[op]]
    lines += [
        "The first amount is where you start; each later event changes the current amount, in the order told.",
        "Numbers about something else (ages, minutes, sizes, counts of windows) do not matter: leave them out.",
        f"Put the whole computation in one calculator call, e.g. `{CALL_EXAMPLE}`, then answer with its result.",
    ]
    return "\n".join(lines)


def solution_hint(task: TaskSpec, share: float) -> str | None:
    """Part of the reference expression: the first ceil(share * steps) steps, or with share 1.0 all of it."""
    if not 0.0 < share <= 1.0:
        raise ValueError(f"share must be in (0, 1], got {share}")
    expression = str(task.reference.get("expression") or "").strip()
    if not expression:
        return None
    if share >= 1.0:  # the call itself: a small model told "the value of X" tends to state a number, not compute it
        # The call ends the hint: with " - then finish ..." after it, the model copied that tail into the call
        # (`CALL calculator: 3 - 1 - then finish with the answer`), and the calculator refused it.
        return (
            f"The answer is the value of {expression}. Compute it with the tool, then finish with ANSWER: and "
            f"the number the tool returns: CALL calculator: {expression}"
        )
    try:
        root = parse_expression(expression).body
    except SyntaxError:
        return None
    steps = _count_ops(root)
    wanted = min(math.ceil(share * steps), steps - 1)
    part = _first_steps(root, wanted) if wanted > 0 else None
    if part is None:
        first = _leftmost_number(root)
        return f"Start with {first}; the problem needs {steps} operation{'s' if steps != 1 else ''} on it."
    return (
        f"Start with ({_render(part)}), then continue with the remaining steps, all in one calculator call "
        f"that begins CALL calculator: ({_render(part)})"
    )


def solution_steps(expression: str) -> list[tuple[str, int]] | None:
    """The expression as a chain of single operations in evaluation order: (call, its value) per operation,
    where an inner operation's value stands in for it. None when it does not parse to whole-number steps."""
    try:
        root = parse_expression(expression).body
    except SyntaxError:
        return None
    chain: list[tuple[str, int]] = []

    def value(node: ast.expr) -> int:
        if isinstance(node, ast.Constant) and type(node.value) is int:
            return node.value
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
            return -value(node.operand)
        if isinstance(node, ast.BinOp) and type(node.op) in _STEP_OPS:
            left, right = value(node.left), value(node.right)
            result = _STEP_OPS[type(node.op)](left, right)
            chain.append((f"{left} {_SYMBOLS[type(node.op)]} {right}", result))
            return result
        raise ValueError(f"not a whole-number step: {ast.unparse(node)}")

    try:
        value(root)
    except (ValueError, ZeroDivisionError, OverflowError):
        return None
    return chain or None


def expression_key(expression: str) -> str:
    """A canonical form of an expression: spacing and redundant parentheses do not matter."""
    try:
        return ast.unparse(parse_expression(expression.strip()))
    except SyntaxError:
        return "".join(expression.split())


def _count_ops(node: ast.AST) -> int:
    return sum(1 for child in ast.walk(node) if isinstance(child, ast.BinOp))


def _first_steps(root: ast.expr, wanted: int) -> ast.BinOp | None:
    """The largest proper sub-computation with at most ``wanted`` operations, leftmost first (evaluated first)."""
    best: ast.BinOp | None = None
    best_ops = 0
    stack: list[ast.expr] = [root]
    order: list[ast.BinOp] = []
    while stack:
        node = stack.pop()
        if isinstance(node, ast.BinOp):
            order.append(node)
            stack.extend([node.right, node.left])
        elif isinstance(node, ast.UnaryOp):
            stack.append(node.operand)
    for node in order:
        ops = _count_ops(node)
        if node is not root and best_ops < ops <= wanted:
            best, best_ops = node, ops
    return best


def _render(node: ast.expr) -> str:
    if isinstance(node, ast.BinOp) and type(node.op) in _SYMBOLS:

        def wrap(child: ast.expr) -> str:
            return f"({_render(child)})" if isinstance(child, ast.BinOp) else _render(child)

        return f"{wrap(node.left)} {_SYMBOLS[type(node.op)]} {wrap(node.right)}"
    return ast.unparse(node)


def _leftmost_number(node: ast.expr) -> str:
    while isinstance(node, ast.BinOp):
        node = node.left
    return ast.unparse(node)
