"""Evolution runs: the config a run is started with, its budget, and its lifecycle in the ``runs`` table.

A run's config is validated before anything is written, so bad input changes nothing. The
process driving a run records itself as the run's owner (pid and host in ``Run.summary``), so
``resume`` refuses a run that is still alive and ``stop`` of a run whose process died marks it
stopped at once.
"""

from __future__ import annotations

import hashlib
import os
import socket
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator
from sqlalchemy.orm import Session

from lamarck.agents.teacher import LADDER, HintLevel
from lamarck.curriculum.registry import get_environment
from lamarck.platform.llm.gateway import LLMGateway
from lamarck.platform.llm.version_names import version_call
from lamarck.platform.settings import DEFAULT_MODEL_VERSION
from lamarck.platform.storage import repositories as repo
from lamarck.platform.storage.database import Database
from lamarck.platform.storage.records import Run

ACTIVE = ("running", "stopping")
TERMINAL = ("finished", "budget_exhausted")


class RunError(ValueError):
    """A run request that cannot be honoured; the message is one line."""


class Budget(BaseModel):
    """Limits on what a run may spend; ``None`` means no limit. Checked between generations and before executing."""

    model_config = ConfigDict(extra="forbid")

    max_tokens: int | None = Field(None, ge=1)
    max_seconds: float | None = Field(None, gt=0)
    max_cost_usd: float | None = Field(None, gt=0)


class RunConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    environments: list[str] = Field(min_length=1)
    generations: int = Field(3, ge=1, le=10_000)
    batch_size: int = Field(16, ge=1, le=4096)
    samples_per_task: int | None = Field(None, ge=1, le=64)  # None: the harness's setting
    model_version: str = DEFAULT_MODEL_VERSION
    follow_champion: bool = (
        False  # each generation uses the version promoted at its start (falls back to model_version)
    )
    # with follow_champion, "better_candidate" rolls out with a refused candidate that beat the champion on the dev
    # slice (registry.rollout_sampler); "champion" always rolls out with the champion
    rollout_sampler: Literal["champion", "better_candidate"] = "better_candidate"
    harnesses: dict[str, str] = Field(
        default_factory=dict
    )  # environment -> harness version id; default harness otherwise
    seed: int = 0
    budget: Budget = Field(default_factory=Budget)
    llm_share: float = Field(0.25, ge=0.0, le=1.0)
    judge: bool = True
    repair: bool = True
    induce_skills: bool = True
    concurrency: int | None = Field(None, ge=1, le=1024)  # executor threads; None: the engine's rollout_concurrency
    hints: list[HintLevel] = Field(default_factory=lambda: list(LADDER))  # the teacher's ladder; ["none"]: no help
    # a cell's tasks enter the ladder above a rung once this many (decayed) tasks of the current model reached that
    # rung there and none was solved; None: every task climbs from the bottom
    rung_skip_after: float | None = Field(4.0, gt=0)
    frontier: Literal["learnable", "thompson"] = "learnable"  # how the proposer picks cells
    harness_critic_every: int = Field(0, ge=0, le=1_000_000)  # episodes between harness-critic rounds; 0: none

    @field_validator("environments")
    @classmethod
    def _distinct(cls, value: list[str]) -> list[str]:
        return list(dict.fromkeys(name.strip() for name in value if name.strip()))

    @field_validator("hints")
    @classmethod
    def _ladder_order(cls, value: list[HintLevel]) -> list[HintLevel]:
        if not value:
            raise ValueError("give at least one rung, for example ['none']")
        if len(set(value)) != len(value) or value != sorted(value, key=LADDER.index):
            raise ValueError(f"rungs must be distinct and in ladder order: {', '.join(h.value for h in LADDER)}")
        return value


def parse_config(data: dict[str, Any]) -> RunConfig:
    """A RunConfig from user input; a validation error becomes one line naming the field."""
    try:
        return RunConfig.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"]) or "config"
        raise RunError(f"invalid run config {where}: {first['msg']} (got {first.get('input')!r})") from None


