"""What a skill is, and the pure (no I/O) work on its code: checking it, its signature, and calling conventions.

A skill is one named Python function (plus any helpers, imports and constants it needs) with assert-based tests.

How the executor's one-line argument (``CALL name: argument``) becomes a Python call (``parse_argument``):

* no parameters: the argument is ignored;
* one parameter annotated ``str`` (or unannotated and the text is not a Python literal): the raw text;
* one parameter otherwise: ``ast.literal_eval(argument)`` (``10`` -> 10, ``[1, 2]`` -> list), else the raw text;
* several parameters: a JSON/Python object (keyword arguments), a list (positional arguments), or a bare
  comma-separated tuple ``10, "km"``; anything else is an error naming the signature.

A result is reported as text: a ``str`` as itself, anything else as its ``repr``.
"""

from __future__ import annotations

import ast
import hashlib
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field

from lamarck.memory.base import RetrievalQuery
from lamarck.platform.python_ast import literal_value, parse_module

ProvenanceKind = Literal["builtin", "plugin", "induced", "user"]
AddStatus = Literal["added", "new_version", "unchanged", "rejected"]
MAX_NAME = 200
_ALLOWED_TOP = (
    ast.Import,
    ast.ImportFrom,
    ast.FunctionDef,
    ast.AsyncFunctionDef,
    ast.ClassDef,
    ast.Assign,
    ast.AnnAssign,
)


class SkillError(ValueError):
    """A skill definition that cannot be used; the message is one line."""


class SkillCandidate(BaseModel):
    """A proposed skill: what ``SkillLibrary.add`` verifies. ``package`` is the distribution for plug-ins."""

    model_config = ConfigDict(frozen=True)

    name: str = Field(min_length=1, max_length=MAX_NAME)
    code: str
    tests: str = ""
    provenance: ProvenanceKind = "user"
    package: str | None = None
    source_episode_ids: list[str] = Field(default_factory=list)
    description: str = ""  # overrides the docstring's first line in retrieval and listings
    environment: str | None = None  # where it was learned (induction); a small retrieval bonus there

    @property
    def provenance_label(self) -> str:
        return provenance_label(self.provenance, self.package)


class AddResult(BaseModel):
    status: AddStatus
    name: str
    version: int | None = None
    reason: str = ""

    @property
    def accepted(self) -> bool:
        return self.status != "rejected"


class SkillVersionView(BaseModel):
    version: int
    signature: str
    docstring: str
    code: str
    tests: str
    code_digest: str
    source_episode_ids: list[str] = Field(default_factory=list)
    package: str | None = None


class SkillView(BaseModel):
    """A skill as callers see it: the current version's code plus statistics."""

    name: str
    provenance: str  # "builtin", "plugin:<package>", "induced", "user"
    status: str  # "active" or "deprecated"
    version: int
    signature: str
    description: str
    code: str
    tests: str
    times_used: int
    times_succeeded: int
    source_episode_ids: list[str] = Field(default_factory=list)
    versions: list[SkillVersionView] = Field(default_factory=list)

    @property
    def success_rate(self) -> float | None:
        return self.times_succeeded / self.times_used if self.times_used else None


@dataclass(frozen=True)
class Parameter:
    name: str
    annotation: str | None
    has_default: bool


@dataclass(frozen=True)
class FunctionInfo:
    name: str
    signature: str  # "name(a: int, b: int) -> int"
    docstring: str
    parameters: tuple[Parameter, ...]

    @property
    def description(self) -> str:
        return self.docstring.strip().splitlines()[0] if self.docstring.strip() else ""

    @property
    def required(self) -> int:
        return sum(1 for p in self.parameters if not p.has_default)


def provenance_label(kind: str, package: str | None) -> str:
    return f"plugin:{package}" if kind == "plugin" and package else kind


def analyse(code: str, name: str) -> FunctionInfo:
    """Check that ``code`` parses and defines exactly one top-level function ``name``; return its signature."""
    if not name.isidentifier():
        raise SkillError(f"skill name {name!r} is not a Python identifier")
    try:
        tree = parse_module(code)
    except SyntaxError as exc:
        raise SkillError(f"syntax error at line {exc.lineno}: {exc.msg}") from None
    found = [node for node in tree.body if isinstance(node, ast.FunctionDef) and node.name == name]
    if not found:
        raise SkillError(f"the code does not define a top-level function {name!r}")
    if len(found) > 1:
        raise SkillError(f"the code defines {name!r} {len(found)} times")
    for node in tree.body:
        if _is_docstring(node):
            continue
        if not isinstance(node, _ALLOWED_TOP):
            raise SkillError(
                f"line {node.lineno}: only imports, definitions and assignments may run at import time, "
                f"not {type(node).__name__}"
            )
    return _function_info(found[0])


