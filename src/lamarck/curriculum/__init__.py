"""Environments (task generators with a difficulty ladder, verifiers, tools), held-out sets, the capability
profile and frontier selection."""

from lamarck.curriculum.environment import Environment, Reward, TaskSpec, ToolSpec, TrainingNotAllowed

__all__ = ["Environment", "Reward", "TaskSpec", "ToolSpec", "TrainingNotAllowed"]
