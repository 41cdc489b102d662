"""Starting and resuming runs in processes of their own: a run takes hours, so it must outlive the request (and the
API server) that asked for it. The child reads the same settings (environment and lamarck.toml) as the server."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Literal

RunAction = Literal["start", "resume"]
Launcher = Callable[[str, RunAction], int]  # (run id, action) -> the child's pid


def process_launcher(log_dir: Path) -> Launcher:
    """A launcher that runs ``lamarck runs start|resume RUN_ID`` detached, its output in ``log_dir/run-<id>.log``."""

    def launch(run_id: str, action: RunAction) -> int:
        log_dir.mkdir(parents=True, exist_ok=True)
        with (log_dir / f"run-{run_id}.log").open("ab") as log:
            child = subprocess.Popen(
                [sys.executable, "-m", "lamarck.cli", "runs", action, run_id],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        return child.pid

    return launch
