"""The capability profile: a Beta posterior of verified success per environment x difficulty.

The profile keeps an in-memory copy of the ``capability_cells`` rows; ``update`` writes through to the database
(read-modify-write of the row, locked where the database supports it), ``record`` changes memory only.
With ``decay < 1`` each new observation first pulls the cell's posterior toward the prior, so old evidence
fades (an effective window of about ``1 / (1 - decay)`` observations) and the profile tracks an executor that
keeps changing.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from pydantic import BaseModel, Field
from sqlalchemy import select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from lamarck.curriculum.beta import beta_interval
from lamarck.platform.storage.records import CapabilityCell

logger = logging.getLogger(__name__)

Key = tuple[str, int]


class CellEstimate(BaseModel):
    environment: str
    difficulty: int
    alpha: float
    beta: float
    attempts: int
    successes: int
    mean: float = Field(ge=0.0, le=1.0)
    lower: float = Field(ge=0.0, le=1.0)
    upper: float = Field(ge=0.0, le=1.0)
    updated_at: datetime | None = None


class ProfileSnapshot(BaseModel):
    """The whole profile at one moment, for the UI and the run record."""

    taken_at: datetime
    prior_alpha: float
    prior_beta: float
    decay: float
    interval: float
    cells: list[CellEstimate]

    def cell(self, environment: str, difficulty: int) -> CellEstimate | None:
        return next((c for c in self.cells if c.environment == environment and c.difficulty == difficulty), None)

    def environments(self) -> list[str]:
        return sorted({cell.environment for cell in self.cells})


class Observation(BaseModel):
    environment: str
    difficulty: int
    passed: bool


@dataclass
class _Cell:
    alpha: float
    beta: float
    attempts: int = 0
    successes: int = 0
    updated_at: datetime | None = None


class CapabilityProfile:
    def __init__(
        self, *, prior_alpha: float = 1.0, prior_beta: float = 1.0, decay: float = 1.0, interval: float = 0.9
    ) -> None:
        if prior_alpha <= 0 or prior_beta <= 0:
            raise ValueError("prior_alpha and prior_beta must be positive")
        if not 0.0 < decay <= 1.0:
            raise ValueError(f"decay must be in (0, 1] (1 = no decay), got {decay}")
        if not 0.0 < interval < 1.0:
            raise ValueError(f"interval must be in (0, 1), got {interval}")
        self.prior_alpha, self.prior_beta = prior_alpha, prior_beta
        self.decay, self.interval = decay, interval
        self._cells: dict[Key, _Cell] = {}

    @classmethod
    def load(cls, session: Session, **options: Any) -> CapabilityProfile:
        profile = cls(**options)
        profile.refresh(session)
        return profile

    def refresh(self, session: Session) -> None:
        """Replace the in-memory cells with the database's."""
        self._cells = {
            (row.environment, row.difficulty): _Cell(row.alpha, row.beta, row.attempts, row.successes, row.updated_at)
            for row in session.scalars(select(CapabilityCell))
        }

    # -- reading ------------------------------------------------------------------------------------------------

    def posterior(self, environment: str, difficulty: int) -> tuple[float, float]:
        cell = self._cells.get((environment, difficulty))
        return (cell.alpha, cell.beta) if cell else (self.prior_alpha, self.prior_beta)

    def attempts(self, environment: str, difficulty: int) -> int:
        cell = self._cells.get((environment, difficulty))
        return cell.attempts if cell else 0

    def estimate(self, environment: str, difficulty: int) -> tuple[float, float, float]:
        """(posterior mean, lower, upper) of the success probability; the interval holds ``interval`` of the mass."""
        alpha, beta = self.posterior(environment, difficulty)
        lower, upper = beta_interval(alpha, beta, self.interval)
        return alpha / (alpha + beta), lower, upper

    def keys(self) -> list[Key]:
        return sorted(self._cells)

    def snapshot(self) -> ProfileSnapshot:
        return ProfileSnapshot(
            taken_at=datetime.now(UTC),
            prior_alpha=self.prior_alpha,
            prior_beta=self.prior_beta,
            decay=self.decay,
            interval=self.interval,
            cells=[self._estimate_model(key) for key in sorted(self._cells)],
        )

    # -- writing ------------------------------------------------------------------------------------------------

    def record(self, environment: str, difficulty: int, passed: bool) -> CellEstimate:
        """Apply one observation in memory only (simulations, dry runs)."""
        key = _key(environment, difficulty)
        cell = self._cells.setdefault(key, _Cell(self.prior_alpha, self.prior_beta))
        self._apply(cell, passed)
        cell.updated_at = datetime.now(UTC)
        return self._estimate_model(key)

    def update(self, session: Session, environment: str, difficulty: int, passed: bool) -> CellEstimate:
        """Apply one observation to the database row and to memory; the caller's session commits."""
        key = _key(environment, difficulty)
        row = self._row(session, key)
        cell = _Cell(row.alpha, row.beta, row.attempts, row.successes)
        self._apply(cell, passed)
        row.alpha, row.beta, row.attempts, row.successes = cell.alpha, cell.beta, cell.attempts, cell.successes
        row.updated_at = cell.updated_at = datetime.now(UTC)
        session.flush()
        self._cells[key] = cell
        return self._estimate_model(key)

    def update_many(self, session: Session, observations: Iterable[Any]) -> int:
        """Apply verdict-like records in order: objects or mappings with environment, difficulty and passed."""
        count = 0
        for item in observations:
            obs = Observation.model_validate(dict(item) if isinstance(item, Mapping) else item, from_attributes=True)
            self.update(session, obs.environment, obs.difficulty, obs.passed)
            count += 1
        return count

    def _apply(self, cell: _Cell, passed: bool) -> None:
        if self.decay < 1.0:
            cell.alpha = self.prior_alpha + self.decay * (cell.alpha - self.prior_alpha)
            cell.beta = self.prior_beta + self.decay * (cell.beta - self.prior_beta)
        if passed:
            cell.alpha += 1.0
            cell.successes += 1
        else:
            cell.beta += 1.0
        cell.attempts += 1

    def _row(self, session: Session, key: Key) -> CapabilityCell:
        query = (
            select(CapabilityCell)
            .where(CapabilityCell.environment == key[0], CapabilityCell.difficulty == key[1])
            .with_for_update()
        )
        row = session.scalars(query).first()
        if row is not None:
            return row
        row = CapabilityCell(
            environment=key[0], difficulty=key[1], alpha=self.prior_alpha, beta=self.prior_beta, attempts=0, successes=0
        )
        try:
            with session.begin_nested():
                session.add(row)
        except IntegrityError:  # another writer created the cell first
            logger.debug("capability cell %s was created concurrently; re-reading", key)
            row = session.scalars(query).one()
        return row

    def _estimate_model(self, key: Key) -> CellEstimate:
        cell = self._cells.get(key) or _Cell(self.prior_alpha, self.prior_beta)
        mean, lower, upper = self.estimate(*key)
        return CellEstimate(
            environment=key[0],
            difficulty=key[1],
            alpha=cell.alpha,
            beta=cell.beta,
            attempts=cell.attempts,
            successes=cell.successes,
            mean=mean,
            lower=lower,
            upper=upper,
            updated_at=cell.updated_at,
        )


def _key(environment: str, difficulty: int) -> Key:
    if not environment or not isinstance(environment, str):
        raise ValueError("environment must be a non-empty name")
    if isinstance(difficulty, bool) or not isinstance(difficulty, int):
        raise ValueError(f"difficulty must be an integer, got {difficulty!r}")
    return environment, difficulty
