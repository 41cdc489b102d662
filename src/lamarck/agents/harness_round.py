"""One harness-critic round over stored data: read the recent failures and verified successes of an environment,
build the development slice, run the critic against the current harness, and archive what it decided."""

from __future__ import annotations

import logging

from sqlalchemy import select

from lamarck.agents.demonstrations import verified_examples
from lamarck.agents.harness import HarnessSpec, load_harness, promoted_harness, save_harness
from lamarck.agents.harness_archive import raced_against, record_round
from lamarck.agents.harness_critic import HarnessCritic, HarnessCriticInput, HarnessCriticOutput, dev_evaluator
from lamarck.agents.harness_proposals import FailureCase
from lamarck.curriculum.environment import Environment
from lamarck.curriculum.heldout import RESERVED_PER_LEVEL, dev_set
from lamarck.platform.llm.gateway import LLMGateway
from lamarck.platform.settings import HarnessCriticSettings
from lamarck.platform.storage import repositories as repo
from lamarck.platform.storage.database import Database
from lamarck.platform.storage.records import Episode, Task, Verdict

log = logging.getLogger(__name__)

RECENT_FAILURES = 64


def failure_cases(
    db: Database, environment: str, *, harness_id: str | None = None, limit: int = RECENT_FAILURES
) -> tuple[list[FailureCase], list[str]]:
    """The newest failed attempts of an environment (under ``harness_id`` when given) and a few failed replies."""
    cases: list[FailureCase] = []
    replies: list[str] = []
    with db.session() as session:
        query = (
            select(Episode, Task)
            .join(Task, Task.id == Episode.task_id)
            .where(
                Task.environment == environment,
                Episode.outcome != "passed",
                Episode.outcome != "pending",
                Episode.repaired_from_id.is_(None),
            )
            .order_by(Episode.created_at.desc())
            .limit(limit)
        )
        if harness_id is not None:
            query = query.where(Episode.harness_version == harness_id)
        found = session.execute(query).tuples().all()
        verdicts = {
            v.episode_id: dict(v.details or {})
            for v in session.scalars(
                select(Verdict).where(Verdict.episode_id.in_([episode.id for episode, _ in found]))
            )
        }
        for episode, task in found:
            details = verdicts.get(episode.id, {})
            feedback = [s.content or "" for s in episode.steps if s.role == "user" and (s.meta or {}).get("feedback")]
            own = [
                s.content or "" for s in episode.steps if s.role == "assistant" and not (s.meta or {}).get("few_shot")
            ]
            cases.append(
                FailureCase(
                    episode_id=episode.id,
                    difficulty=task.difficulty,
                    failure_reason=episode.failure_reason,
                    answered=episode.answer is not None,
                    verifier_detail=str(details.get("verifier") or ""),
                    feedback=feedback,
                )
            )
            if own and len(replies) < 3:
                replies.append(own[-1])
    return cases, replies


def current_harness(db: Database, env: Environment, default: HarnessSpec) -> tuple[str, HarnessSpec]:
    """The environment's promoted harness, or its default saved as the promoted root."""
    with db.session() as session:
        found = promoted_harness(session, env.name)
        if found is None:
            found = save_harness(session, default, status="promoted", rationale="the environment's default harness")
            repo.get_harness(session, harness_id=found).status = "promoted"
        return found, load_harness(session, harness_id=found)


def run_round(
    db: Database,
    gateway: LLMGateway,
    env: Environment,
    *,
    model_version: str,
    settings: HarnessCriticSettings,
    default: HarnessSpec,
    round_: int = 0,
    run_id: str | None = None,
    hold_for_approval: bool = False,
) -> HarnessCriticOutput:
    """One round on ``env``: champion/challenger on its development slice (training seeds), archived."""
    champion_id, champion = current_harness(db, env, default)
    with db.session() as session:
        tried = raced_against(session, champion_id, model_version)
    failures, replies = failure_cases(db, env.name)
    tasks = dev_set(env.name, per_level=settings.dev_per_level, env=env)
    deeper = min(RESERVED_PER_LEVEL, settings.dev_per_level + settings.edge_tasks)
    taken = {task.fingerprint for task in tasks}
    reserve = [task for task in dev_set(env.name, per_level=deeper, env=env) if task.fingerprint not in taken]
    critic = HarnessCritic(dev_evaluator(gateway, env, model_version, seed=settings.seed), settings, gateway)
    output = critic.run(
        HarnessCriticInput(
            champion=champion,
            dev_tasks=tasks,
            reserve_tasks=reserve,
            failures=failures,
            failed_replies=replies,
            demonstrations=verified_examples(db, env.name),
            registered_tools=[tool.name for tool in env.tools()],
            round=round_,
            tried=tried,
        )
    )
    record_round(
        db, output, round_=round_, run_id=run_id, hold_for_approval=hold_for_approval, model_version=model_version
    )
    log.info(
        "harness-critic round %d on %s: %d challengers, promoted %s",
        round_,
        env.name,
        len(output.challengers),
        output.promoted,
    )
    return output
