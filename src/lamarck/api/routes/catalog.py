"""What the loop learns on: the environments with their difficulty ladders, and the capability profile the
curriculum reads (success estimates per environment x difficulty)."""

from __future__ import annotations

from fastapi import APIRouter, Depends
from pydantic import BaseModel, ConfigDict, Field

from lamarck.api.deps import ContainerDep, ReadKey
from lamarck.api.errors import KEYED_ERRORS, ErrorResponse, documented
from lamarck.api.query import known_query_only
from lamarck.curriculum.profile import CapabilityProfile, ProfileSnapshot
from lamarck.curriculum.registry import get_environment, list_environments

router = APIRouter(tags=["curriculum"], responses=documented(*KEYED_ERRORS), dependencies=[Depends(known_query_only)])

ERRORS: dict[int | str, dict[str, object]] = {code: {"model": ErrorResponse} for code in (401, 403)}


class EnvironmentPublic(BaseModel):
    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {
                    "name": "arithmetic",
                    "description": "Integer arithmetic word problems.",
                    "difficulties": [1, 2, 3, 4, 5],
                    "training_allowed": True,
                    "tools": ["calculator"],
                }
            ]
        }
    )

    name: str
    description: str
    difficulties: list[int] = Field(description="The difficulty ladder, easiest first.")
    training_allowed: bool = Field(description="False for an evaluation-only environment.")
    tools: list[str]


class EnvironmentList(BaseModel):
    environments: list[EnvironmentPublic]


@router.get(
    "/environments",
    operation_id="listEnvironments",
    response_model=EnvironmentList,
    responses=ERRORS,
    summary="Environments with their difficulty ladders",
)
def environments(_: ReadKey) -> EnvironmentList:
    listed = []
    for name in list_environments():
        env = get_environment(name)
        listed.append(
            EnvironmentPublic(
                name=name,
                description=env.description,
                difficulties=sorted(env.difficulties),
                training_allowed=env.training_allowed,
                tools=[tool.name for tool in env.tools()],
            )
        )
    return EnvironmentList(environments=listed)


@router.get(
    "/curriculum/profile",
    operation_id="getCurriculumProfile",
    response_model=ProfileSnapshot,
    responses=ERRORS,
    summary="Success estimates per environment x difficulty (Beta posterior mean and interval)",
)
def curriculum_profile(container: ContainerDep, _: ReadKey) -> ProfileSnapshot:
    with container.db.session() as session:
        return CapabilityProfile.load(session).snapshot()
