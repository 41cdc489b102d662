"""Human in the loop: with approvals required, the gate's promotion, a harness round's winner and an induced skill
wait as pending approvals; approving applies each, rejecting leaves it refused with its reason, every decision is
an audit event, and bad input is a one-line 4xx that changes nothing."""

from __future__ import annotations

from collections.abc import Sequence

import pytest
from fastapi.testclient import TestClient
from typer.testing import CliRunner

from lamarck.agents.harness import HarnessSpec, default_harness, save_harness
from lamarck.agents.harness_archive import promoted_harness, record_round
from lamarck.agents.harness_critic import DevResult, HarnessCritic, HarnessCriticInput
from lamarck.agents.harness_proposals import KnobSpace
from lamarck.agents.skill_review import review_skills
from lamarck.cli import app as cli
from lamarck.curriculum.environment import TaskSpec
from lamarck.platform.container import Container
from lamarck.platform.settings import HarnessCriticSettings, Settings
from lamarck.platform.storage import approvals
from lamarck.platform.storage import repositories as repo
from lamarck.platform.storage.approvals import ApprovalStatus
from lamarck.skills_library.library import SkillLibrary
from lamarck.skills_library.skill import SkillCandidate
from lamarck.training import registry
from lamarck.training.gate import run_gate

from .conftest import assert_refused_with_one_line, error_of

CHAMPION = "smollm2-135m"
ROOT = default_harness("arithmetic")


def _held_promotion(container: Container, candidate: str = "cand") -> str:
    """Gate a candidate that beats the champion everywhere, with approvals required; the approval's id."""
    with container.db.session() as session:
        registry.register_candidate(
            session,
            version_id=candidate,
            base=CHAMPION,
            adapter_path=f"/x/{candidate}",
            parent_id=CHAMPION,
            dataset_digest=candidate.ljust(64, "0"),
            training_metrics={},
        )
    tasks = {
        "arithmetic": [TaskSpec(environment="arithmetic", difficulty=1, prompt=f"t{i}", seed=i) for i in range(20)]
    }

    def evaluator(version: str, env: str, batch: Sequence[TaskSpec]) -> list[bool]:
        return [version == candidate or i % 4 == 0 for i in range(len(batch))]

    decision = run_gate(
        container.db,
        candidate=candidate,
        champion=CHAMPION,
        evaluator=evaluator,
        environments=["arithmetic"],
        trained_environments=["arithmetic"],
        tasks=tasks,
        bus=container.bus,
        hold_for_approval=True,
    )
    assert decision.promote
    [pending] = [a for a in _list(container, "pending") if a["subject"] == candidate]
    return str(pending["id"])


def _list(container: Container, status: ApprovalStatus) -> list[dict[str, object]]:
    with container.db.session() as session:
        return [{"id": a.id, "subject": a.subject, "kind": a.kind} for a in approvals.page(session, status=status)]


def _events(client: TestClient, keys: dict[str, dict[str, str]], kind: str) -> list[dict[str, object]]:
    events = client.get(f"/v1/events?types=approval.{kind}", headers=keys["read"]).json()["events"]
    return [e["payload"] for e in events]


def _champion(client: TestClient, keys: dict[str, dict[str, str]]) -> str:
    return str(client.get("/v1/info", headers=keys["read"]).json()["champion"])


def test_a_held_promotion_is_not_served_until_approved(
    client: TestClient, container: Container, keys: dict[str, dict[str, str]]
) -> None:
    approval_id = _held_promotion(container)
    assert _champion(client, keys) == CHAMPION
    listed = client.get("/v1/approvals?status=pending", headers=keys["read"]).json()
    assert [(a["kind"], a["subject"], a["status"]) for a in listed["approvals"]] == [("model", "cand", "pending")]
    assert listed["approvals"][0]["reason"].startswith("gate: ") and listed["next_cursor"] is None
    assert [e["approval_id"] for e in _events(client, keys, "requested")] == [approval_id]
    with container.db.session() as session:
        assert registry.undecided_candidates(session) == []  # judged: the gate does not look at it again

    response = client.post(
        f"/v1/approvals/{approval_id}/approve", json={"reason": "rows look right"}, headers=keys["models"]
    )
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["status"] == "approved" and body["decision_reason"] == "rows look right"
    assert body["decided_by"] and body["decided_at"]
    assert _champion(client, keys) == "cand"
    model = client.get("/v1/models/cand", headers=keys["read"]).json()
    assert model["status"] == "promoted" and "rows look right" in model["reason"]
    [decided] = _events(client, keys, "decided")
    assert decided == {
        "approval_id": approval_id,
        "kind": "model",
        "subject": "cand",
        "decision": "approved",
        "reason": "rows look right",
        "decided_by": body["decided_by"],
    }
    again = client.post(f"/v1/approvals/{approval_id}/reject", json={"reason": "too late"}, headers=keys["models"])
    assert "already approved" in error_of(again, 409)
    assert _champion(client, keys) == "cand" and len(_events(client, keys, "decided")) == 1


