"""Which model name a route asks for a Lamarck model version under: the one rule the executor follows, so rollouts,
evaluations and the gate's candidate-versus-champion comparison all reach the version they name.

- ``version_model`` set on the route: that template with the version filled in (``openai/{version}`` asks an
  OpenAI-compatible server such as vLLM with one LoRA adapter per version for the version by its own name);
- a ``lamarck/...`` route without ``api_base``: ``lamarck/<version>``, the in-process engine;
- a ``lamarck/...`` route with ``api_base``: ``openai/<version>`` at that address, which is what
  ``lamarck serve-model`` answers (the OpenAI ``model`` field names the version);
- any other route serves one fixed model whatever the version: ``None``.

``served_model`` is the same address rule for a call that names no version (the critic, the curriculum proposer,
the harness critic): a ``lamarck/<name>`` route with an ``api_base`` asks that server for ``<name>``.
"""

from __future__ import annotations

from dataclasses import dataclass

from lamarck.platform.settings import ModelRoute

LAMARCK_PREFIX = "lamarck/"
REMOTE_LAMARCK_TEMPLATE = "openai/{version}"


@dataclass(frozen=True)
class VersionCall:
    """The litellm model name to ask for one version, and whether a Lamarck engine answers it (in-process or
    ``lamarck serve-model``), which takes the ``stop_after`` extension."""

    model: str
    lamarck_engine: bool


def version_call(route: ModelRoute, version: str) -> VersionCall | None:
    """How ``route`` asks for ``version``; None when the route's model does not depend on the version."""
    version = version.strip()
    lamarck = route.model.startswith(LAMARCK_PREFIX)
    if route.version_model is not None:
        return VersionCall(route.version_model.format(version=version), lamarck)
    if not lamarck:
        return None
    return VersionCall(served_model(route, f"{LAMARCK_PREFIX}{version}"), True)


def served_model(route: ModelRoute, model: str) -> str:
    """The litellm model name a call on ``route`` for ``model`` goes out under: ``lamarck/<name>`` at an ``api_base``
    is ``openai/<name>`` there (litellm's ``lamarck`` provider is the in-process engine and reaches no
    address), anything else as it is."""
    if route.api_base is None or not model.startswith(LAMARCK_PREFIX):
        return model
    return REMOTE_LAMARCK_TEMPLATE.format(version=model.removeprefix(LAMARCK_PREFIX))
