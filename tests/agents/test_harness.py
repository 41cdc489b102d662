from __future__ import annotations

import pytest
from pydantic import ValidationError

from lamarck.agents.harness import HarnessSpec, default_harness, lineage, load_harness, save_harness
from lamarck.platform.storage.database import Database


def test_the_same_spec_is_the_same_version() -> None:
    assert default_harness("arithmetic").version_id == default_harness("arithmetic").version_id
    assert default_harness("arithmetic").version_id != default_harness("string_ops").version_id


def test_harness_is_immutable_and_derive_makes_a_new_version() -> None:
    root = default_harness("arithmetic")
    with pytest.raises(ValidationError):
        root.step_budget = 9  # type: ignore[misc]
    child = root.derive(step_budget=6, sampling={"temperature": 0.2})
    assert child.step_budget == 6 and child.sampling.temperature == 0.2
    assert child.sampling.samples_per_task == root.sampling.samples_per_task
    assert child.version_id != root.version_id


def test_bad_harness_values_are_rejected() -> None:
    with pytest.raises(ValidationError):
        default_harness("arithmetic").derive(step_budget=0)
    with pytest.raises(ValidationError):
        HarnessSpec(unknown_field=1)  # type: ignore[call-arg]


def test_stored_versions_keep_their_lineage(db: Database) -> None:
    root = default_harness("arithmetic")
    child = root.derive(lesson_depth=4)
    grandchild = child.derive(sampling={"top_p": 0.8})
    with db.session() as session:
        root_id = save_harness(session, root, status="promoted")
        child_id = save_harness(session, child, parent_id=root_id, rationale="more lessons")
        grand_id = save_harness(session, grandchild, parent_id=child_id)
        assert save_harness(session, root) == root_id
    with db.session() as session:
        assert load_harness(session, harness_id=grand_id) == grandchild
        assert lineage(session, harness_id=grand_id) == [grand_id, child_id, root_id]


def test_system_prompt_comes_from_the_prompt_file() -> None:
    prompt = default_harness("arithmetic").system_prompt
    assert "CALL tool_name: input" in prompt and "ANSWER:" in prompt
