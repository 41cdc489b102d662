"""``lamarck solve``: hand the executor one task, or a JSONL file of them, as the REST API's task routes do."""

from __future__ import annotations

import json
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from pydantic import ValidationError

from lamarck.commands.common import UserError, console, container_from_settings, err, run_guarded

if TYPE_CHECKING:
    from lamarck.api.solving import Resolved, TaskRequest, TaskResult
    from lamarck.platform.container import Container


def solve_command(
    prompt: Annotated[str | None, typer.Argument(help="The task; leave out with --file.")] = None,
    env: Annotated[str | None, typer.Option("--env", help="Environment whose tools and verifier to use.")] = None,
    expected: Annotated[str | None, typer.Option(help="Expected answer, checked by the environment.")] = None,
    model_version: Annotated[str | None, typer.Option(help="Model version (default: the champion).")] = None,
    harness: Annotated[str | None, typer.Option(help="Harness version (default: the served one).")] = None,
    samples: Annotated[int, typer.Option(help="Attempts; the answer is the most common.")] = 1,
    file: Annotated[
        Path | None, typer.Option("--file", "-f", help="JSONL of tasks: prompt, environment, expected.")
    ] = None,
    out: Annotated[Path | None, typer.Option(help="Where --file's JSONL results go (default: stdout).")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the whole result as JSON.")] = False,
) -> None:
    """Solve one task, or every task of a JSONL file (one result line per task, in order)."""
    from lamarck.api.solving import TaskError, solve

    def body() -> None:
        if (prompt is None) == (file is None):
            raise UserError("give either a prompt or --file tasks.jsonl, not both and not neither")
        requests = (
            _read_file(file)
            if file is not None
            else [_one(prompt or "", env, expected, model_version, harness, samples)]
        )
        with container_from_settings() as container:
            resolved = [_resolve(container, request, index, file) for index, request in enumerate(requests, 1)]
            if file is not None:
                _write(_solve_all(container, resolved), out)
                return
            result = solve(container, resolved[0])
            if as_json:
                console.print_json(result.model_dump_json())
                return
            console.print(result.answer if result.answer is not None else "(no answer)", highlight=False, markup=False)
            reward = "" if result.reward is None else f" · reward {result.reward:.2f}"
            err.print(f"[dim]{result.outcome}{reward} · {result.usage.total_tokens} tokens · {result.seconds:.2f}s[/]")

    run_guarded(body, extra=(TaskError,))


def _one(
    prompt: str, env: str | None, expected: str | None, model_version: str | None, harness: str | None, samples: int
) -> TaskRequest:
    from lamarck.api.solving import TaskRequest

    data = {"prompt": prompt, "environment": env, "expected": expected, "model_version": model_version}
    return _validated(TaskRequest, {**data, "harness_version": harness, "samples": samples}, "the task")


def _validated(model: type[TaskRequest], data: object, where: str) -> TaskRequest:
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        field = ".".join(str(p) for p in first["loc"]) or "task"
        raise UserError(f"{where}: {field}: {first['msg'].removeprefix('Value error, ')}") from None


def _read_file(path: Path) -> list[TaskRequest]:
    from lamarck.api.solving import TaskRequest

    if not path.is_file():
        raise UserError(f"no file {path}: give a JSONL file with one task object per line")
    requests = []
    for number, line in enumerate(path.read_text().splitlines(), 1):
        if not line.strip():
            continue
        try:
            data = json.loads(line)
        except json.JSONDecodeError as exc:
            raise UserError(f"{path} line {number} is not JSON ({exc.msg}): write one task object per line") from None
        requests.append(_validated(TaskRequest, data, f"{path} line {number}"))
    if not requests:
        raise UserError(f"{path} holds no tasks: write one JSON object per line with at least a prompt")
    return requests


def _resolve(container: Container, request: TaskRequest, index: int, file: Path | None) -> Resolved:
    from lamarck.api.solving import TaskError, resolve

    try:
        return resolve(container, request)
    except TaskError as exc:
        raise UserError(f"{file} task {index}: {exc}" if file is not None else str(exc)) from None


def _solve_all(container: Container, resolved: list[Resolved]) -> Iterator[TaskResult]:
    """Results in order; up to api.task_workers tasks run at once, as the API runs them."""
    from lamarck.api.solving import solve

    pool = ThreadPoolExecutor(max_workers=container.settings.api.task_workers)
    try:
        yield from pool.map(lambda item: solve(container, item), resolved)
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


def _write(results: Iterator[TaskResult], out: Path | None) -> None:
    handle = out.open("w") if out is not None else None
    try:
        for result in results:
            line = result.model_dump_json()
            if handle is not None:
                handle.write(line + "\n")
                handle.flush()
            else:
                console.print(line, highlight=False, markup=False, soft_wrap=True)
    finally:
        if handle is not None:
            handle.close()
    if out is not None:
        err.print(f"wrote {out}")
