"""The critic: verdicts grounded in verifiers, critiques and lessons from the judge, repairs for training.

Ground truth wins. Where the task's environment can verify the answer, the verifier
decides pass/fail and the reward; the LLM judge (role ``critic``) only adds a process
critique — the first wrong step and what should have been done — and a short lesson.
The judge is blind: its prompt holds the task and the attempt, never the verifier's
result, so it rules on its own; its verdict is then compared with the verifier's and
both are recorded on the verdict with whether they agree (``critic_stats``). A judge
that claims success on a wrong answer changes nothing but that statistic. Only tasks
without a verifier take the judge's verdict, marked as such.
Repairs are shown the critic's first wrong step and a hint, never the expected answer
(``critic_repair``), and are marked as their own source of training rows.
Reviewing an episode twice returns the first verdict, so a resumed run never doubles work.
The judge's lessons are embedded together, in one call per review, then stored in order.
"""

from __future__ import annotations

import contextvars
import logging
import re
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING

from pydantic import BaseModel, Field
from sqlalchemy import select
from sqlalchemy.orm import Session

from lamarck.agents.critic_repair import first_step_sentence, repair_hint, repair_prompt
from lamarck.agents.critic_repair import repaired_trajectory as build_repaired_trajectory
from lamarck.agents.critic_stats import critic_stats
from lamarck.agents.harness import load_prompt
from lamarck.curriculum.environment import Environment, Reward, TaskSpec
from lamarck.memory.base import Embedding, MemoryStoreError
from lamarck.platform.llm.gateway import GatewayError, LLMGateway
from lamarck.platform.storage import repositories as repo
from lamarck.platform.storage.database import Database
from lamarck.platform.storage.records import Verdict
from lamarck.platform.storage.trajectory import Trajectory

if TYPE_CHECKING:
    from lamarck.memory.lessons import LessonStore

log = logging.getLogger(__name__)

MAX_ATTEMPT_CHARS = 3000
JUDGE_TOKENS = 160
REPAIR_TOKENS = 200
_FIELD = re.compile(r"^\s*[*_`]*(VERDICT|FIRST_ERROR|CRITIQUE|LESSON)[*_`]*\s*[:=]\s*(.*)$", re.IGNORECASE)


class EpisodeForReview(BaseModel):
    episode_id: str
    task: TaskSpec
    answer: str | None = None
    failure_reason: str | None = None
    trajectory: Trajectory = Field(default_factory=Trajectory)
    lessons_used: list[str] = Field(default_factory=list)


class CriticInput(BaseModel):
    episodes: list[EpisodeForReview]
    judge: bool = True
    repair: bool = True
    run_id: str | None = None


class JudgeReply(BaseModel):
    passed: bool | None = None
    first_error: str | None = None
    critique: str | None = None
    lesson: str | None = None
    well_formed: bool = False


class VerdictSummary(BaseModel):
    episode_id: str
    passed: bool
    reward: float
    source: str
    critique: str | None = None
    judge_passed: bool | None = None
    verifier_passed: bool | None = None
    agree: bool | None = None  # judge and verifier gave the same verdict (None unless both gave one)
    lesson_id: str | None = None
    repaired_episode_id: str | None = None
    details: str = ""
    reused: bool = False


class CriticOutput(BaseModel):
    verdicts: list[VerdictSummary]
    lessons_added: int = 0
    lessons_merged: int = 0
    repaired: int = 0
    judge_malformed: int = 0
    memory_errors: list[str] = Field(default_factory=list)


