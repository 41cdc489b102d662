"""What the loop produces, read through the API: a run's metrics, capability and episodes, one episode with its
verdict, two episodes compared, and bad input on each."""

from __future__ import annotations

from dataclasses import dataclass

from fastapi.testclient import TestClient

from lamarck.api.routes.metrics import bucket_edges
from lamarck.curriculum.profile import CapabilityProfile
from lamarck.platform.container import Container
from lamarck.platform.storage import repositories as repo
from lamarck.platform.storage.trajectory import Message, ToolCall, Trajectory

from .conftest import error_of


@dataclass
class Loop:
    run_id: str
    episodes: dict[str, str]  # name -> id


def _trajectory(answer: str) -> Trajectory:
    return Trajectory(
        messages=[
            Message(role="user", content="What is 6 * 7?"),
            Message(role="assistant", tool_calls=[ToolCall(id="c1", name="calculator", arguments='{"expr": "6*7"}')]),
            Message(role="tool", content="42", tool_call_id="c1", name="calculator"),
            Message(role="assistant", content=f"ANSWER: {answer}"),
        ]
    )


def _loop(container: Container, generations: int = 3) -> Loop:
    """A run whose generation g has, in arithmetic at difficulty 1, g + 1 passes out of 4, and in string_ops one
    failed attempt; the last failure has the critic's verdict with a first wrong step and a lesson."""
    episodes: dict[str, str] = {}
    with container.db.session() as session:
        run = repo.create_run(session, config={"environments": ["arithmetic", "string_ops"]}, name="loop")
        for g in range(generations):
            for i in range(4):
                task = repo.add_task(session, environment="arithmetic", difficulty=1, prompt="6*7?", run_id=run.id)
                passed = i <= g
                episode = repo.record_episode(
                    session,
                    task_id=task.id,
                    run_id=run.id,
                    model_version="smollm2-135m",
                    trajectory=_trajectory("42" if passed else "41"),
                    answer="42" if passed else "41",
                    outcome="passed" if passed else "failed",
                    reward=1.0 if passed else 0.0,
                    generation=g,
                )
                episodes[f"a{g}{i}"] = episode.id
            task = repo.add_task(session, environment="string_ops", difficulty=2, prompt="reverse ab", run_id=run.id)
            episode = repo.record_episode(
                session,
                task_id=task.id,
                run_id=run.id,
                model_version="smollm2-135m",
                harness_version="string_ops-h1",
                trajectory=_trajectory("ab"),
                answer="ab",
                outcome="failed",
                reward=0.0,
                generation=g,
            )
            episodes[f"s{g}"] = episode.id
        lesson = repo.add_lesson(session, text="reverse the string before answering", environment="string_ops")
        repo.add_verdict(
            session,
            episode_id=episodes[f"s{generations - 1}"],
            reward=0.0,
            passed=False,
            source="both",
            critique="first error at step 3: did not reverse",
            lesson_id=lesson.id,
            details={"verifier": "wrong", "first_error": "step 3, the reversal"},
        )
        return Loop(run.id, episodes)


def test_metrics_per_generation_overall_and_per_environment(
    client: TestClient, container: Container, keys: dict[str, dict[str, str]]
) -> None:
    loop = _loop(container)
    metrics = client.get(f"/v1/runs/{loop.run_id}/metrics", headers=keys["read"]).json()
    assert metrics["generations"] == 3
    overall = metrics["overall"]["buckets"]
    assert [(b["first"], b["last"], b["attempts"]) for b in overall] == [(0, 0, 5), (1, 1, 5), (2, 2, 5)]
    assert [b["success_rate"] for b in overall] == [0.2, 0.4, 0.6]
    by_env = {s["environment"]: s["buckets"] for s in metrics["environments"]}
    assert [b["success_rate"] for b in by_env["arithmetic"]] == [0.25, 0.5, 0.75]
    assert [b["reward_mean"] for b in by_env["string_ops"]] == [0.0, 0.0, 0.0]

    folded = client.get(f"/v1/runs/{loop.run_id}/metrics?points=2", headers=keys["read"]).json()
    arithmetic = next(s for s in folded["environments"] if s["environment"] == "arithmetic")["buckets"]
    assert [(b["first"], b["last"]) for b in arithmetic] == [(0, 0), (1, 2)]
    assert arithmetic[1]["success_min"] == 0.5 and arithmetic[1]["success_max"] == 0.75
    assert arithmetic[1]["success_rate"] == 5 / 8


