"""The critic's judge against the verifiers (scope ``read``): agreement, and precision and recall of its "pass",
per critic model and harness version, through the function ``lamarck critic stats`` uses."""

from __future__ import annotations

from fastapi import APIRouter, Depends

from lamarck.agents.critic_stats import CriticStats, critic_stats
from lamarck.api.deps import ContainerDep, ReadKey
from lamarck.api.errors import KEYED_ERRORS, ErrorResponse, documented
from lamarck.api.query import known_query_only

router = APIRouter(
    prefix="/critic",
    tags=["critic"],
    responses=documented(*KEYED_ERRORS),
    dependencies=[Depends(known_query_only)],
)

ERRORS: dict[int | str, dict[str, object]] = {code: {"model": ErrorResponse} for code in (401, 403, 422)}


class CriticStatsPublic(CriticStats):
    """The judge's blind verdicts against the verifier's. Verdicts judged before the judge was blind are counted
    (``unblinded``) but left out of the rates; a rate is null where it would divide by zero."""


@router.get(
    "/stats",
    operation_id="getCriticStats",
    response_model=CriticStatsPublic,
    responses=ERRORS,
    summary="How often the critic's judge agrees with the verifier, per critic model and harness",
)
def get_critic_stats(container: ContainerDep, _: ReadKey) -> CriticStatsPublic:
    with container.db.session() as session:
        return CriticStatsPublic.model_validate(critic_stats(session).model_dump())