def test_a_rejected_promotion_stays_refused_with_its_reason(
    client: TestClient, container: Container, keys: dict[str, dict[str, str]]
) -> None:
    approval_id = _held_promotion(container)
    rejected = client.post(
        f"/v1/approvals/{approval_id}/reject", json={"reason": "wait for HumanEval"}, headers=keys["admin"]
    )
    assert rejected.status_code == 200 and rejected.json()["status"] == "rejected"
    again = client.post(
        f"/v1/approvals/{approval_id}/approve", json={"reason": "changed my mind"}, headers=keys["models"]
    )
    assert "already rejected (wait for HumanEval)" in error_of(again, 409)
    assert _champion(client, keys) == CHAMPION
    model = client.get("/v1/models/cand", headers=keys["read"]).json()
    assert model["status"] == "candidate" and "wait for HumanEval" in model["reason"]
    shown = client.get(f"/v1/approvals/{approval_id}", headers=keys["read"]).json()
    assert shown["status"] == "rejected" and shown["decision_reason"] == "wait for HumanEval"
    assert [e["decision"] for e in _events(client, keys, "decided")] == ["rejected"]
    with container.db.session() as session:
        assert registry.undecided_candidates(session) == []


def _winner_round(container: Container) -> str:
    """A harness-critic round on arithmetic whose winner (temperature 0) is held; the winner's id."""
    with container.db.session() as session:
        save_harness(session, ROOT, status="promoted", rationale="root")
    space = KnobSpace(
        temperature=(0.0, 0.3),
        top_p=(),
        samples_per_task=(),
        step_budget=(),
        max_tokens_per_step=(),
        tool_description=(),
        few_shot_count=(),
    )

    def evaluate(harness: HarnessSpec, tasks: Sequence[TaskSpec]) -> DevResult:
        rate = {0.0: 0.8}.get(harness.sampling.temperature, 0.2)
        return DevResult(passed=[(t.seed * 37 % 100) / 100 < rate for t in tasks], tokens=[50] * len(tasks))

    tasks = [
        TaskSpec(environment="arithmetic", difficulty=2, prompt=f"t{i}", seed=i, source_id=f"d/{i}") for i in range(30)
    ]
    settings = HarnessCriticSettings(knob_proposals=2, demonstration_proposals=0, rewrite_proposals=0, keep=2)
    out = HarnessCritic(evaluate, settings, knobs=space).run(
        HarnessCriticInput(champion=ROOT, dev_tasks=tasks, registered_tools=["calculator"])
    )
    assert out.promoted is not None
    record_round(container.db, out, round_=1, hold_for_approval=True)
    record_round(container.db, out, round_=1, hold_for_approval=True)  # a re-run step asks once
    return out.promoted


def test_a_held_harness_winner_is_promoted_only_on_approval(
    client: TestClient, container: Container, keys: dict[str, dict[str, str]]
) -> None:
    winner = _winner_round(container)
    with container.db.session() as session:
        assert promoted_harness(session, "arithmetic") == ROOT.version_id
        assert repo.get_harness(session, harness_id=winner).status == "candidate"
    [pending] = client.get("/v1/approvals?kind=harness", headers=keys["read"]).json()["approvals"]
    assert pending["subject"] == winner and pending["status"] == "pending"
    approved = client.post(f"/v1/approvals/{pending['id']}/approve", json={"reason": "ok"}, headers=keys["models"])
    assert approved.status_code == 200, approved.text
    with container.db.session() as session:
        assert promoted_harness(session, "arithmetic") == winner
        assert repo.get_harness(session, harness_id=ROOT.version_id).status == "retired"


def test_a_rejected_harness_winner_stays_rejected(
    client: TestClient, container: Container, keys: dict[str, dict[str, str]]
) -> None:
    winner = _winner_round(container)
    [pending] = _list(container, "pending")
    assert (
        client.post(
            f"/v1/approvals/{pending['id']}/reject", json={"reason": "prompt too long"}, headers=keys["models"]
        ).status_code
        == 200
    )
    shown = client.get(f"/v1/harnesses/{winner}", headers=keys["read"]).json()
    assert shown["status"] == "rejected"
    with container.db.session() as session:
        assert promoted_harness(session, "arithmetic") == ROOT.version_id
        assert repo.get_harness(session, harness_id=winner).eval_scores["approval"]["reason"] == "prompt too long"


SHOUT = SkillCandidate(
    name="shout",
    code="def shout(s: str) -> str:\n    return s.upper() + '!'\n",
    tests="assert shout('hi') == 'HI!'",
    provenance="induced",
    source_episode_ids=["e1"],
)


