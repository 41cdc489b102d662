"""The critic's review of induced skill candidates: approve what is worth keeping, with the reason recorded.

Approval is grounded like verdicts are: a candidate must come from verified episodes,
do real work (not return its input or a constant), stay small enough to reuse, and then
pass its own tests in the sandbox when the library adds it.
"""

from __future__ import annotations

import ast
from collections.abc import Sequence

from pydantic import BaseModel

from lamarck.platform.python_ast import parse_module
from lamarck.platform.storage import approvals
from lamarck.skills_library.library import SkillLibrary
from lamarck.skills_library.skill import SkillCandidate

MAX_SKILL_LINES = 60


class SkillDecision(BaseModel):
    name: str
    approved: bool
    reason: str
    version: int | None = None


def review_skills(
    candidates: Sequence[SkillCandidate], library: SkillLibrary, *, hold_for_approval: bool = False
) -> list[SkillDecision]:
    """The critic's decision on each candidate; with ``hold_for_approval`` one it would add waits for a person
    instead (its tests run when it is approved, through ``SkillLibrary.add``)."""
    decisions = []
    for candidate in candidates:
        problem = _problem(candidate)
        if problem is not None:
            decisions.append(SkillDecision(name=candidate.name, approved=False, reason=problem))
            continue
        if hold_for_approval:
            decisions.append(_hold(candidate, library))
            continue
        result = library.add(candidate)
        if result.status == "rejected":
            decisions.append(SkillDecision(name=candidate.name, approved=False, reason=result.reason or "rejected"))
        elif result.status == "unchanged":
            decisions.append(SkillDecision(name=candidate.name, approved=False, reason="already in the library"))
        else:
            reason = f"verified from {len(candidate.source_episode_ids)} episode(s); {result.status}"
            decisions.append(SkillDecision(name=candidate.name, approved=True, reason=reason, version=result.version))
    return decisions


def _hold(candidate: SkillCandidate, library: SkillLibrary) -> SkillDecision:
    reason = f"induced from {len(candidate.source_episode_ids)} verified episode(s)"
    with library.db.session() as session:
        approval = approvals.request(
            session,
            kind="skill",
            subject=candidate.name,
            reason=reason,
            details={"candidate": candidate.model_dump(mode="json")},
        )
        return SkillDecision(name=candidate.name, approved=False, reason=f"waits for approval {approval.id}")


def _problem(candidate: SkillCandidate) -> str | None:
    if candidate.provenance == "induced" and not candidate.source_episode_ids:
        return "an induced skill must name the episodes it came from"
    if "assert" not in candidate.tests:
        return "no assert-based tests to verify it with"
    if len(candidate.code.splitlines()) > MAX_SKILL_LINES:
        return f"longer than {MAX_SKILL_LINES} lines: too specific to reuse"
    try:
        module = parse_module(candidate.code)
    except SyntaxError as exc:
        return f"syntax error at line {exc.lineno}: {exc.msg}"
    function = next(
        (node for node in module.body if isinstance(node, ast.FunctionDef) and node.name == candidate.name), None
    )
    if function is None:
        return f"the code does not define {candidate.name}"
    if _trivial(function):
        return "trivial: it returns its input or a constant"
    return None


def _trivial(function: ast.FunctionDef) -> bool:
    body = [node for node in function.body if not (isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant))]
    if len(body) != 1 or not isinstance(body[0], ast.Return) or body[0].value is None:
        return False
    value = body[0].value
    params = {arg.arg for arg in function.args.args}
    return isinstance(value, ast.Constant) or (isinstance(value, ast.Name) and value.id in params)
