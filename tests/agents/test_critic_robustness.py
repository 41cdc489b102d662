"""How often the critic's judge is fooled (WAFER-QA style): the probe set's labels hold against the verifiers, the
report's counts add up for judges scripted to be gullible, sceptical, swayed by length or mute, and the real local
model produces a well-formed report (nothing is asserted about how good the 135M model is)."""

from __future__ import annotations

from typing import Any

import pytest

from lamarck.agents.critic import judge_prompt
from lamarck.agents.critic_robustness import KINDS, Probe, RobustnessReport, judge_robustness, load_probes
from lamarck.curriculum.environment import TaskSpec
from lamarck.curriculum.environments.arithmetic import ArithmeticEnv
from lamarck.curriculum.environments.string_ops import StringOpsEnv
from lamarck.platform.llm.gateway import LLMGateway
from lamarck.platform.settings import GatewaySettings, ModelRoute, ModelRoutes
from lamarck.platform.storage import repositories as repo
from lamarck.platform.storage.database import Database
from lamarck.testing import ScriptedLLM, scripted_provider

ENVIRONMENTS = {"arithmetic": ArithmeticEnv(), "string_ops": StringOpsEnv()}


def _gateway(db: Database) -> LLMGateway:
    return LLMGateway(ModelRoutes(critic=ModelRoute(model="scripted/judge")), GatewaySettings(retries=0), db=db)


def _verdict(passed: bool) -> str:
    return f"VERDICT: {'pass' if passed else 'fail'}\nFIRST_ERROR: none\nCRITIQUE: c\nLESSON: l"


def _well_formed(report: RobustnessReport, probes: list[Probe]) -> None:
    assert report.probes == len(probes) == len(report.outcomes)
    assert [o.id for o in report.outcomes] == [p.id for p in probes]
    assert report.probes == report.fooled + report.held + report.no_verdict
    assert [k.kind for k in report.by_kind] == list(KINDS)
    for kind in report.by_kind:
        assert kind.probes == kind.fooled + kind.held + kind.no_verdict
        assert kind.probes == sum(p.kind == kind.kind for p in probes)
        judged = kind.fooled + kind.held
        assert kind.fooled_rate == (kind.fooled / judged if judged else None)
    assert report.fooled == sum(k.fooled for k in report.by_kind)
    assert report.held == sum(k.held for k in report.by_kind)
    assert report.no_verdict == sum(k.no_verdict for k in report.by_kind)
    for outcome in report.outcomes:
        assert (outcome.judge_passed is None) == (outcome.fooled is None)


def test_each_probe_is_labelled_as_its_verifier_rules() -> None:
    probes = load_probes()
    assert {p.kind for p in probes} == set(KINDS) and len({p.id for p in probes}) == len(probes)
    for probe in probes:
        task = TaskSpec(
            environment=probe.environment, difficulty=1, prompt=probe.task, reference={"answer": probe.expected}
        )
        if probe.environment == "arithmetic":
            task.reference["answer"] = int(probe.expected)
        assert ENVIRONMENTS[probe.environment].verify(task, probe.answer).passed is probe.correct, probe.id
        prompt = judge_prompt(probe.episode())
        assert probe.task in prompt and probe.answer in prompt
        if probe.expected not in " ".join(text for _, text in probe.turns):
            assert probe.expected not in prompt, probe.id  # the judge sees the attempt, never the answer key


@pytest.mark.parametrize(
    ("judge", "fooled", "held", "no_verdict"),
    [
        ("gullible", {"plausible_wrong": 6, "terse_correct": 0}, {"plausible_wrong": 0, "terse_correct": 6}, 0),
        ("sceptic", {"plausible_wrong": 0, "terse_correct": 6}, {"plausible_wrong": 6, "terse_correct": 0}, 0),
        ("swayed_by_length", {"plausible_wrong": 6, "terse_correct": 6}, {"plausible_wrong": 0, "terse_correct": 0}, 0),
        ("mute", {"plausible_wrong": 0, "terse_correct": 0}, {"plausible_wrong": 0, "terse_correct": 0}, 12),
    ],
)
def test_the_report_counts_how_often_a_scripted_judge_is_fooled(
    sqlite_db: Database, judge: str, fooled: dict[str, int], held: dict[str, int], no_verdict: int
) -> None:
    prompts: list[str] = []

    def respond(messages: list[dict[str, Any]], n: int) -> list[str]:
        prompt = messages[-1]["content"]
        prompts.append(prompt)
        attempt = prompt.split("Attempt, step by step:")[1].split("Reply in exactly")[0]
        if judge == "mute":
            return ["I would rather not say."] * n
        passed = {"gullible": True, "sceptic": False, "swayed_by_length": len(attempt.split()) > 8}[judge]
        return [_verdict(passed)] * n

    probes = load_probes()
    with scripted_provider(ScriptedLLM(respond)):
        report = judge_robustness(_gateway(sqlite_db), probes)
    _well_formed(report, probes)
    assert len(prompts) == len(probes)
    assert {k.kind: k.fooled for k in report.by_kind} == fooled
    assert {k.kind: k.held for k in report.by_kind} == held
    assert report.no_verdict == no_verdict and report.critic_model == "scripted/judge"
    with sqlite_db.session() as session:  # the calls are recorded, against no episode (probes are not episodes)
        assert repo.llm_usage(session)["calls"] == len(probes)


def test_a_judge_that_cannot_be_reached_gives_no_verdicts(sqlite_db: Database) -> None:
    dead = ScriptedLLM()
    dead.script = [RuntimeError("judge crashed")] * 12
    probes = load_probes()
    with scripted_provider(dead):
        report = judge_robustness(_gateway(sqlite_db), probes, max_concurrency=1)
    _well_formed(report, probes)
    assert (report.no_verdict, report.fooled_rate) == (12, None)


@pytest.mark.slow
def test_the_real_model_is_probed_and_the_report_adds_up(local_gateway: LLMGateway, sqlite_db: Database) -> None:
    """Two probes of each kind, so the suite stays short on a CPU (the whole set: ``judge_robustness`` without
    ``probes``)."""
    every = load_probes()
    probes = [p for p in every if p.kind == "plausible_wrong"][:2] + [p for p in every if p.kind == "terse_correct"][:2]
    report = judge_robustness(local_gateway, probes)
    _well_formed(report, probes)
    assert report.critic_model == local_gateway.route("critic").model
    with sqlite_db.session() as session:
        assert repo.llm_usage(session)["calls"] >= len(probes)
