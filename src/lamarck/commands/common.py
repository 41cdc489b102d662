"""What every command shares: consoles, the composition root, and one-line errors with exit status 2."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, TypeVar

import typer
from rich.console import Console

if TYPE_CHECKING:
    from lamarck.platform.container import Container

console = Console()
err = Console(stderr=True)
T = TypeVar("T")


class UserError(Exception):
    """An error the user can fix; printed as one line, exit status 2."""


def user_errors() -> tuple[type[BaseException], ...]:
    """Every error class that means bad input or an unusable setting, not a bug."""
    from lamarck.curriculum.registry import UnknownEnvironment
    from lamarck.platform.llm.gateway import GatewayError
    from lamarck.platform.llm.model_store import ModelStoreError
    from lamarck.platform.sandbox import SandboxUnavailable
    from lamarck.platform.settings import SettingsError
    from lamarck.platform.storage.database import DatabaseError
    from lamarck.platform.storage.repositories import NotFound

    return (
        UserError,
        SettingsError,
        DatabaseError,
        GatewayError,
        NotFound,
        ModelStoreError,
        SandboxUnavailable,
        UnknownEnvironment,
    )


def run_guarded(action: Callable[[], T], *, extra: tuple[type[BaseException], ...] = ()) -> T:
    """Run a command body; known errors become one line on stderr and exit status 2."""
    try:
        return action()
    except user_errors() + extra as exc:
        err.print(f"error: {' '.join(str(exc).split())}", markup=False, highlight=False, soft_wrap=True)
        raise typer.Exit(2) from None


@contextmanager
def container_from_settings() -> Iterator[Container]:
    from lamarck.platform.container import Container

    container = Container()
    try:
        yield container
    finally:
        container.close()
