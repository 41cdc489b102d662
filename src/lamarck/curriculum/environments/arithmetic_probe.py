"""The transfer probe: hand-written arithmetic word problems in phrasings the generator does not have.

A fixed file, reported for base and final models so that a gain which only memorises the generator's templates
shows as such. Never used for any decision (training, gate, frontier, harness-critic).
"""

from __future__ import annotations

import json
from importlib import resources

from lamarck.curriculum.environment import TaskSpec

PROBE_FILE = "arithmetic_transfer.jsonl"
FAMILY = "transfer-probe"


def transfer_probe() -> list[TaskSpec]:
    """The probe's problems as ``arithmetic`` tasks, in file order, ``metadata["family"] = "transfer-probe"``."""
    text = (resources.files("lamarck.curriculum") / "data" / PROBE_FILE).read_text(encoding="utf-8")
    tasks = []
    for index, line in enumerate(line for line in text.splitlines() if line.strip()):
        row = json.loads(line)
        tasks.append(
            TaskSpec(
                environment="arithmetic",
                difficulty=_steps(str(row["expression"])),
                prompt=str(row["prompt"]),
                reference={"answer": int(row["answer"]), "expression": str(row["expression"])},
                metadata={"family": FAMILY, "probe_index": index},
                source_id=f"arithmetic-transfer-probe/{index}",
            )
        )
    return tasks


def _steps(expression: str) -> int:
    """The number of operations, reported as the task's difficulty (1 to 4 here)."""
    return sum(expression.count(op) for op in (" + ", " - ", " * ", " // ", " % "))