class Critic:
    def __init__(
        self,
        gateway: LLMGateway | None,
        environments: Mapping[str, Environment],
        db: Database,
        *,
        lessons: LessonStore | None = None,
        max_concurrency: int = 32,
    ) -> None:
        self.gateway = gateway
        self.environments = environments
        self.db = db
        self.lessons = lessons
        self.max_concurrency = max_concurrency

    def run(self, request: CriticInput) -> CriticOutput:
        output = CriticOutput(verdicts=[])
        with self.db.session() as session:
            done = _existing_verdicts(session, [e.episode_id for e in request.episodes])
        pending = [e for e in request.episodes if e.episode_id not in done]
        judges = self._judge_all(pending, request) if request.judge else {}  # blind: rules before any verifier
        rewards = {e.episode_id: self._verify(e) for e in pending}
        repairs = self._repair_all(pending, rewards, judges, request) if request.repair else {}
        vectors = self._lesson_vectors(pending, judges)
        for episode in request.episodes:
            key = episode.episode_id
            if key in done:
                output.verdicts.append(done[key])
            else:
                output.verdicts.append(
                    self._record(episode, rewards[key], judges.get(key), repairs.get(key), output, vectors.get(key))
                )
        return output

    def _lesson_vectors(
        self, episodes: list[EpisodeForReview], judges: dict[str, JudgeReply | None]
    ) -> dict[str, Embedding]:
        """The judge's lessons embedded in one call; without them each lesson is embedded as it is stored."""
        lessons = {e.episode_id: judge.lesson for e in episodes if (judge := judges.get(e.episode_id)) and judge.lesson}
        if self.lessons is None or not lessons:
            return {}
        try:
            return dict(zip(lessons, self.lessons.embed(list(lessons.values())), strict=True))
        except MemoryStoreError as exc:
            log.warning("lessons not embedded together: %s", exc)
            return {}

    def _judge_all(self, episodes: list[EpisodeForReview], request: CriticInput) -> dict[str, JudgeReply | None]:
        """All judge calls at once, so the model server batches them."""
        if self.gateway is None or not episodes:
            return {}
        with ThreadPoolExecutor(max_workers=self.max_concurrency) as pool:
            contexts = [contextvars.copy_context() for _ in episodes]  # so each judge's spans stay under this node
            replies = pool.map(lambda c, e: c.run(self._judge, e, request.run_id), contexts, episodes)
            return {e.episode_id: reply for e, reply in zip(episodes, replies, strict=True)}

    def _repair_all(
        self,
        episodes: list[EpisodeForReview],
        rewards: dict[str, Reward | None],
        judges: dict[str, JudgeReply | None],
        request: CriticInput,
    ) -> dict[str, Trajectory | None]:
        failed = [e for e in episodes if (r := rewards[e.episode_id]) is not None and not r.passed]
        if self.gateway is None or not failed:
            return {}

        def repair(episode: EpisodeForReview) -> Trajectory | None:
            judge = judges.get(episode.episode_id)
            return self._repair(episode, judge.first_error if judge else None, request.run_id)

        with ThreadPoolExecutor(max_workers=self.max_concurrency) as pool:
            contexts = [contextvars.copy_context() for _ in failed]
            repaired = pool.map(lambda c, e: c.run(repair, e), contexts, failed)
            return {e.episode_id: t for e, t in zip(failed, repaired, strict=True)}

    def _verify(self, episode: EpisodeForReview) -> Reward | None:
        """The verifier's reward, or None where the task has no verifier (user-submitted tasks)."""
        env = self.environments.get(episode.task.environment)
        if env is None or not episode.task.reference:
            return None
        if episode.answer is None:
            return Reward.fail(episode.failure_reason or "no answer")
        try:
            return env.verify(episode.task, episode.answer)
        except Exception as exc:  # a verifier bug must not lose the episode
            log.exception("verifier of %s failed on episode %s", env.name, episode.episode_id)
            return Reward.fail(f"verifier error: {type(exc).__name__}: {exc}")

    def _judge(self, episode: EpisodeForReview, run_id: str | None) -> JudgeReply | None:
        assert self.gateway is not None
        return judge_attempt(self.gateway, episode, run_id=run_id)

    def _repair(self, episode: EpisodeForReview, first_error: str | None, run_id: str | None) -> Trajectory | None:
        """A corrected trajectory that passes the verifier, or None. The repair is shown the critic's first wrong
        step and the environment's hint, never the expected answer or the verifier's feedback (which names it)."""
        assert self.gateway is not None
        env = self.environments[episode.task.environment]
        hint = repair_hint(env, episode.task)
        prompt = repair_prompt(
            episode.task, first_step_sentence(episode.trajectory.messages, first_error), hint, env.answer_format
        )
        try:
            text = self.gateway.complete(
                "critic",
                [{"role": "user", "content": prompt}],
                max_tokens=REPAIR_TOKENS,
                run_id=run_id,
                episode_id=episode.episode_id,
            ).text.strip()
        except GatewayError:
            return None
        try:
            if not text or not env.verify(episode.task, text).passed:
                return None
        except Exception:
            return None
        return build_repaired_trajectory(episode.task, episode.trajectory, text, hint)

    def _record(
        self,
        episode: EpisodeForReview,
        reward: Reward | None,
        judge: JudgeReply | None,
        repair: Trajectory | None,
        output: CriticOutput,
        lesson_vector: Embedding | None = None,
    ) -> VerdictSummary:
        if judge is not None and not judge.well_formed:
            output.judge_malformed += 1
        judged = judge is not None and judge.well_formed
        judge_passed = judge.passed if judged and judge is not None else None
        verifier_passed = reward.passed if reward is not None else None
        agree = None if judge_passed is None or verifier_passed is None else judge_passed == verifier_passed
        if reward is not None:
            passed, score, details = reward.passed, reward.score, reward.details
            source = "both" if judged else "verifier"
        elif judged and judge is not None and judge.passed is not None:
            passed, score, details, source = judge.passed, float(judge.passed), "judge verdict (no verifier)", "judge"
        else:
            passed, score, details, source = False, 0.0, "no verifier and no usable judge verdict", "judge"
        critique = None
        if judge is not None and judge.critique:
            critique = (
                judge.critique
                if not judge.first_error
                else f"first error at step {judge.first_error}: {judge.critique}"
            )
        lesson_id = self._keep_lesson(episode, judge, passed if reward is not None else None, output, lesson_vector)
        with self.db.session() as session:
            stored = repo.get_episode(session, episode_id=episode.episode_id)
            repaired_id = None
            if repair is not None:
                repaired_id = repo.record_episode(
                    session,
                    task_id=stored.task_id,
                    run_id=stored.run_id,
                    model_version=stored.model_version,
                    harness_version=stored.harness_version,
                    trajectory=repair,
                    answer=repair.messages[-1].content,
                    outcome="passed",
                    reward=1.0,
                    generation=stored.generation,
                    repaired_from_id=stored.id,
                    idempotency_key=f"repair:{stored.id}",
                ).id
                output.repaired += 1
            stored.outcome = "passed" if passed else "failed"
            stored.reward = score
            repo.add_verdict(
                session,
                episode_id=episode.episode_id,
                reward=score,
                passed=passed,
                source=source,
                critique=critique,
                judge_passed=judge_passed,
                critic_model=self.gateway.route("critic").model if self.gateway is not None else None,
                lesson_id=lesson_id,
                repaired_episode_id=repaired_id,
                details={
                    "verifier": details,
                    "first_error": judge.first_error if judge else None,
                    "judge_blind": judge is not None,  # the judge never sees the verifier's result
                    "verifier_passed": verifier_passed,
                    "agree": agree,
                },
            )
        return VerdictSummary(
            episode_id=episode.episode_id,
            passed=passed,
            reward=score,
            source=source,
            critique=critique,
            judge_passed=judge_passed,
            verifier_passed=verifier_passed,
            agree=agree,
            lesson_id=lesson_id,
            repaired_episode_id=repaired_id,
            details=details,
        )

    def _keep_lesson(
        self,
        episode: EpisodeForReview,
        judge: JudgeReply | None,
        verified: bool | None,
        output: CriticOutput,
        vector: Embedding | None,
    ) -> str | None:
        """Store the judge's lesson and credit the lessons the episode was shown; memory trouble loses no verdict."""
        if self.lessons is None:
            return None
        lesson_id = None
        try:
            if judge is not None and judge.lesson:
                write = self.lessons.add(
                    judge.lesson, environment=episode.task.environment, episode_id=episode.episode_id, embedding=vector
                )
                lesson_id = write.lesson_id
                output.lessons_merged += int(write.merged)
                output.lessons_added += int(not write.merged)
            if episode.lessons_used and verified is not None:
                self.lessons.credit(episode.lessons_used, passed=verified)
        except MemoryStoreError as exc:
            output.memory_errors.append(str(exc))
            log.warning("lesson for episode %s not stored: %s", episode.episode_id, exc)
        return lesson_id