@pytest.mark.bubblewrap
def test_a_held_skill_is_added_only_when_approved(
    client: TestClient, container: Container, keys: dict[str, dict[str, str]]
) -> None:
    library = SkillLibrary(container.db, container.sandbox)
    broken = SHOUT.model_copy(
        update={
            "name": "whisper",
            "code": "def whisper(s: str) -> str:\n    return s.lower() + '?'\n",
            "tests": "assert whisper('HI') == 'hi.'",
        }
    )
    decisions = review_skills([SHOUT, broken], library, hold_for_approval=True)
    assert [d.approved for d in decisions] == [False, False] and all(
        "waits for approval" in d.reason for d in decisions
    )
    assert library.get("shout") is None
    pending = {
        a["subject"]: a for a in client.get("/v1/approvals?kind=skill", headers=keys["read"]).json()["approvals"]
    }
    assert pending["shout"]["details"]["candidate"]["code"] == SHOUT.code  # the reviewer sees the code
    refused = client.post(
        f"/v1/approvals/{pending['whisper']['id']}/approve", json={"reason": "ok"}, headers=keys["models"]
    )
    assert "skill whisper cannot be added" in error_of(refused, 409)
    assert library.get("whisper") is None
    assert client.get(f"/v1/approvals/{pending['whisper']['id']}", headers=keys["read"]).json()["status"] == "pending"
    added = client.post(
        f"/v1/approvals/{pending['shout']['id']}/approve", json={"reason": "useful"}, headers=keys["models"]
    )
    assert added.status_code == 200, added.text
    view = library.get("shout")
    assert view is not None and view.version == 1


def test_bad_approval_input_is_one_line_and_changes_nothing(
    client: TestClient, container: Container, keys: dict[str, dict[str, str]]
) -> None:
    approval_id = _held_promotion(container)
    path = f"/v1/approvals/{approval_id}/approve"
    assert "no approval" in error_of(
        client.post("/v1/approvals/0123abcd/approve", json={"reason": "x"}, headers=keys["models"]), 404
    )
    assert "no approval" in error_of(client.get("/v1/approvals/0123abcd", headers=keys["read"]), 404)
    error_of(client.post(path, json={"reason": "x"}), 401)
    assert "'models' scope" in error_of(client.post(path, json={"reason": "x"}, headers=keys["read"]), 403)
    for body in (
        {},
        {"reason": ""},
        {"reason": "   "},
        {"reason": "a\u0000b"},
        {"reason": 3},
        {"reason": "x", "by": "me"},
        [],
        "x",
    ):
        assert_refused_with_one_line(client, "post", path, body, keys["models"])
    assert_refused_with_one_line(client, "post", "/v1/approvals/bad%20id/reject", {"reason": "x"}, keys["models"])
    assert_refused_with_one_line(client, "post", path, {"reason": "x" * 2001}, keys["models"])
    for query in ("status=maybe", "kind=lesson", "limit=0", "cursor=zzz"):
        assert_refused_with_one_line(client, "get", f"/v1/approvals?{query}", None, keys["read"])
    malformed = client.post(path, content=b"{not json", headers={**keys["models"], "Content-Type": "application/json"})
    error_of(malformed, 400)
    assert _champion(client, keys) == CHAMPION
    assert client.get(f"/v1/approvals/{approval_id}", headers=keys["read"]).json()["status"] == "pending"
    assert _events(client, keys, "decided") == []


def test_the_cli_lists_approves_and_rejects(container: Container, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LAMARCK_DATA_DIR", str(container.settings.data_dir))
    monkeypatch.setenv("LAMARCK_DATABASE_URL", container.db.url)
    first, second = _held_promotion(container, "cand"), _held_promotion(container, "cand2")
    runner = CliRunner()
    listed = runner.invoke(cli, ["approvals", "list"])
    assert listed.exit_code == 0 and first in listed.output and second in listed.output, listed.output
    assert runner.invoke(cli, ["approvals", "reject", second, "--reason", "one at a time"]).exit_code == 0
    approved = runner.invoke(cli, ["approvals", "approve", first, "-r", "fine"])
    assert approved.exit_code == 0 and "approved: model cand" in approved.output, approved.output
    twice = runner.invoke(cli, ["approvals", "approve", first, "-r", "fine"])
    assert twice.exit_code == 2 and "already approved" in twice.output
    missing = runner.invoke(cli, ["approvals", "approve", "nope", "-r", "x"])
    assert missing.exit_code == 2 and "no approval nope" in missing.output
    assert runner.invoke(cli, ["approvals", "list", "--status", "rejected"]).output.count(second) == 1
    with container.db.session() as session:
        assert registry.champion(session) == "cand"
        assert [e.payload["decided_by"] for e in repo.events_after(session) if e.type == "approval.decided"] == [
            "cli",
            "cli",
        ]


def test_approvals_are_off_by_default_and_on_by_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    assert Settings().approvals.required is False
    monkeypatch.setenv("LAMARCK_APPROVALS__REQUIRED", "true")
    assert Settings().approvals.required is True
