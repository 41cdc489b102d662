"""Environment discovery: the built-ins plus factories from the ``lamarck.environments`` entry-point group.

A factory is any callable returning an Environment; ``get_environment(name, **deps)`` passes it only the
dependencies its signature accepts, so callers can offer ``sandbox=...`` to every environment uniformly.
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Callable
from functools import lru_cache
from importlib.metadata import EntryPoint, entry_points
from typing import Any

from lamarck.curriculum.environment import Environment
from lamarck.curriculum.environments.arithmetic import ArithmeticEnv
from lamarck.curriculum.environments.humaneval import HumanEvalEnv
from lamarck.curriculum.environments.python_functions import PythonFunctionsEnv
from lamarck.curriculum.environments.string_ops import StringOpsEnv

logger = logging.getLogger(__name__)

GROUP = "lamarck.environments"
Factory = Callable[..., Environment]

BUILTINS: dict[str, Factory] = {
    "arithmetic": ArithmeticEnv,
    "python_functions": PythonFunctionsEnv,
    "string_ops": StringOpsEnv,
    "humaneval": HumanEvalEnv,
}


class UnknownEnvironment(LookupError):
    """No environment of that name; the message lists the known ones."""


@lru_cache(maxsize=1)
def _discovered() -> dict[str, EntryPoint]:
    found: dict[str, EntryPoint] = {}
    for ep in entry_points(group=GROUP):
        if ep.name in found:
            logger.warning(
                "environment %r is declared twice (%s, %s); keeping the first", ep.name, found[ep.name].value, ep.value
            )
            continue
        found[ep.name] = ep
    return found


def _factories() -> dict[str, Factory | EntryPoint]:
    factories: dict[str, Factory | EntryPoint] = dict(BUILTINS)
    for name, ep in _discovered().items():
        if name in BUILTINS:
            builtin = BUILTINS[name]
            if ep.value != f"{builtin.__module__}:{builtin.__qualname__}":
                logger.warning("plug-in environment %r (%s) shadows a built-in; the built-in wins", name, ep.value)
            continue
        factories[name] = ep
    return factories


def list_environments() -> list[str]:
    return sorted(_factories())


def get_environment(name: str, **deps: Any) -> Environment:
    factories = _factories()
    if name not in factories:
        raise UnknownEnvironment(f"unknown environment {name!r}: known environments are {', '.join(sorted(factories))}")
    factory = factories[name]
    if isinstance(factory, EntryPoint):
        try:
            factory = factory.load()
        except Exception as exc:
            raise UnknownEnvironment(f"environment {name!r} failed to load from {factory.value}: {exc}") from exc
    env = factory(**_accepted(factory, deps))
    if not isinstance(env, Environment):
        raise TypeError(f"environment factory for {name!r} returned {type(env).__name__}, not an Environment")
    return env


def refresh() -> None:
    """Forget discovered entry points (after installing a plug-in in the same process)."""
    _discovered.cache_clear()


def _accepted(factory: Callable[..., Any], deps: dict[str, Any]) -> dict[str, Any]:
    try:
        params = inspect.signature(factory).parameters.values()
    except (TypeError, ValueError):
        return deps
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params):
        return deps
    named = (inspect.Parameter.KEYWORD_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    names = {p.name for p in params if p.kind in named}
    return {key: value for key, value in deps.items() if key in names}
