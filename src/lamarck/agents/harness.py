"""The harness: everything around the model, as an immutable, versioned value.

A harness version is identified by the digest of its spec, so the same spec is always
the same version, and a changed spec is a new version whose ``parent_id`` keeps the
lineage. The harness-critic proposes children; the default harness is the root per
environment.
"""

from __future__ import annotations

import hashlib
import json
from importlib.resources import files
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field
from sqlalchemy import select
from sqlalchemy.orm import Session

from lamarck.platform.storage import repositories as repo
from lamarck.platform.storage.records import Harness


class FewShotExample(BaseModel):
    """A worked example: the task, then the turns — a reply, the tool's result, a reply, and so on."""

    model_config = ConfigDict(frozen=True)

    task: str
    turns: tuple[str, ...]


class FewShot(BaseModel):
    model_config = ConfigDict(frozen=True)

    source: Literal["none", "fixed", "memory"] = "none"
    count: int = Field(0, ge=0, le=8)
    examples: tuple[FewShotExample, ...] = ()


class Sampling(BaseModel):
    model_config = ConfigDict(frozen=True)

    temperature: float = Field(0.7, ge=0.0, le=2.0)
    top_p: float = Field(0.95, gt=0.0, le=1.0)
    samples_per_task: int = Field(4, ge=1, le=64)
    max_tokens_per_step: int = Field(96, ge=8, le=4096)


class HarnessSpec(BaseModel):
    """What the executor sees and how it is sampled. Immutable: derive a child to change it."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    environment: str | None = None
    system_prompt: str = Field(default_factory=lambda: load_prompt("executor_system.md"))
    few_shot: FewShot = Field(default_factory=FewShot)
    tools: tuple[str, ...] | None = None
    tool_description: Literal["name", "short", "full"] = "short"
    max_skills: int = Field(3, ge=0, le=20)
    skill_description: Literal["signature", "docstring"] = "docstring"
    lesson_depth: int = Field(2, ge=0, le=20)
    sampling: Sampling = Field(default_factory=Sampling)
    step_budget: int = Field(4, ge=1, le=50)
    answer_format: str = "the final answer only"

    def digest(self) -> str:
        canonical = json.dumps(self.model_dump(mode="json"), sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(canonical.encode()).hexdigest()

    @property
    def version_id(self) -> str:
        return f"{self.environment or 'generic'}-{self.digest()[:12]}"

    def derive(self, **changes: Any) -> HarnessSpec:
        """A child spec with ``changes`` applied; nested sections may be given as dicts."""
        data = self.model_dump()
        for key, value in changes.items():
            if isinstance(value, BaseModel):
                value = value.model_dump()
            if isinstance(value, dict) and isinstance(data.get(key), dict):
                data[key] = {**data[key], **value}
            else:
                data[key] = value
        return HarnessSpec.model_validate(data)


def load_prompt(name: str) -> str:
    return (files("lamarck.agents.prompts") / name).read_text(encoding="utf-8")


DEFAULT_ANSWER_FORMATS: dict[str, str] = {
    "arithmetic": "the final number only",
    "python_functions": "the complete Python function in a ```python block",
    "string_ops": "the resulting string only",
}


FIXED_EXAMPLES: dict[str, FewShotExample] = {
    "arithmetic": FewShotExample(
        task="Sam has 5 pens. Sam buys 3 more pens. How many pens does Sam have now?",
        turns=("CALL calculator: 5 + 3", "8", "ANSWER: 8"),
    ),
    "string_ops": FewShotExample(
        task='Start with the text "red cat" and reverse the whole string. What is the final text?',
        turns=("CALL reverse: red cat", "tac der", "ANSWER: tac der"),
    ),
    "python_functions": FewShotExample(
        task="Write a Python function `add_one(x: int) -> int`.\nReturn x plus one.\nExample: add_one(1) returns 2.",
        turns=("ANSWER:\n```python\ndef add_one(x: int) -> int:\n    return x + 1\n```",),
    ),
}


def default_harness(environment: str | None, answer_format: str | None = None) -> HarnessSpec:
    """The root harness of an environment: one fixed worked example, where there is one, shows the format."""
    fmt = answer_format or DEFAULT_ANSWER_FORMATS.get(environment or "", "the final answer only")
    example = FIXED_EXAMPLES.get(environment or "")
    few_shot = FewShot(source="fixed", count=1, examples=(example,)) if example else FewShot()
    return HarnessSpec(environment=environment, answer_format=fmt, few_shot=few_shot)


def save_harness(
    session: Session,
    spec: HarnessSpec,
    *,
    parent_id: str | None = None,
    status: str = "candidate",
    rationale: str | None = None,
) -> str:
    """Store a harness version (idempotent: the same spec is the same version) and return its id."""
    repo.add_harness(
        session,
        harness_id=spec.version_id,
        spec=spec.model_dump(mode="json"),
        digest=spec.digest(),
        environment=spec.environment,
        parent_id=parent_id,
        status=status,
        rationale=rationale,
    )
    return spec.version_id


def promoted_harness(session: Session, environment: str) -> str | None:
    """The id of ``environment``'s promoted harness (the one its release is served with), if any was promoted."""
    query = (
        select(Harness)
        .where(Harness.environment == environment, Harness.status == "promoted")
        .order_by(Harness.created_at.desc())
        .limit(1)
    )
    found = session.scalar(query)
    return found.id if found is not None else None


def load_harness(session: Session, *, harness_id: str) -> HarnessSpec:
    record = repo.get_harness(session, harness_id=harness_id)
    return HarnessSpec.model_validate(record.spec)


def lineage(session: Session, *, harness_id: str) -> list[str]:
    """The chain of versions from this one back to its root."""
    chain: list[str] = []
    current: str | None = harness_id
    while current is not None and current not in chain:
        chain.append(current)
        current = repo.get_harness(session, harness_id=current).parent_id
    return chain