def validate_config(config: RunConfig, db: Database, gateway: LLMGateway) -> None:
    """Check the config against what exists: environments, model version, harness versions."""
    if not config.environments:
        raise RunError("a run needs at least one environment: pass --env NAME")
    for name in config.environments:
        env = get_environment(name)  # UnknownEnvironment lists the known ones
        if not env.training_allowed:
            raise RunError(f"{name} is evaluation-only: evolve on a training environment, evaluate with `lamarck eval`")
    for name in config.harnesses:
        if name not in config.environments:
            raise RunError(f"harness given for {name!r}, which is not one of the run's environments")
    route = gateway.route("executor")
    with db.session() as session:
        if version_call(route, config.model_version) is not None:  # a route that serves versions must know it
            repo.get_model_version(session, version_id=config.model_version)
        for harness_id in config.harnesses.values():
            repo.get_harness(session, harness_id=harness_id)


def create_run(db: Database, config: RunConfig, *, name: str = "") -> str:
    with db.session() as session:
        run = repo.create_run(session, config=config.model_dump(mode="json"), name=name)
        return run.id


def load_config(run: Run) -> RunConfig:
    return RunConfig.model_validate(run.config)


def task_id_for(run_id: str, generation: int, index: int) -> str:
    """Deterministic, so a re-run node adds the same tasks instead of new ones."""
    return hashlib.sha256(f"{run_id}:g{generation}:t{index}".encode()).hexdigest()[:32]


def episode_key_prefix(run_id: str, generation: int) -> str:
    return f"{run_id}:g{generation}"


def derived_seed(seed: int, generation: int, purpose: str) -> int:
    digest = hashlib.sha256(f"{seed}:{generation}:{purpose}".encode()).digest()
    return int.from_bytes(digest[:4], "big")


# ownership and lifecycle


def owner_alive(run: Run) -> bool:
    owner = (run.summary or {}).get("owner") or {}
    pid, host = owner.get("pid"), owner.get("host")
    if not isinstance(pid, int) or host != socket.gethostname():
        return False  # another host's process cannot be checked; its lease is the status
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return _not_zombie(pid)


def _not_zombie(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return True


def claim(session: Session, run_id: str) -> Run:
    """Mark this process as the run's driver and the run as running."""
    run = repo.get_run(session, run_id=run_id)
    run.summary = {**(run.summary or {}), "owner": {"pid": os.getpid(), "host": socket.gethostname()}}
    repo.set_run_status(session, run_id=run_id, status="running")
    return run


def check_resumable(session: Session, run_id: str) -> Run:
    run = repo.get_run(session, run_id=run_id)
    if run.status in TERMINAL:
        raise RunError(f"run {run_id} is {run.status.replace('_', ' ')}: there is nothing to resume")
    if run.status in ACTIVE and owner_alive(run):
        owner = run.summary.get("owner", {})
        raise RunError(
            f"run {run_id} is still running (pid {owner.get('pid')}): stop it first with `lamarck runs stop`"
        )
    return run


def request_stop(db: Database, run_id: str) -> str:
    """Ask a running run to stop at its next node boundary; a run whose process died is marked stopped now."""
    with db.session() as session:
        run = repo.get_run(session, run_id=run_id)
        if run.status not in ("pending", *ACTIVE):
            raise RunError(
                f"run {run_id} is {run.status.replace('_', ' ')}: only a pending or running run can be stopped"
            )
        if run.status == "pending" or not owner_alive(run):
            repo.set_run_status(session, run_id=run_id, status="stopped")
            return "stopped"
        run.status = "stopping"
        return "stopping"


def stop_requested(db: Database, run_id: str) -> bool:
    with db.session() as session:
        return repo.get_run(session, run_id=run_id).status == "stopping"