def test_bucket_edges_depend_only_on_length_and_points() -> None:
    assert bucket_edges(10, 3) == [(0, 3), (3, 6), (6, 10)]
    assert bucket_edges(2, 200) == [(0, 1), (1, 2)]
    edges = bucket_edges(1000, 7)
    assert len(edges) == 7 and edges[0][0] == 0 and edges[-1][1] == 1000
    assert all(a[1] == b[0] for a, b in zip(edges, edges[1:], strict=False))


def test_capability_per_environment_difficulty_and_generation(
    client: TestClient, container: Container, keys: dict[str, dict[str, str]]
) -> None:
    loop = _loop(container, generations=2)
    capability = client.get(f"/v1/runs/{loop.run_id}/capability", headers=keys["read"]).json()
    assert [g["generation"] for g in capability["generations"]] == [0, 1]
    cells = {(c["environment"], c["difficulty"]): c for c in capability["generations"][1]["cells"]}
    assert cells[("arithmetic", 1)]["successes"] == 2 and cells[("arithmetic", 1)]["attempts"] == 4
    assert cells[("string_ops", 2)]["success_rate"] == 0.0


def test_run_episodes_filter_and_page(
    client: TestClient, container: Container, keys: dict[str, dict[str, str]]
) -> None:
    loop = _loop(container)
    url = f"/v1/runs/{loop.run_id}/episodes?limit=4"
    seen: list[str] = []
    while url:
        page = client.get(url, headers=keys["read"]).json()
        seen += [e["id"] for e in page["episodes"]]
        url = f"/v1/runs/{loop.run_id}/episodes?limit=4&cursor={page['next_cursor']}" if page["next_cursor"] else ""
    assert sorted(seen) == sorted(loop.episodes.values()) and len(seen) == 15
    passed = client.get(f"/v1/runs/{loop.run_id}/episodes?outcome=passed", headers=keys["read"]).json()["episodes"]
    assert len(passed) == 6 and {e["environment"] for e in passed} == {"arithmetic"}
    query = "environment=string_ops&generation=1"
    only = client.get(f"/v1/runs/{loop.run_id}/episodes?{query}", headers=keys["read"]).json()["episodes"]
    assert [e["id"] for e in only] == [loop.episodes["s1"]] and only[0]["harness_version"] == "string_ops-h1"


def test_an_episode_with_steps_verdict_and_release(
    client: TestClient, container: Container, keys: dict[str, dict[str, str]]
) -> None:
    loop = _loop(container)
    episode = client.get(f"/v1/episodes/{loop.episodes['s2']}", headers=keys["read"]).json()
    assert [s["kind"] for s in episode["steps"]] == ["prompt", "tool_call", "observation", "model_output"]
    assert episode["steps"][1]["tool_calls"][0]["name"] == "calculator"
    assert episode["verdict"]["first_wrong_step"] == 3 and episode["verdict"]["first_error"] == "step 3, the reversal"
    assert episode["verdict"]["lesson"] == "reverse the string before answering"
    assert episode["release"] == {"model_version": "smollm2-135m", "harness": "string_ops-h1"}
    assert episode["prompt"] == "reverse ab" and episode["environment"] == "string_ops"
    unjudged = client.get(f"/v1/episodes/{loop.episodes['a00']}", headers=keys["read"]).json()
    assert unjudged["verdict"] is None and unjudged["outcome"] == "passed"


