"""How often the critic's judge is fooled, in the spirit of WAFER-QA: a fixed set of attempts it should see through.

Two kinds of probe (``critic_probes.json``): plausible but wrong reasoning (a slipped sum, a misread question, a
tool result copied wrongly, stated with confidence), which the judge should fail; and correct but terse answers
(the bare answer, no work shown), which it should pass. Each probe goes to the judge exactly as an episode would,
through the same blind prompt (``critic.judge_attempt``); the judge is fooled when it passes a wrong attempt or fails
a right one. A verdict the critic would not keep (malformed, or the model unreachable) counts as ``no_verdict``, so
for every kind ``probes == fooled + held + no_verdict``.
"""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor
from importlib.resources import files
from typing import Literal

from pydantic import BaseModel, Field

from lamarck.agents.critic import EpisodeForReview, JudgeReply, judge_attempt
from lamarck.curriculum.environment import TaskSpec
from lamarck.platform.llm.gateway import LLMGateway
from lamarck.platform.storage.trajectory import Message, Trajectory

ProbeKind = Literal["plausible_wrong", "terse_correct"]
KINDS: tuple[ProbeKind, ...] = ("plausible_wrong", "terse_correct")


class Probe(BaseModel):
    id: str
    kind: ProbeKind
    environment: str
    task: str
    expected: str = Field(description="The right answer; the judge never sees it (the tests check each label).")
    turns: list[tuple[Literal["assistant", "tool"], str]]

    @property
    def correct(self) -> bool:
        return self.kind == "terse_correct"

    @property
    def answer(self) -> str:
        """The attempt's final reply (what the verifier would be given)."""
        return next(text for role, text in reversed(self.turns) if role == "assistant")

    def episode(self) -> EpisodeForReview:
        """The probe as the critic reviews an episode (the expected answer stays out of it)."""
        messages = [Message(role="user", content=self.task)]
        for index, (role, text) in enumerate(self.turns):
            call = f"probe-call-{index}" if role == "tool" else None
            messages.append(Message(role=role, content=text, tool_call_id=call))
        return EpisodeForReview(
            episode_id=f"probe:{self.id}",
            task=TaskSpec(environment=self.environment, difficulty=1, prompt=self.task),
            answer=self.answer,
            trajectory=Trajectory(messages=messages),
        )


class ProbeOutcome(BaseModel):
    id: str
    kind: ProbeKind
    judge_passed: bool | None = Field(description="The judge's kept verdict; null when it gave none the critic keeps.")
    fooled: bool | None = Field(description="It passed a wrong attempt or failed a right one; null without a verdict.")


class KindReport(BaseModel):
    kind: ProbeKind
    probes: int
    fooled: int
    held: int = Field(description="The judge gave the right verdict.")
    no_verdict: int
    fooled_rate: float | None = Field(description="fooled / (fooled + held); null when the judge gave no verdict.")


class RobustnessReport(BaseModel):
    critic_model: str
    probes: int
    fooled: int
    held: int
    no_verdict: int
    fooled_rate: float | None
    by_kind: list[KindReport]
    outcomes: list[ProbeOutcome]


def load_probes() -> list[Probe]:
    """The fixed probe set shipped with the package."""
    data = json.loads((files("lamarck.agents") / "critic_probes.json").read_text(encoding="utf-8"))
    return [Probe.model_validate(item) for item in data["probes"]]


def judge_robustness(
    gateway: LLMGateway,
    probes: list[Probe] | None = None,
    *,
    run_id: str | None = None,
    max_concurrency: int = 16,
) -> RobustnessReport:
    """Each probe judged once by the critic's judge (role ``critic``), and how often it was fooled."""
    probes = load_probes() if probes is None else probes

    def ask(probe: Probe) -> JudgeReply | None:
        return judge_attempt(gateway, probe.episode(), run_id=run_id, linked=False)

    with ThreadPoolExecutor(max_workers=max(1, min(max_concurrency, len(probes) or 1))) as pool:
        replies = list(pool.map(ask, probes))
    outcomes = [_outcome(probe, reply) for probe, reply in zip(probes, replies, strict=True)]
    by_kind = [_summary(kind, [o for o in outcomes if o.kind == kind]) for kind in KINDS]
    fooled, held = sum(k.fooled for k in by_kind), sum(k.held for k in by_kind)
    return RobustnessReport(
        critic_model=gateway.route("critic").model,
        probes=len(outcomes),
        fooled=fooled,
        held=held,
        no_verdict=sum(k.no_verdict for k in by_kind),
        fooled_rate=fooled / (fooled + held) if fooled + held else None,
        by_kind=by_kind,
        outcomes=outcomes,
    )


def _outcome(probe: Probe, reply: JudgeReply | None) -> ProbeOutcome:
    verdict = reply.passed if reply is not None and reply.well_formed else None
    return ProbeOutcome(
        id=probe.id,
        kind=probe.kind,
        judge_passed=verdict,
        fooled=None if verdict is None else verdict != probe.correct,
    )


def _summary(kind: ProbeKind, outcomes: list[ProbeOutcome]) -> KindReport:
    fooled = sum(o.fooled is True for o in outcomes)
    held = sum(o.fooled is False for o in outcomes)
    return KindReport(
        kind=kind,
        probes=len(outcomes),
        fooled=fooled,
        held=held,
        no_verdict=sum(o.fooled is None for o in outcomes),
        fooled_rate=fooled / (fooled + held) if fooled + held else None,
    )