def _function_info(node: ast.FunctionDef) -> FunctionInfo:
    args = node.args
    if args.vararg or args.kwarg or args.posonlyargs:
        raise SkillError(f"{node.name}: *args, **kwargs and positional-only parameters are not supported")
    positional = list(args.args)
    defaults = [False] * (len(positional) - len(args.defaults)) + [True] * len(args.defaults)
    params = [
        Parameter(a.arg, ast.unparse(a.annotation) if a.annotation else None, d)
        for a, d in zip(positional, defaults, strict=True)
    ]
    params += [
        Parameter(a.arg, ast.unparse(a.annotation) if a.annotation else None, d is not None)
        for a, d in zip(args.kwonlyargs, args.kw_defaults, strict=True)
    ]
    signature = f"{node.name}({ast.unparse(node.args)})"
    if node.returns is not None:
        signature += f" -> {ast.unparse(node.returns)}"
    return FunctionInfo(node.name, signature, ast.get_docstring(node) or "", tuple(params))


def _is_docstring(node: ast.stmt) -> bool:
    return isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str)


def normalise_code(code: str) -> str:
    """The code without comments, docstrings and formatting differences (for "same code" checks)."""
    tree = parse_module(code)
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if isinstance(body, list) and body and _is_docstring(body[0]):
            node.body = body[1:] or [ast.Pass()]  # type: ignore[attr-defined]
    return ast.unparse(tree)


def code_digest(code: str) -> str:
    return hashlib.sha256(normalise_code(code).encode("utf-8")).hexdigest()


def check_tests(tests: str) -> None:
    if not tests.strip():
        raise SkillError("no tests: a skill needs assert-based tests")
    try:
        parse_module(tests)
    except SyntaxError as exc:
        raise SkillError(f"syntax error in the tests at line {exc.lineno}: {exc.msg}") from None


def parse_argument(argument: str, info: FunctionInfo) -> tuple[list[Any], dict[str, Any]]:
    """The call's (args, kwargs) for the executor's text argument; see the module docstring."""
    params = info.parameters
    text = argument.strip()
    if not params:
        return [], {}
    if len(params) == 1 or info.required <= 1 and not _looks_structured(text):
        first = params[0]
        if first.annotation in ("str", "'str'"):
            return [argument], {}
        value = _literal(text)
        return [argument if value is _MISSING else value], {}
    value = _literal(text)
    if value is _MISSING:
        value = _literal(f"({text},)")
    if isinstance(value, dict) and all(isinstance(key, str) for key in value):
        return [], dict(value)
    if isinstance(value, list | tuple):
        return list(value), {}
    raise SkillError(f"{info.signature} takes several arguments: write them as a list [..] or an object {{..}}")


def _looks_structured(text: str) -> bool:
    return text[:1] in "[{(" or "," in text


_MISSING = object()


def _literal(text: str) -> Any:
    try:
        return literal_value(text)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        pass
    try:
        return json.loads(text)
    except (ValueError, RecursionError):
        return _MISSING


def call_expression(name: str, args: list[Any], kwargs: dict[str, Any]) -> str:
    """``name(args...)`` as Python source; every value must survive repr -> literal_eval."""
    parts = [_source(value) for value in args] + [f"{key}={_source(value)}" for key, value in kwargs.items()]
    return f"{name}({', '.join(parts)})"


def _source(value: Any) -> str:
    text = repr(value)
    try:
        if literal_value(text) == value:
            return text
    except (ValueError, SyntaxError):
        pass
    raise SkillError(f"argument {text[:60]} cannot be passed to a sandboxed skill")


def format_result(value: Any) -> str:
    return value if isinstance(value, str) else repr(value)


@dataclass(frozen=True)
class SkillHandle:
    """A skill offered to the executor; ``call`` runs it (in the sandbox unless it is a safe built-in)."""

    name: str
    signature: str
    description: str
    call: Callable[[str], str]


class SkillSource(Protocol):
    """Where the executor gets skills for a task (``SkillLibrary`` is one)."""

    def retrieve(self, query: str, *, environment: str | None, k: int) -> list[SkillHandle]: ...


@runtime_checkable
class BatchSkillSource(SkillSource, Protocol):
    """A skill source that answers many tasks at once, embedding their prompts in one call."""

    def retrieve_many(self, queries: Sequence[RetrievalQuery]) -> list[list[SkillHandle]]: ...
