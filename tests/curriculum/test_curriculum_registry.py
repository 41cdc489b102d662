from __future__ import annotations

import random

import pytest

from lamarck.curriculum import registry
from lamarck.curriculum.environment import Environment


def test_builtins_listed_and_built_with_deps():
    names = registry.list_environments()
    assert {"arithmetic", "python_functions", "string_ops", "humaneval"} <= set(names)
    sentinel = object()
    env = registry.get_environment("python_functions", sandbox=sentinel)
    assert env.sandbox is sentinel
    arithmetic = registry.get_environment("arithmetic", sandbox=sentinel)  # deps it does not take are ignored
    assert isinstance(arithmetic, Environment)
    for name in names:
        env = registry.get_environment(name)
        assert env.name == name and env.description and env.answer_format
        if env.training_allowed:
            assert len(env.difficulties) >= 6
            task = env.generate(env.difficulties[0], random.Random(0))
            assert task.environment == name and task.difficulty == env.difficulties[0]


def test_unknown_name_lists_known_ones():
    with pytest.raises(registry.UnknownEnvironment, match="known environments are arithmetic, ") as info:
        registry.get_environment("chess")
    assert "\n" not in str(info.value)


def test_entry_point_plugins_are_discovered(monkeypatch):
    from importlib.metadata import EntryPoint

    plugin = EntryPoint(
        name="toy", value="lamarck.curriculum.environments.string_ops:StringOpsEnv", group=registry.GROUP
    )
    broken = EntryPoint(name="broken", value="lamarck.nope:Missing", group=registry.GROUP)
    monkeypatch.setattr(registry, "entry_points", lambda group: [plugin, broken] if group == registry.GROUP else [])
    registry.refresh()
    try:
        assert {"toy", "broken"} <= set(registry.list_environments())
        assert registry.get_environment("toy").name == "string_ops"
        with pytest.raises(registry.UnknownEnvironment, match="failed to load"):
            registry.get_environment("broken")
    finally:
        registry.refresh()
