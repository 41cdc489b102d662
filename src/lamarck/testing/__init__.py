"""Test doubles that ship with the package, for Lamarck's own tests and benchmarks and for users' tests of code
around model calls: a scripted model behind a real litellm custom provider (every gateway path runs for real; only
the model's replies are scripted)."""

from lamarck.testing.scripted import Responder, ScriptedLLM, scripted_provider

__all__ = ["Responder", "ScriptedLLM", "scripted_provider"]
