"""Skill induction: propose reusable functions from successful episodes. Nothing here adds to the library.

Two sources of candidates:

* code answers — the episode's answer holds a function (``python_functions`` and any task whose reference names a
  ``function_name``): the candidate is that function with its helpers and imports; the tests are the task's hidden
  tests (``reference["tests"]``, expressions such as ``_same(f(1), 2)``) turned into asserts;
* call chains — the episode called skills one after another, each on the previous one's result (``string_ops``,
  ``arithmetic`` with skills): the candidate composes those skills into one function (their code included), tested
  on the episode's own first input and final observation.

Each candidate is verified in the sandbox, then dropped if it duplicates an existing skill: the same normalised
code, the same behaviour on the candidate's tests, or an embedding very near an existing skill's. The critic
decides which of the returned candidates go through ``SkillLibrary.add``.
"""

from __future__ import annotations

import ast
import json
import logging
from collections.abc import Sequence
from dataclasses import dataclass

from lamarck.curriculum.environment import extract_code
from lamarck.platform.python_ast import literal_value, parse_expression, parse_module
from lamarck.platform.storage import repositories as repo
from lamarck.platform.storage.records import Episode, Task
from lamarck.skills_library.library import SkillLibrary
from lamarck.skills_library.retrieval import SKILLS_COLLECTION
from lamarck.skills_library.skill import (
    MAX_NAME,
    SkillCandidate,
    SkillError,
    SkillView,
    analyse,
    check_tests,
    code_digest,
    parse_argument,
)
from lamarck.skills_library.verify import run_tests, same_behaviour

log = logging.getLogger(__name__)

SUCCESS_OUTCOMES = frozenset({"passed", "success", "succeeded", "verified"})
TOOL_ALIASES = {"calculator": "calculate"}  # environment tools that have a skill with the same behaviour


@dataclass(frozen=True)
class InductionConfig:
    near_distance: float = 0.05  # cosine distance under which a candidate counts as an existing skill
    min_chain: int = 2  # a chain of one call is the skill itself
    max_candidates: int = 20


@dataclass(frozen=True)
class _Call:
    name: str
    argument: str
    observation: str


def is_successful(episode: Episode) -> bool:
    return episode.outcome in SUCCESS_OUTCOMES or (episode.reward is not None and episode.reward >= 1.0)


def induce_skills(
    episodes: Sequence[Episode], *, library: SkillLibrary, config: InductionConfig | None = None
) -> list[SkillCandidate]:
    """Verified, non-duplicate candidates from the successful ``episodes`` (provenance ``induced``)."""
    config = config or InductionConfig()
    existing = {view.name: view for view in library.list(include_deprecated=True)}
    proposed: list[SkillCandidate] = []
    for episode in episodes:
        if not is_successful(episode):
            continue
        with library.db.session() as session:
            task = repo.get_task(session, task_id=episode.task_id)
        for candidate in _from_code(episode, task) + _from_chain(episode, task, existing, config):
            proposed.append(_unclashed(candidate, existing))
    accepted: list[SkillCandidate] = []
    digests = {code_digest(view.code) for view in existing.values()}
    for candidate in proposed:
        if len(accepted) >= config.max_candidates:
            break
        reason = _duplicate(candidate, library, existing, digests, config)
        if reason is not None:
            log.info("induced %s dropped: %s", candidate.name, reason)
            continue
        run = run_tests(library.sandbox, candidate.code, candidate.tests)
        if not run.passed:
            log.info("induced %s dropped: %s", candidate.name, run.summary)
            continue
        digests.add(code_digest(candidate.code))
        accepted.append(candidate)
    return accepted


# code answers


def _from_code(episode: Episode, task: Task) -> list[SkillCandidate]:
    name = task.reference.get("function_name")
    if not isinstance(name, str) or not episode.answer:
        return []
    code = _definitions_only(extract_code(episode.answer))
    tests = "\n".join(_as_assert(test) for test in task.reference.get("tests") or [])
    try:
        analyse(code, name)
        check_tests(tests)
    except SkillError as exc:
        log.info("episode %s: no skill from its code: %s", episode.id, exc)
        return []
    return [
        SkillCandidate(
            name=name,
            code=code,
            tests=tests + "\n",
            provenance="induced",
            source_episode_ids=[episode.id],
            description=_describe(task.prompt),
            environment=task.environment,
        )
    ]


def _definitions_only(code: str) -> str:
    """The code's imports, functions, classes and assignments (a demo call or print at the end is dropped)."""
    try:
        tree = parse_module(code)
    except SyntaxError:
        return code
    keep = (ast.Import, ast.ImportFrom, ast.FunctionDef, ast.ClassDef, ast.Assign, ast.AnnAssign)
    tree.body = [node for node in tree.body if isinstance(node, keep)]
    return ast.unparse(tree) + "\n"


def _as_assert(test: str) -> str:
    """``_same(call, expected)`` (the curriculum's test form) -> ``assert call == expected``; else ``assert test``."""
    try:
        node = parse_expression(test).body
    except SyntaxError:
        return f"assert {test}"
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id == "_same"
        and len(node.args) == 2
    ):
        return f"assert {ast.unparse(node.args[0])} == {ast.unparse(node.args[1])}"
    return f"assert {test}"


