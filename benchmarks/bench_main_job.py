"""The README's main job from a fresh clone: ``make setup``, then ``make run``, each timed on the wall clock.

Clones the repository's committed state into a temporary directory (nothing uncommitted, no ``.venv``), so the
figures are what a newcomer waits for on this machine. The set-up reuses the llama-cpp-python wheel that an earlier
set-up kept in ``~/.cache/lamarck/wheels``; without it the first set-up also compiles llama.cpp (minutes more).
Run it alone: the main job competes with anything else for the CPU.

    python benchmarks/bench_main_job.py [--keep]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "benchmarks" / "results" / "bench_main_job.json"


def timed(command: list[str], cwd: Path, log: Path) -> float:
    started = time.perf_counter()
    with log.open("w") as out:
        subprocess.run(command, cwd=cwd, stdout=out, stderr=subprocess.STDOUT, check=True)
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--keep", action="store_true", help="keep the clone and its logs")
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()

    work = Path(tempfile.mkdtemp(prefix="lamarck-main-job-"))
    clone = work / "clone"
    try:
        subprocess.run(["git", "clone", "--quiet", str(REPO), str(clone)], check=True)
        commit = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=clone, check=True, capture_output=True, text=True
        ).stdout.strip()
        wheel_cached = any((Path.home() / ".cache" / "lamarck" / "wheels").glob("llama-cpp-python*"))
        setup_s = timed(["make", "setup"], clone, work / "setup.log")
        run_s = timed(["make", "run"], clone, work / "run.log")
        tail = (work / "run.log").read_text().splitlines()[-8:]
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)

    load = os.getloadavg()[0]
    result = {
        "summary": {"setup_seconds": setup_s, "run_seconds": run_s},
        "commit": commit,
        "llama_cpp_wheel_cached": wheel_cached,
        "load_average_at_end": load,
        "run_output_tail": tail,
    }
    table = Table(title=f"the main job from a fresh clone (commit {commit}, load {load:.1f})")
    table.add_column("step")
    table.add_column("wall clock", justify="right")
    table.add_row("make setup" + (" (wheel cached)" if wheel_cached else ""), f"{setup_s / 60:.1f} min")
    table.add_row("make run", f"{run_s / 60:.1f} min")
    Console().print(table)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
