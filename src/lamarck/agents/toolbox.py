"""What the executor can call for one task: environment tools plus retrieved skills, behind one name -> callable map."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from lamarck.curriculum.environment import ToolSpec
from lamarck.memory.base import LessonHandle, LessonSource
from lamarck.platform import tracing
from lamarck.skills_library.skill import SkillHandle, SkillSource

__all__ = ["LessonHandle", "LessonSource", "SkillHandle", "SkillSource", "Toolbox"]

MAX_OBSERVATION_CHARS = 2000


@dataclass
class Toolbox:
    tools: list[ToolSpec] = field(default_factory=list)
    skills: list[SkillHandle] = field(default_factory=list)

    @property
    def names(self) -> set[str]:
        return {tool.name for tool in self.tools if tool.fn is not None} | {skill.name for skill in self.skills}

    @property
    def primary(self) -> str | None:
        """The environment's first tool: where a call without a tool name goes, and the tool error messages name."""
        return next((tool.name for tool in self.tools if tool.fn is not None), None)

    def is_skill(self, name: str) -> bool:
        return any(skill.name == name for skill in self.skills)

    def describe(self, style: str) -> tuple[str, str]:
        """(tools text, skills text) for the system prompt."""
        tools = [_describe_tool(tool, style) for tool in self.tools if tool.fn is not None]
        skills = [f"- {skill.name}: {skill.signature} — {skill.description}".rstrip(" —") for skill in self.skills]
        tools_text = "\n".join(tools) if tools else "(no tools for this task)"
        skills_text = ("Skills you can CALL like tools:\n" + "\n".join(skills)) if skills else ""
        return tools_text, skills_text

    def call(self, name: str, argument: str) -> str:
        """Run a tool or skill; failures become the observation text, never an exception. Traced as an
        ``execute_tool`` span."""
        with tracing.tool_span(name, argument, kind="extension" if self.is_skill(name) else "function") as span:
            observation, failed = self._call(name, argument)
            tracing.tool_result(span, observation, failed=failed)
        return observation

    def _call(self, name: str, argument: str) -> tuple[str, bool]:
        try:
            for skill in self.skills:
                if skill.name == name:
                    return _clip(skill.call(argument)), False
            for tool in self.tools:
                if tool.name == name and tool.fn is not None:
                    return _clip(tool.fn(**_arguments(tool, argument))), False
        except Exception as exc:  # a tool's failure is information for the model
            return f"error: {type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}".rstrip(": "), True
        return f"error: unknown tool {name!r}", True


def _describe_tool(tool: ToolSpec, style: str) -> str:
    if style == "name":
        return f"- {tool.name}"
    params = ", ".join(tool.parameters.get("properties", {}))
    text = f"- {tool.name}({params}): {tool.description}"
    if style == "short":
        text = text.split(". ")[0].rstrip(".")
    return text


def _arguments(tool: ToolSpec, argument: str) -> dict[str, Any]:
    properties = list(tool.parameters.get("properties", {}))
    if len(properties) == 1:
        return {properties[0]: argument}
    try:
        parsed = json.loads(argument or "{}")
    except json.JSONDecodeError as exc:
        raise ValueError(f"{tool.name} takes a JSON object with {', '.join(properties)}") from exc
    if not isinstance(parsed, dict):
        raise ValueError(f"{tool.name} takes a JSON object with {', '.join(properties)}")
    return parsed


def _clip(text: str) -> str:
    text = str(text)
    return text if len(text) <= MAX_OBSERVATION_CHARS else text[:MAX_OBSERVATION_CHARS] + " ...(truncated)"
