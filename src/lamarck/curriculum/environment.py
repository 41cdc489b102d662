"""The environment contract: a task generator with a difficulty ladder, a verifier, and the tools it allows."""

from __future__ import annotations

import random
import re
from collections.abc import Callable, Sequence
from typing import Any, Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field

from lamarck.platform.storage.fingerprints import normalise_prompt, prompt_fingerprint  # noqa: F401 (re-export)


class TaskSpec(BaseModel):
    """One task. ``reference`` holds what the verifier needs (the answer or hidden tests) and is never shown."""

    model_config = ConfigDict(extra="forbid")

    environment: str
    difficulty: int
    prompt: str
    reference: dict[str, Any] = Field(default_factory=dict)
    metadata: dict[str, Any] = Field(default_factory=dict)
    seed: int | None = None
    source_id: str | None = None

    @property
    def fingerprint(self) -> str:
        return prompt_fingerprint(self.prompt)


class Reward(BaseModel):
    model_config = ConfigDict(extra="forbid")

    score: float = Field(ge=0.0, le=1.0)
    passed: bool
    details: str = ""

    @classmethod
    def fail(cls, details: str) -> Reward:
        return cls(score=0.0, passed=False, details=details)


class ToolSpec(BaseModel):
    """A tool the executor may call on an environment. ``fn`` is set only for pure, safe tools."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    name: str
    description: str
    parameters: dict[str, Any] = Field(default_factory=lambda: {"type": "object", "properties": {}})
    fn: Callable[..., str] | None = Field(default=None, exclude=True)

    def to_openai(self) -> dict[str, Any]:
        """The tool in the OpenAI/litellm ``tools=[...]`` format."""
        return {
            "type": "function",
            "function": {"name": self.name, "description": self.description, "parameters": self.parameters},
        }


@runtime_checkable
class Environment(Protocol):
    name: str
    description: str
    answer_format: str
    training_allowed: bool

    @property
    def difficulties(self) -> Sequence[int]:
        """The levels ``generate`` takes (read-only, so a tuple or a list both meet the Protocol)."""
        ...

    def generate(self, difficulty: int, rng: random.Random) -> TaskSpec: ...

    def verify(self, task: TaskSpec, answer: str) -> Reward: ...

    def tools(self) -> list[ToolSpec]: ...


class Hints(Protocol):
    """Help an environment can give the teacher at rollout; the student never sees it.

    Optional: an environment that provides hints implements both methods (``provides_hints`` checks). A
    glossary is general (no task's numbers or answer); a solution hint comes from the task's hidden reference
    and is privileged: ``share`` in (0, 1] says how much of the reference solution to reveal, 1.0 the whole.
    """

    def glossary(self) -> str: ...

    def solution_hint(self, task: TaskSpec, share: float) -> str | None: ...


def provides_hints(environment: object) -> bool:
    return callable(getattr(environment, "glossary", None)) and callable(getattr(environment, "solution_hint", None))


class TrainingNotAllowed(ValueError):
    """Raised by evaluation-only environments when asked for training tasks."""


def check_difficulty(env_name: str, difficulties: Sequence[int], difficulty: int) -> None:
    if difficulty not in difficulties:
        low, high = min(difficulties), max(difficulties)
        raise ValueError(f"{env_name}: unknown difficulty {difficulty!r}; valid levels are {low}..{high}")


def check_task(env_name: str, task: TaskSpec) -> None:
    if task.environment != env_name:
        raise ValueError(f"{env_name}: cannot verify a task of environment {task.environment!r}")


_FENCE = re.compile(r"```[ \t]*(?:python|py|python3)?[ \t]*\n(.*?)(?:```|\Z)", re.DOTALL | re.IGNORECASE)


def extract_code(answer: str) -> str:
    """The code in an answer: the longest ```python fenced block if there is one, else the whole text."""
    blocks = [block for block in _FENCE.findall(answer) if block.strip()]
    if blocks:
        return max(blocks, key=len).rstrip() + "\n"
    return answer.strip("\n") + "\n"