def parse_judge(text: str) -> JudgeReply:
    fields: dict[str, str] = {}
    for line in text.splitlines():
        match = _FIELD.match(line)
        if match and match.group(1).upper() not in fields:
            fields[match.group(1).upper()] = match.group(2).strip().strip("*_` ")
    verdict = fields.get("VERDICT", "").lower()
    passed = True if verdict.startswith("pass") else False if verdict.startswith("fail") else None
    first_error = fields.get("FIRST_ERROR") or None
    if first_error and first_error.lower() in ("none", "n/a", "-"):
        first_error = None
    return JudgeReply(
        passed=passed,
        first_error=first_error,
        critique=fields.get("CRITIQUE") or None,
        lesson=fields.get("LESSON") or None,
        well_formed=passed is not None and bool(fields.get("CRITIQUE") or fields.get("LESSON")),
    )


def judge_prompt(episode: EpisodeForReview) -> str:
    """The blind judge's prompt: the task and the attempt, nothing the verifier said."""
    return load_prompt("critic_judge.md").format(task=episode.task.prompt, attempt=render_attempt(episode))


def judge_attempt(
    gateway: LLMGateway, episode: EpisodeForReview, *, run_id: str | None = None, linked: bool = True
) -> JudgeReply | None:
    """The judge's own ruling on one attempt (role ``critic``), or None when the model cannot be reached. ``linked``
    records the call against the episode (off for attempts that are not stored episodes, such as probes)."""
    try:
        text = gateway.complete(
            "critic",
            [{"role": "user", "content": judge_prompt(episode)}],
            max_tokens=JUDGE_TOKENS,
            run_id=run_id,
            episode_id=episode.episode_id if linked else None,
        ).text
    except GatewayError as exc:
        log.warning("judge unavailable for episode %s: %s", episode.episode_id, exc)
        return None
    return parse_judge(text)


