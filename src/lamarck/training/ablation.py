"""What did some rows buy? Replay the champion's lineage without them and score the result.

The champion is the last of a chain of jobs, each warm-started from its parent's adapter on its own dataset. The
ablation replays that chain in order with the same recipe, each step from the ablation's previous adapter, on the
same dataset minus the dropped rows (for the proof: rows whose rollout had privileged help: hint levels
``partial`` and ``full``, and critic repairs). A step with no rows left is skipped. The ablated adapters go into the
model store under their own names and never into the registry: they are measurements, not candidates, and no
decision reads them.
"""

from __future__ import annotations

import shutil
from collections.abc import Collection
from pathlib import Path

from pydantic import BaseModel
from sqlalchemy.orm import Session

from lamarck.platform.container import Container
from lamarck.platform.settings import DEFAULT_MODEL_VERSION
from lamarck.platform.storage import repositories as repo
from lamarck.training.dataset_io import dataset_dir, load_dataset
from lamarck.training.traces_to_rows import TrainingRow

REPAIRED = "critic_repair"  # the hint source of a critic-repaired row (agents/critic_repair.py REPAIR_SOURCE)
PRIVILEGED_HINTS = frozenset({"partial", "full", REPAIRED})


class AblationStep(BaseModel):
    replays: str
    dataset_digest: str
    rows: int
    kept: int
    seconds: float | None = None


class Ablation(BaseModel):
    """``version`` is the ablated model (``None`` when no step had rows left, or nothing was promoted)."""

    of: str
    dropped_hints: list[str]
    version: str | None
    steps: list[AblationStep]
    note: str


def lineage(session: Session, version: str) -> list[str]:
    """The trained versions from the first job to ``version``, oldest first (the base model is not in it)."""
    chain: list[str] = []
    current: str | None = version
    while current is not None and current != DEFAULT_MODEL_VERSION:
        chain.append(current)
        current = repo.get_model_version(session, version_id=current).parent_id
    return chain[::-1]


def replayed_jobs(session: Session, version: str) -> list[tuple[str, str | None]]:
    """(version, dataset digest) of the jobs that made ``version``, oldest first, from the last one that trained
    from the base: that job's dataset held every row before it, so the jobs before it are not replayed."""
    versions = [repo.get_model_version(session, version_id=v) for v in lineage(session, version)]
    starts = [i for i, v in enumerate(versions) if (v.training_metrics or {}).get("train_from") == "base"]
    return [(v.id, v.dataset_digest) for v in versions[starts[-1] if starts else 0 :]]


def without_hints(rows: list[TrainingRow], dropped: Collection[str]) -> list[TrainingRow]:
    """Rows whose rollout had none of the ``dropped`` help; a repair saw the critic's first wrong step and a hint,
    so ``critic_repair`` drops every repaired row, whatever hint level its trajectory carries."""
    return [row for row in rows if row.hint_level not in dropped and not (row.repaired and REPAIRED in dropped)]


def ablate(
    container: Container, version: str, *, dropped: Collection[str] = PRIVILEGED_HINTS, max_steps: int | None = None
) -> Ablation:
    from lamarck.training.sft import train_sft

    settings = container.settings
    with container.db.session() as session:
        chain = replayed_jobs(session, version)
    base = container.model_store.resolve(DEFAULT_MODEL_VERSION)
    parent_adapter: Path | None = None
    current: str | None = None
    steps: list[AblationStep] = []
    for replayed, digest in chain:
        if digest is None:
            raise ValueError(f"{replayed} has no dataset digest: only a distilled lineage can be replayed")
        rows = load_dataset(dataset_dir(settings.data_dir, digest)).rows
        kept = without_hints(rows, dropped)
        step = AblationStep(replays=replayed, dataset_digest=digest, rows=len(rows), kept=len(kept))
        if kept:
            name = f"{replayed}-without-{'-'.join(sorted(dropped))}"
            work = settings.data_dir / "ablation" / name
            result = train_sft(
                base_dir=base.base_dir,
                rows=kept,
                work_dir=work,
                settings=settings.training,
                parent_adapter=parent_adapter,
                max_steps=max_steps,
            )
            container.model_store.add_adapter(name, Path(result.output_dir), base=base.base_name)
            shutil.rmtree(work, ignore_errors=True)
            parent_adapter = container.model_store.resolve(name).adapter_dir
            current = name
            step.seconds = result.seconds
        steps.append(step)
    note = (
        f"{len(steps)} job(s) of {version}'s lineage replayed without {sorted(dropped)} rows"
        if chain
        else f"{version} is the base model: nothing to replay"
    )
    return Ablation(of=version, dropped_hints=sorted(dropped), version=current, steps=steps, note=note)
