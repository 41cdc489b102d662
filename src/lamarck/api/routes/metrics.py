"""A run's learning curves: success and reward per generation (overall and per environment), downsampled on the
server, and success per environment x difficulty per generation."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Annotated

from fastapi import APIRouter, Depends, Path, Query
from pydantic import BaseModel, ConfigDict, Field

from lamarck.api.deps import ContainerDep, ReadKey
from lamarck.api.errors import KEYED_ERRORS, ErrorResponse, documented
from lamarck.api.query import known_query_only
from lamarck.api.text import ID_PATTERN
from lamarck.platform.storage import api_repositories as api_repo
from lamarck.platform.storage import repositories as repo
from lamarck.platform.storage.api_repositories import OutcomeCell

router = APIRouter(
    prefix="/runs", tags=["runs"], responses=documented(*KEYED_ERRORS), dependencies=[Depends(known_query_only)]
)

RunId = Annotated[str, Path(pattern=ID_PATTERN, description="The run's id.")]
ERRORS: dict[int | str, dict[str, object]] = {code: {"model": ErrorResponse} for code in (401, 403, 404, 422)}


class Bucket(BaseModel):
    """Generations ``first``..``last`` folded into one point; min and max keep the spikes a mean would hide."""

    first: int
    last: int
    attempts: int
    success_rate: float | None = Field(description="Successes over attempts across the bucket.")
    success_min: float | None
    success_max: float | None
    reward_mean: float | None
    reward_min: float | None
    reward_max: float | None


class Series(BaseModel):
    environment: str | None = Field(description="Null for the run overall.")
    buckets: list[Bucket]


class RunMetrics(BaseModel):
    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {
                    "run_id": "4be0d1",
                    "generations": 2,
                    "points": 200,
                    "overall": {
                        "environment": None,
                        "buckets": [
                            {
                                "first": 0,
                                "last": 0,
                                "attempts": 8,
                                "success_rate": 0.25,
                                "success_min": 0.25,
                                "success_max": 0.25,
                                "reward_mean": 0.25,
                                "reward_min": 0.25,
                                "reward_max": 0.25,
                            }
                        ],
                    },
                    "environments": [],
                }
            ]
        }
    )

    run_id: str
    generations: int = Field(description="How many generations the series spans (first to last with episodes).")
    points: int
    overall: Series
    environments: list[Series]


class CapabilityCellPublic(BaseModel):
    environment: str
    difficulty: int
    attempts: int
    successes: int
    success_rate: float


class CapabilityGeneration(BaseModel):
    generation: int
    cells: list[CapabilityCellPublic]


class RunCapability(BaseModel):
    run_id: str
    generations: list[CapabilityGeneration]


@dataclass
class _Point:
    attempts: int = 0
    successes: int = 0
    reward_sum: float = 0.0
    rewarded: int = 0


def bucket_edges(length: int, points: int) -> list[tuple[int, int]]:
    """Index ranges [start, end) of at most ``points`` buckets over ``length`` generations; they depend on nothing
    but the two numbers, so two runs of the same length are cut at the same generations."""
    count = min(length, points)
    return [(k * length // count, (k + 1) * length // count) for k in range(count)]


def downsample(points_by_generation: dict[int, _Point], first: int, length: int, points: int) -> list[Bucket]:
    buckets = []
    for start, end in bucket_edges(length, points):
        inside = [points_by_generation[g] for g in range(first + start, first + end) if g in points_by_generation]
        rates = [p.successes / p.attempts for p in inside if p.attempts]
        rewards = [p.reward_sum / p.rewarded for p in inside if p.rewarded]
        attempts = sum(p.attempts for p in inside)
        rewarded = sum(p.rewarded for p in inside)
        buckets.append(
            Bucket(
                first=first + start,
                last=first + end - 1,
                attempts=attempts,
                success_rate=sum(p.successes for p in inside) / attempts if attempts else None,
                success_min=min(rates, default=None),
                success_max=max(rates, default=None),
                reward_mean=sum(p.reward_sum for p in inside) / rewarded if rewarded else None,
                reward_min=min(rewards, default=None),
                reward_max=max(rewards, default=None),
            )
        )
    return buckets


def _fold(cells: Iterable[OutcomeCell]) -> dict[int, _Point]:
    folded: dict[int, _Point] = defaultdict(_Point)
    for cell in cells:
        point = folded[cell.generation]
        point.attempts += cell.attempts
        point.successes += cell.successes
        point.reward_sum += cell.reward_sum
        point.rewarded += cell.rewarded
    return dict(folded)


@router.get(
    "/{run_id}/metrics",
    operation_id="getRunMetrics",
    response_model=RunMetrics,
    responses=ERRORS,
    summary="Success and reward per generation, overall and per environment",
)
def run_metrics(
    run_id: RunId,
    container: ContainerDep,
    _: ReadKey,
    points: Annotated[int, Query(ge=1, le=1000, description="At most this many buckets per series.")] = 200,
) -> RunMetrics:
    with container.db.session() as session:
        repo.get_run(session, run_id=run_id)
        cells = api_repo.run_outcome_cells(session, run_id=run_id)
    if not cells:
        return RunMetrics(
            run_id=run_id, generations=0, points=points, overall=Series(environment=None, buckets=[]), environments=[]
        )
    first = min(c.generation for c in cells)
    length = max(c.generation for c in cells) - first + 1
    per_env: dict[str, list[OutcomeCell]] = defaultdict(list)
    for cell in cells:
        per_env[cell.environment].append(cell)
    return RunMetrics(
        run_id=run_id,
        generations=length,
        points=points,
        overall=Series(environment=None, buckets=downsample(_fold(cells), first, length, points)),
        environments=[
            Series(environment=env, buckets=downsample(_fold(per_env[env]), first, length, points))
            for env in sorted(per_env)
        ],
    )


@router.get(
    "/{run_id}/capability",
    operation_id="getRunCapability",
    response_model=RunCapability,
    responses=ERRORS,
    summary="Success per environment x difficulty, per generation",
)
def run_capability(run_id: RunId, container: ContainerDep, _: ReadKey) -> RunCapability:
    with container.db.session() as session:
        repo.get_run(session, run_id=run_id)
        cells = api_repo.run_outcome_cells(session, run_id=run_id)
    by_generation: dict[int, list[CapabilityCellPublic]] = defaultdict(list)
    for cell in cells:
        by_generation[cell.generation].append(
            CapabilityCellPublic(
                environment=cell.environment,
                difficulty=cell.difficulty,
                attempts=cell.attempts,
                successes=cell.successes,
                success_rate=cell.successes / cell.attempts,
            )
        )
    return RunCapability(
        run_id=run_id,
        generations=[CapabilityGeneration(generation=g, cells=by_generation[g]) for g in sorted(by_generation)],
    )