def render_attempt(episode: EpisodeForReview) -> str:
    """The attempt as numbered steps (the model's own replies; the harness's worked examples are not steps)."""
    lines = []
    step = 0
    for message in episode.trajectory.messages:
        if message.meta.get("few_shot"):
            continue
        if message.role == "assistant":
            step += 1
            lines.append(f"Step {step}: {message.content or ''}")
        elif message.role == "tool":
            lines.append(f"  result: {message.content or ''}")
        elif message.role == "user" and message.meta.get("feedback"):
            lines.append(f"  feedback: {message.content or ''}")
    if episode.failure_reason:
        lines.append(f"Ended without an answer: {episode.failure_reason}")
    text = "\n".join(lines) or "(the attempt is empty)"
    return (
        text
        if len(text) <= MAX_ATTEMPT_CHARS
        else text[: MAX_ATTEMPT_CHARS // 2] + "\n...\n" + text[-MAX_ATTEMPT_CHARS // 2 :]
    )


def judge_agreement(session: Session) -> list[dict[str, object]]:
    """How often the judge agreed with the verifier, per critic model and harness version, over every judged verdict
    (those from before the judge was blind too); ``critic_stats`` has the blind verdicts' agreement, precision and
    recall."""
    return [
        {"critic_model": g.critic_model, "harness_version": g.harness_version, "n": g.judged, "agreement": g.agreement}
        for g in critic_stats(session, include_unblinded=True).groups
    ]


def _existing_verdicts(session: Session, episode_ids: Sequence[str]) -> dict[str, VerdictSummary]:
    found: dict[str, VerdictSummary] = {}
    if not episode_ids:
        return found
    for verdict in session.scalars(select(Verdict).where(Verdict.episode_id.in_(list(episode_ids)))):
        found[verdict.episode_id] = VerdictSummary(
            episode_id=verdict.episode_id,
            passed=verdict.passed,
            reward=verdict.reward,
            source=verdict.source,
            critique=verdict.critique,
            judge_passed=verdict.judge_passed,
            verifier_passed=(verdict.details or {}).get("verifier_passed"),
            agree=(verdict.details or {}).get("agree"),
            lesson_id=verdict.lesson_id,
            repaired_episode_id=verdict.repaired_episode_id,
            details=str((verdict.details or {}).get("verifier", "")),
            reused=True,
        )
    return found
