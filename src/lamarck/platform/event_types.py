"""Every event the platform publishes: one pydantic model per type, the only things the bus accepts.

A writer builds the model (a misspelt or missing field fails where it is written); a reader (the CLI, the REST
API, the web UI) gets it back with ``BusEvent.parsed()``. ``TYPE`` is the name stored with the event and never
changes, so stored runs keep reading. ``VERSION`` counts payload revisions: a revision may add fields with
defaults, never rename or drop one, so an older stored payload still validates.

Nested structures that another part owns (a run's config, a generation's summary, a gate's per-environment
comparisons) travel as JSON objects; their owners validate them with their own models.
"""

from __future__ import annotations

from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict

JsonObject = dict[str, Any]


class Event(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    TYPE: ClassVar[str]
    VERSION: ClassVar[int] = 1


# ---- runs --------------------------------------------------------------------------------------


class _RunOpened(Event):
    config: JsonObject
    next: list[str]  # the nodes the graph runs next
    generation: int


class RunStarted(_RunOpened):
    TYPE = "run_started"


class RunResumed(_RunOpened):
    TYPE = "run_resumed"


class _RunClosed(Event):
    generations_done: int
    reason: str | None = None


class _RunEnded(_RunClosed):
    usage: JsonObject | None = None  # tokens and cost, when the run's last node wrote the event
    active_seconds: float | None = None


class RunFinished(_RunEnded):
    TYPE = "run_finished"


class BudgetExhausted(_RunEnded):
    TYPE = "budget_exhausted"


class RunStopped(_RunClosed):
    TYPE = "run_stopped"


class RunFailed(_RunClosed):
    TYPE = "run_failed"


# ---- a generation ------------------------------------------------------------------------------


class TasksProposed(Event):
    TYPE = "tasks_proposed"
    generation: int
    count: int
    sources: dict[str, int]
    llm_attempted: int
    llm_accepted: int
    fallbacks: int
    rejections: dict[str, int]


class HintLadderRan(Event):
    TYPE = "hint_ladder"
    generation: int
    rungs: list[JsonObject]
    solved_at: dict[str, str]  # task index -> the weakest hint level that solved it


class EpisodeFinished(Event):
    TYPE = "episode_finished"
    generation: int
    episode_id: str
    task_id: str
    environment: str
    difficulty: int
    sample: int
    hint: str
    outcome: str  # "answered" or "no_answer"; the verdict says whether the answer passed
    failure_reason: str | None
    steps: int
    skills_used: list[str]
    tokens: int


class VerdictGiven(Event):
    TYPE = "verdict"
    generation: int
    episode_id: str
    passed: bool
    reward: float
    source: str
    judge_passed: bool | None
    repaired_episode_id: str | None


class LessonLearned(Event):
    TYPE = "lesson"
    generation: int
    lesson_id: str
    episode_id: str
    text: str
    merged: bool


class SkillAdded(Event):
    TYPE = "skill_added"
    generation: int
    name: str
    version: int
    reason: str
    episode_ids: list[str]


class SkillDeprecated(Event):
    """A person retired a skill from retrieval by hand (``POST /v1/skills/{name}/deprecate``): who and why; a new
    version of its code makes it active again."""

    TYPE = "skill.deprecated"
    name: str
    version: int
    reason: str
    deprecated_by: str


class GenerationSummarized(Event):
    """The fields of ``agents.summary.GenerationSummary`` (validate the payload with it); open here because that
    model belongs to the agents, above this module."""

    model_config = ConfigDict(extra="allow", frozen=True)
    TYPE = "generation_summary"
    generation: int


class HarnessRoundHeld(Event):
    TYPE = "harness_round"
    generation: int
    environment: str
    round: int
    model_version: str
    champion: str
    promoted: str | None
    challengers: int
    invalid: int
    tasks_evaluated: int


# ---- distillation, training and the gate ----------------------------------------------------


class DistillationError(Event):
    TYPE = "distillation.error"
    step: str
    error: str


class TrainingScheduled(Event):
    TYPE = "training.scheduled"
    parent_version: str
    dataset_digest: str
    rows: int
    pairs: int


class TrainingDatasetRefused(Event):
    TYPE = "training.dataset_refused"
    parent_version: str
    dataset_digest: str
    reason: str


class TrainingRefused(Event):
    TYPE = "training.refused"
    version_id: str
    parent_version: str
    dataset_digest: str
    reason: str
    metrics: JsonObject = {}


class TrainingMetrics(Event):
    """One logging step of a training job: ``version`` and whatever the trainer logged (loss, learning rate...)."""

    model_config = ConfigDict(extra="allow", frozen=True)
    TYPE = "training.metrics"
    version: str


class CandidateTrained(Event):
    TYPE = "model.candidate"
    version: str
    parent: str
    digest: str
    first_loss: float | None
    last_loss: float | None
    val_loss_start: float | None = None
    val_loss_best: float | None = None


class GateDecided(Event):
    """A gate decision (``training.gate.GateDecision``), or ``error`` when the gate could not evaluate the
    candidate."""

    TYPE = "model.gate"
    candidate: str
    promote: bool
    champion: str | None = None
    reason: str | None = None
    p_value: float | None = None
    alpha: float | None = None
    tolerance: float | None = None
    harm_alpha: float | None = None
    environments: list[JsonObject] = []
    look: int | None = None
    power: float | None = None
    error: str | None = None


# ---- human in the loop ---------------------------------------------------------------------------


class ApprovalRequested(Event):
    """A change the loop would have applied now waits for a person (``ApprovalSettings.required``)."""

    TYPE = "approval.requested"
    approval_id: str
    kind: str  # "model", "harness" or "skill"
    subject: str  # the model version, harness id or skill name
    reason: str


class ApprovalDecided(Event):
    """The audit record of a decision on a pending approval: who (an API key id, or "cli"), what, and why."""

    TYPE = "approval.decided"
    approval_id: str
    kind: str
    subject: str
    decision: str  # "approved" or "rejected"
    reason: str
    decided_by: str


# ---- background jobs ---------------------------------------------------------------------------


class _Job(Event):
    job: str
    task: str
    celery_id: str | None
    attempt: int
    redelivered: bool


class JobStarted(_Job):
    TYPE = "job.started"


class JobDeferred(_Job):
    TYPE = "job.deferred"
    reason: str
    countdown: float


class JobRetrying(_Job):
    TYPE = "job.retrying"
    error: str
    countdown: float


class JobFailed(_Job):
    TYPE = "job.failed"
    error: str
    final: bool
    retryable: bool


class JobSucceeded(_Job):
    TYPE = "job.succeeded"
    result: Any = None


class JobProgress(Event):
    TYPE = "job.progress"
    job: str
    step: int
    pid: int


def _concrete(base: type[Event]) -> list[type[Event]]:
    found = []
    for cls in base.__subclasses__():
        if "TYPE" in vars(cls):
            found.append(cls)
        found.extend(_concrete(cls))
    return found


EVENT_TYPES: dict[str, type[Event]] = {cls.TYPE: cls for cls in _concrete(Event)}


def parse_event(type: str, payload: JsonObject) -> Event | None:
    """The typed event for a stored ``type`` and ``payload``; None for a type this version does not know or a
    payload that does not validate (a reader shows those raw). Unknown keys are dropped for closed types."""
    cls = EVENT_TYPES.get(type)
    if cls is None:
        return None
    known = (
        payload
        if cls.model_config.get("extra") == "allow"
        else {k: payload[k] for k in cls.model_fields if k in payload}
    )
    try:
        return cls.model_validate(known)
    except ValueError:
        return None