def _describe(prompt: str) -> str:
    lines = [line.strip() for line in prompt.splitlines() if line.strip()]
    useful = [line for line in lines if not line.lower().startswith(("write a python function", "example"))]
    return " ".join(useful or lines)[:200]


# call chains


def _from_chain(
    episode: Episode, task: Task, existing: dict[str, SkillView], config: InductionConfig
) -> list[SkillCandidate]:
    chain = _longest_chain(_calls(episode), existing)
    if len(chain) < config.min_chain:
        return []
    views = [existing[TOOL_ALIASES.get(call.name, call.name)] for call in chain]
    first = analyse(views[0].code, views[0].name)
    try:
        args, kwargs = parse_argument(chain[0].argument, first)
    except SkillError:
        return []
    if kwargs or len(args) != 1 or len(first.parameters) != 1:
        return []
    last = analyse(views[-1].code, views[-1].name)
    expected: object = chain[-1].observation
    if not last.signature.endswith("-> str"):
        try:
            expected = literal_value(chain[-1].observation)
        except (ValueError, SyntaxError):
            pass
    names = [view.name for view in views]
    name = "_then_".join(names)[:MAX_NAME]
    param = first.parameters[0].name
    body = [f"def {name}({param}):", f'    """Apply {", then ".join(names)} in turn."""', f"    value = {param}"]
    body += [f"    value = {view.name}(value)" for view in views]
    body.append("    return value")
    helpers = list(dict.fromkeys(_without_future(view.code).rstrip() for view in views))
    code = "\n\n\n".join([*helpers, "\n".join(body)]) + "\n"
    tests = f"assert {name}({args[0]!r}) == {expected!r}\n"
    return [
        SkillCandidate(
            name=name,
            code=code,
            tests=tests,
            provenance="induced",
            source_episode_ids=[episode.id],
            environment=task.environment,
        )
    ]


def _without_future(code: str) -> str:
    """``from __future__`` must open a module, so it cannot survive concatenation; 3.11 needs none of it here."""
    return "\n".join(line for line in code.splitlines() if not line.startswith("from __future__"))


def _calls(episode: Episode) -> list[_Call]:
    """The trajectory's tool calls with their observations, in order."""
    pending: dict[str, tuple[str, str]] = {}
    calls: list[_Call] = []
    for step in episode.steps:
        for call in step.tool_calls or []:
            try:
                arguments = json.loads(call.get("arguments") or "{}")
            except (ValueError, TypeError):
                arguments = {}
            argument = arguments.get("input", "") if isinstance(arguments, dict) else ""
            pending[str(call.get("id"))] = (str(call.get("name")), str(argument))
        if step.role == "tool" and step.tool_call_id in pending:
            name, argument = pending.pop(step.tool_call_id)
            calls.append(_Call(name, argument, step.content or ""))
    return calls


def _longest_chain(calls: list[_Call], existing: dict[str, SkillView]) -> list[_Call]:
    best: list[_Call] = []
    current: list[_Call] = []
    for call in calls:
        known = TOOL_ALIASES.get(call.name, call.name) in existing and not call.observation.startswith("error:")
        if not known:
            current = []
        elif current and call.argument.strip() == current[-1].observation.strip():
            current.append(call)
        else:
            current = [call]
        if len(current) > len(best):
            best = list(current)
    return best


# dedupe


def _unclashed(candidate: SkillCandidate, existing: dict[str, SkillView]) -> SkillCandidate:
    """Rename a candidate whose name another provenance owns (``f`` -> ``f_2``).

    An induced namesake keeps the name: adding the candidate makes a new version of it.
    """
    name = candidate.name
    number = 1
    while name in existing and existing[name].provenance != "induced":
        number += 1
        name = f"{candidate.name}_{number}"
    if name == candidate.name:
        return candidate
    code = _rename(candidate.code, candidate.name, name)
    tests = _rename(candidate.tests, candidate.name, name)
    return candidate.model_copy(update={"name": name, "code": code, "tests": tests})


def _rename(source: str, old: str, new: str) -> str:
    tree = parse_module(source)
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef) and node.name == old:
            node.name = new
        elif isinstance(node, ast.Name) and node.id == old:
            node.id = new
    return ast.unparse(tree) + "\n"


def _duplicate(
    candidate: SkillCandidate,
    library: SkillLibrary,
    existing: dict[str, SkillView],
    digests: set[str],
    config: InductionConfig,
) -> str | None:
    try:
        digest = code_digest(candidate.code)
        info = analyse(candidate.code, candidate.name)
    except (SkillError, SyntaxError) as exc:
        return str(exc)
    if digest in digests:
        return "same code as an existing skill"
    same_arity = [(view.name, view.code) for view in existing.values() if _arity(view) == info.required]
    twins = same_behaviour(library.sandbox, candidate.name, candidate.tests, same_arity)
    if twins:
        return f"behaves like {twins[0]} on its tests"
    if library.memory is not None and existing:
        text = f"{candidate.name.replace('_', ' ')}: {candidate.description or info.description} {info.signature}"
        hits = library.memory.collection(SKILLS_COLLECTION).query(text, k=1)
        if hits and hits[0].distance < config.near_distance and hits[0].record.id != candidate.name:
            return f"too close in meaning to {hits[0].record.id}"
    return None


def _arity(view: SkillView) -> int:
    try:
        return analyse(view.code, view.name).required
    except SkillError:
        return -1
