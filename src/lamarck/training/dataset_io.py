"""Datasets on disk: ``<data_dir>/datasets/<digest>/`` holds rows.parquet, pairs.parquet, meta.json and README.md."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from lamarck.training.traces_to_rows import DistillationSet, PreferencePair, TrainingRow, dataset_digest

ROWS, PAIRS, META, CARD = "rows.parquet", "pairs.parquet", "meta.json", "README.md"


def dataset_dir(data_dir: Path, digest: str) -> Path:
    return Path(data_dir) / "datasets" / digest


def save_dataset(dataset: DistillationSet, data_dir: Path) -> Path:
    """Write the dataset atomically (a temp directory renamed into place); an existing one is kept."""
    target = dataset_dir(data_dir, dataset.digest)
    if (target / META).is_file():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{dataset.digest[:12]}.", dir=target.parent))
    try:
        rows = [{**row.model_dump(exclude={"messages"}), "messages": json.dumps(row.messages)} for row in dataset.rows]
        pq.write_table(pa.Table.from_pylist(rows, schema=_ROW_SCHEMA), tmp / ROWS)
        pairs = [
            {
                **p.model_dump(exclude={"prompt", "chosen", "rejected"}),
                "prompt": json.dumps(p.prompt),
                "chosen": json.dumps(p.chosen),
                "rejected": json.dumps(p.rejected),
            }
            for p in dataset.pairs
        ]
        pq.write_table(pa.Table.from_pylist(pairs, schema=_PAIR_SCHEMA), tmp / PAIRS)
        meta = dataset.model_dump(mode="json", exclude={"rows", "pairs"})
        (tmp / META).write_text(json.dumps(meta, indent=2, sort_keys=True) + "\n")
        (tmp / CARD).write_text(dataset_card(dataset))
        try:
            os.rename(tmp, target)
        except OSError:  # written meanwhile by another process: theirs has the same content
            shutil.rmtree(tmp, ignore_errors=True)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return target


def load_dataset(directory: Path) -> DistillationSet:
    meta = json.loads((directory / META).read_text())
    rows = [
        TrainingRow(**{**r, "messages": json.loads(r["messages"])}) for r in pq.read_table(directory / ROWS).to_pylist()
    ]
    pairs = [
        PreferencePair(
            **{
                **p,
                "prompt": json.loads(p["prompt"]),
                "chosen": json.loads(p["chosen"]),
                "rejected": json.loads(p["rejected"]),
            }
        )
        for p in pq.read_table(directory / PAIRS).to_pylist()
    ]
    dataset = DistillationSet(**meta, rows=rows, pairs=pairs)
    if dataset_digest(dataset) != dataset.digest:
        raise ValueError(f"dataset in {directory} does not match its digest: delete the directory to rebuild it")
    return dataset


def dataset_card(dataset: DistillationSet) -> str:
    counts = dataset.counts()
    levels = sorted({level for env in counts.values() for level in env}, key=int)
    lines = [
        f"# Distillation dataset {dataset.digest[:12]}",
        "",
        f"- digest: `{dataset.digest}`",
        f"- parent model version: `{dataset.parent_version}`",
        f"- sources: verified episodes recorded after {dataset.since or 'the beginning'} up to {dataset.until}",
        f"- episodes seen: {dataset.episodes_seen}; SFT rows: {len(dataset.rows)} "
        f"({sum(r.repaired for r in dataset.rows)} critic-repaired, {dataset.replayed} replayed from before the "
        f"sources); DPO pairs: {len(dataset.pairs)}",
        f"- dropped: {', '.join(f'{k}={v}' for k, v in sorted(dataset.dropped.items())) or 'none'}",
        f"- held-out leak check: {dataset.leak_check}",
        "- lessons shown at rollout are left out of the training prompts (context distillation)",
        "",
        "## Rows per environment and difficulty",
        "",
        "| environment | " + " | ".join(f"d{level}" for level in levels) + " | total |",
        "| --- | " + " | ".join("---" for _ in levels) + " | --- |",
    ]
    for env, cells in counts.items():
        lines.append(
            f"| {env} | " + " | ".join(str(cells.get(level, 0)) for level in levels) + f" | {sum(cells.values())} |"
        )
    return "\n".join(lines) + "\n"


_ROW_SCHEMA = pa.schema(
    [
        ("task_id", pa.string()),
        ("episode_id", pa.string()),
        ("environment", pa.string()),
        ("difficulty", pa.int64()),
        ("train_turns", pa.list_(pa.int64())),
        ("prompt_length", pa.int64()),
        ("repaired", pa.bool_()),
        ("weight", pa.float64()),
        ("hint_level", pa.string()),
        ("messages", pa.string()),
    ]
)
_PAIR_SCHEMA = pa.schema(
    [
        ("task_id", pa.string()),
        ("environment", pa.string()),
        ("difficulty", pa.int64()),
        ("chosen_episode_id", pa.string()),
        ("rejected_episode_id", pa.string()),
        ("prompt", pa.string()),
        ("chosen", pa.string()),
        ("rejected", pa.string()),
    ]
)
