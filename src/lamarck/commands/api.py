"""``lamarck serve`` (the REST API under uvicorn) and ``lamarck keys`` (create, list, revoke API keys)."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.table import Table

from lamarck.commands.common import UserError, console, container_from_settings, err, run_guarded

keys_app = typer.Typer(help="API keys for the REST API: create (shown once), list, revoke.", no_args_is_help=True)
LOOPBACK = ("127.0.0.1", "localhost", "::1")


def serve_command(
    host: Annotated[str | None, typer.Option(help="Interface to bind (default: api.host, 127.0.0.1).")] = None,
    port: Annotated[int | None, typer.Option(help="Port to listen on (default: api.port, 8000).")] = None,
) -> None:
    """Serve the REST API (/v1, OpenAPI at /docs). Every route but /v1/health needs a key: `lamarck keys create`."""

    def body() -> None:
        import uvicorn

        from lamarck.api.app import create_app

        with container_from_settings() as container:
            settings = container.settings.api
            bind_host, bind_port = host or settings.host, port or settings.port
            container.db  # noqa: B018 - migrates before the first request
            api = create_app(container)  # a setting it refuses (say, an unreachable rate-limit Redis) stops us here
            if bind_host not in LOOPBACK:
                err.print(f"[yellow]serving on {bind_host}: reachable from other machines; keys are the only guard[/]")
            console.print(f"serving the REST API at http://{bind_host}:{bind_port}/v1 (docs at /docs)")
            uvicorn.run(api, host=bind_host, port=bind_port, log_level="info", server_header=False)

    run_guarded(body)


@keys_app.command("create")
def keys_create(
    scope: Annotated[
        list[str], typer.Option("--scope", "-s", help="read, tasks, runs, models or admin; repeat or comma-separate.")
    ],
    name: Annotated[str, typer.Option(help="A note saying whose key it is.")] = "",
) -> None:
    """Create a key and print it once: only its hash is stored, so it cannot be shown again."""

    def body() -> None:
        from lamarck.api.keys import create_key, parse_scopes

        try:
            scopes = parse_scopes(scope)
        except ValueError as exc:
            raise UserError(str(exc)) from None
        with container_from_settings() as container:
            key_id, key = create_key(container.db, scopes, name=name)
        err.print(
            f"key {key_id} with scopes {', '.join(s.value for s in scopes)}; store it now, it is not shown again:"
        )
        console.print(key, highlight=False, markup=False, soft_wrap=True)

    run_guarded(body)


@keys_app.command("list")
def keys_list() -> None:
    """Show the keys: id, name, scopes, when created and revoked (never the key or its hash)."""

    def body() -> None:
        from lamarck.platform.storage import api_repositories as api_repo

        with container_from_settings() as container, container.db.session() as session:
            keys = api_repo.list_api_keys(session)
            if not keys:
                console.print("no API keys yet: create one with `lamarck keys create --scope read`")
                return
            table = Table("id", "name", "scopes", "created", "revoked")
            for key in keys:
                table.add_row(
                    key.id,
                    key.name or "-",
                    ", ".join(key.scopes),
                    key.created_at.strftime("%Y-%m-%d %H:%M"),
                    key.revoked_at.strftime("%Y-%m-%d %H:%M") if key.revoked_at else "-",
                )
            console.print(table)

    run_guarded(body)


@keys_app.command("revoke")
def keys_revoke(key_id: Annotated[str, typer.Argument(help="The key's id, from `lamarck keys list`.")]) -> None:
    """Revoke a key: requests with it get 401 from now on."""

    def body() -> None:
        from lamarck.platform.storage import api_repositories as api_repo

        with container_from_settings() as container, container.db.session() as session:
            api_repo.revoke_api_key(session, key_id=key_id)
        console.print(f"revoked key {key_id}")

    run_guarded(body)
