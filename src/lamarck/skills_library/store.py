"""Skill repository functions over ``Skill`` and ``SkillVersion``: the session first, keywords after it.

``Skill.provenance`` holds the kind (builtin, plugin, induced, user); a plug-in's distribution name is kept in
``SkillVersion.package`` (the kind column is 20 characters), and ``provenance_label`` joins them.
"""

from __future__ import annotations

from sqlalchemy import select
from sqlalchemy.orm import Session

from lamarck.platform.storage.records import Skill, SkillUse, SkillVersion
from lamarck.skills_library.skill import SkillVersionView, SkillView, provenance_label

ACTIVE = "active"
DEPRECATED = "deprecated"


def find_skill(session: Session, *, name: str) -> Skill | None:
    return session.scalar(select(Skill).where(Skill.name == name))


def list_skills(session: Session, *, include_deprecated: bool = False) -> list[Skill]:
    query = select(Skill).order_by(Skill.name)
    if not include_deprecated:
        query = query.where(Skill.status == ACTIVE)
    return list(session.scalars(query))


def current_version(skill: Skill) -> SkillVersion:
    for version in skill.versions:
        if version.version == skill.current_version:
            return version
    raise LookupError(f"skill {skill.name!r} has no version {skill.current_version}")


def skill_package(skill: Skill) -> str | None:
    return current_version(skill).package if skill.versions else None


def skill_provenance(skill: Skill) -> str:
    return provenance_label(skill.provenance, skill_package(skill))


def create_skill(session: Session, *, name: str, provenance: str, version: SkillVersion) -> Skill:
    version.version = 1
    skill = Skill(
        name=name,
        provenance=provenance,
        status=ACTIVE,
        current_version=1,
        times_used=0,
        times_succeeded=0,
        versions=[version],
    )
    session.add(skill)
    session.flush()
    return skill


def add_version(session: Session, *, skill: Skill, version: SkillVersion) -> SkillVersion:
    """Append a version and make it current; usage statistics restart, since they describe the current code."""
    version.version = max((v.version for v in skill.versions), default=0) + 1
    skill.versions.append(version)
    skill.current_version = version.version
    skill.status = ACTIVE
    skill.times_used = 0
    skill.times_succeeded = 0
    session.flush()
    return version


def record_use(session: Session, *, name: str, success: bool, use_key: str | None = None) -> tuple[Skill | None, bool]:
    """The skill (None if unknown) and whether this use was counted now (False: its ``use_key`` was counted before)."""
    skill = find_skill(session, name=name)
    if skill is None:
        return None, False
    if use_key is not None:
        if session.get(SkillUse, use_key) is not None:
            return skill, False
        session.add(SkillUse(key=use_key, skill_name=name, success=success))
    skill.times_used += 1
    skill.times_succeeded += int(success)
    session.flush()
    return skill, True


def to_view(skill: Skill) -> SkillView:
    current = current_version(skill)
    description = current.docstring.strip().splitlines()[0] if current.docstring.strip() else ""
    return SkillView(
        name=skill.name,
        provenance=provenance_label(skill.provenance, current.package),
        status=skill.status,
        version=skill.current_version,
        signature=current.signature,
        description=description,
        code=current.code,
        tests=current.tests,
        times_used=skill.times_used,
        times_succeeded=skill.times_succeeded,
        source_episode_ids=list(current.source_episode_ids or []),
        versions=[
            SkillVersionView(
                version=v.version,
                signature=v.signature,
                docstring=v.docstring,
                code=v.code,
                tests=v.tests,
                code_digest=v.code_digest,
                source_episode_ids=list(v.source_episode_ids or []),
                package=v.package,
            )
            for v in skill.versions
        ],
    )
