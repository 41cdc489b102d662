"""How far the critic's judge can be trusted: its blind verdicts against the verifier's, per critic model and harness.

The judge rules before it is shown anything the verifier said (``prompts/critic_judge.md``); the critic then records
both verdicts and whether they agree on the verdict (``details``: ``judge_blind``, ``verifier_passed``, ``agree``).
Only verdicts with both a verifier and a well-formed judge verdict count. Verdicts recorded before the judge was
blind (its prompt then told it the checker's result) measure obedience, not agreement: they are counted apart
(``unblinded``) and left out of the rates unless asked for. ``precision`` and ``recall`` are those of the judge's
"pass" with the verifier as ground truth: of the attempts the judge passed, the share the verifier passed; of the
attempts the verifier passed, the share the judge passed.
"""

from __future__ import annotations

from collections.abc import Iterable

from pydantic import BaseModel, ConfigDict, Field, JsonValue
from sqlalchemy import select
from sqlalchemy.orm import Session

from lamarck.platform.storage.records import Episode, Verdict

EXAMPLE: dict[str, JsonValue] = {
    "critic_model": "lamarck/smollm2-135m",
    "harness_version": "arithmetic-3f2a9c1e0b7d",
    "judged": 40,
    "true_pass": 9,
    "false_pass": 14,
    "false_fail": 3,
    "true_fail": 14,
    "unblinded": 0,
    "agreement": 0.575,
    "precision": 0.391,
    "recall": 0.75,
}


class JudgeAgreement(BaseModel):
    """One critic model under one harness version: the judge's blind verdicts against the verifier's."""

    model_config = ConfigDict(json_schema_extra={"examples": [EXAMPLE]})

    critic_model: str | None = Field(description="The model the critic's judge ran on.")
    harness_version: str | None = Field(description="The harness the judged episodes ran under.")
    judged: int = Field(description="Blind judge verdicts on episodes the verifier also decided.")
    true_pass: int = Field(description="Both passed the attempt.")
    false_pass: int = Field(description="The judge passed an attempt the verifier failed (the judge was fooled).")
    false_fail: int = Field(description="The judge failed an attempt the verifier passed.")
    true_fail: int = Field(description="Both failed the attempt.")
    unblinded: int = Field(
        0, description="Verdicts judged before the judge was blind: counted here, left out of the rates."
    )
    agreement: float | None = Field(description="Share of judged verdicts where judge and verifier agree.")
    precision: float | None = Field(description="Of the judge's passes, the share the verifier passed.")
    recall: float | None = Field(description="Of the verifier's passes, the share the judge passed.")

    @classmethod
    def of_counts(
        cls,
        critic_model: str | None,
        harness_version: str | None,
        *,
        true_pass: int = 0,
        false_pass: int = 0,
        false_fail: int = 0,
        true_fail: int = 0,
        unblinded: int = 0,
    ) -> JudgeAgreement:
        judged = true_pass + false_pass + false_fail + true_fail
        return cls(
            critic_model=critic_model,
            harness_version=harness_version,
            judged=judged,
            true_pass=true_pass,
            false_pass=false_pass,
            false_fail=false_fail,
            true_fail=true_fail,
            unblinded=unblinded,
            agreement=_share(true_pass + true_fail, judged),
            precision=_share(true_pass, true_pass + false_pass),
            recall=_share(true_pass, true_pass + false_fail),
        )


class CriticStats(BaseModel):
    """The judge's agreement with the verifier, one row per critic model and harness version, and all together."""

    model_config = ConfigDict(
        json_schema_extra={"examples": [{"groups": [EXAMPLE], "total": {**EXAMPLE, "harness_version": None}}]}
    )

    groups: list[JudgeAgreement] = Field(description="Per critic model and harness version, in name order.")
    total: JudgeAgreement = Field(description="Every group pooled (critic_model and harness_version null).")


def critic_stats(session: Session, *, include_unblinded: bool = False) -> CriticStats:
    """Agreement, precision and recall of the judge against the verifier over the stored verdicts.

    ``include_unblinded`` counts verdicts judged before the judge was blind in the rates too (``judge_agreement``
    keeps that older reading)."""
    rows = session.execute(
        select(Verdict.critic_model, Episode.harness_version, Verdict.judge_passed, Verdict.passed, Verdict.details)
        .join(Episode, Episode.id == Verdict.episode_id)
        .where(Verdict.source == "both", Verdict.judge_passed.is_not(None))
    ).all()
    return tally(
        (model, harness, bool(judge), bool(verifier), include_unblinded or bool((details or {}).get("judge_blind")))
        for model, harness, judge, verifier, details in rows
    )


def tally(verdicts: Iterable[tuple[str | None, str | None, bool, bool, bool]]) -> CriticStats:
    """Stats from (critic model, harness version, judge passed, verifier passed, judged blind) tuples."""
    cells: dict[tuple[str | None, str | None], dict[str, int]] = {}
    for model, harness, judge, verifier, blind in verdicts:
        cell = cells.setdefault((model, harness), dict.fromkeys(_COUNTS, 0))
        cell[_cell(judge, verifier) if blind else "unblinded"] += 1
    groups = [
        JudgeAgreement.of_counts(model, harness, **counts)
        for (model, harness), counts in sorted(cells.items(), key=lambda item: (str(item[0][0]), str(item[0][1])))
    ]
    pooled = {name: sum(getattr(group, name) for group in groups) for name in _COUNTS}
    return CriticStats(groups=groups, total=JudgeAgreement.of_counts(None, None, **pooled))


_COUNTS = ("true_pass", "false_pass", "false_fail", "true_fail", "unblinded")


def _cell(judge: bool, verifier: bool) -> str:
    if judge:
        return "true_pass" if verifier else "false_pass"
    return "false_fail" if verifier else "true_fail"


def _share(part: int, whole: int) -> float | None:
    return part / whole if whole else None