def test_compare_aligns_two_attempts_step_by_step(
    client: TestClient, container: Container, keys: dict[str, dict[str, str]]
) -> None:
    loop = _loop(container, generations=1)
    a, b = loop.episodes["a00"], loop.episodes["a01"]
    compared = client.get(f"/v1/episodes/compare?a={a}&b={b}", headers=keys["read"]).json()
    assert [s["same"] for s in compared["steps"]] == [True, True, True, False]
    assert compared["first_difference"] == 3 and compared["same_task"] is False
    assert compared["a"]["outcome"] == "passed" and compared["b"]["outcome"] == "failed"
    itself = client.get(f"/v1/episodes/compare?a={a}&b={a}", headers=keys["read"]).json()
    assert itself["first_difference"] is None and itself["same_task"] is True


def test_bad_reads_are_4xx_with_one_line(
    client: TestClient, container: Container, keys: dict[str, dict[str, str]]
) -> None:
    loop = _loop(container, generations=1)
    read = keys["read"]
    assert "no run 'nope'" in error_of(client.get("/v1/runs/nope/metrics", headers=read), 404)
    error_of(client.get("/v1/runs/nope/capability", headers=read), 404)
    error_of(client.get("/v1/runs/nope/episodes", headers=read), 404)
    assert "no episode 'nope'" in error_of(client.get("/v1/episodes/nope", headers=read), 404)
    assert "no episode 'nope'" in error_of(
        client.get(f"/v1/episodes/compare?a={loop.episodes['a00']}&b=nope", headers=read), 404
    )
    assert "b" in error_of(client.get(f"/v1/episodes/compare?a={loop.episodes['a00']}", headers=read), 422)
    assert "outcome" in error_of(client.get(f"/v1/runs/{loop.run_id}/episodes?outcome=great", headers=read), 422)
    assert "generation" in error_of(client.get(f"/v1/runs/{loop.run_id}/episodes?generation=-1", headers=read), 422)
    assert "cursor" in error_of(client.get(f"/v1/runs/{loop.run_id}/episodes?cursor=!!", headers=read), 422)
    assert "points" in error_of(client.get(f"/v1/runs/{loop.run_id}/metrics?points=0", headers=read), 422)
    error_of(client.get("/v1/episodes/bad%20id", headers=read), 422)
    error_of(client.get(f"/v1/runs/{loop.run_id}/metrics"), 401)
    for path in (f"/v1/runs/{loop.run_id}/metrics", f"/v1/episodes/{loop.episodes['a00']}", "/v1/environments"):
        assert "'read' scope" in error_of(client.get(path, headers=keys["tasks"]), 403)


def test_a_run_without_episodes_has_empty_series(
    client: TestClient, container: Container, keys: dict[str, dict[str, str]]
) -> None:
    with container.db.session() as session:
        run_id = repo.create_run(session, config={}).id
    metrics = client.get(f"/v1/runs/{run_id}/metrics", headers=keys["read"]).json()
    assert metrics["generations"] == 0 and metrics["overall"]["buckets"] == [] and metrics["environments"] == []
    assert client.get(f"/v1/runs/{run_id}/episodes", headers=keys["read"]).json() == {
        "episodes": [],
        "next_cursor": None,
    }


def test_environments_and_curriculum_profile(
    client: TestClient, container: Container, keys: dict[str, dict[str, str]]
) -> None:
    envs = {e["name"]: e for e in client.get("/v1/environments", headers=keys["read"]).json()["environments"]}
    assert "arithmetic" in envs and envs["arithmetic"]["difficulties"] and envs["arithmetic"]["description"]
    assert envs["humaneval"]["training_allowed"] is False
    assert client.get("/v1/curriculum/profile", headers=keys["read"]).json()["cells"] == []
    with container.db.session() as session:
        CapabilityProfile.load(session).update(session, "arithmetic", 2, True)
    cells = client.get("/v1/curriculum/profile", headers=keys["read"]).json()["cells"]
    assert [(c["environment"], c["difficulty"], c["successes"]) for c in cells] == [("arithmetic", 2, 1)]
