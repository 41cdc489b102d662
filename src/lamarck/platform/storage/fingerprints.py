"""What counts as "the same task text", in one place: stored tasks, held-out sets and novelty checks agree on it."""

from __future__ import annotations

import hashlib
import re

_SPACE = re.compile(r"\s+")


def normalise_prompt(prompt: str) -> str:
    return _SPACE.sub(" ", prompt).strip().casefold()


def prompt_fingerprint(prompt: str) -> str:
    """sha256 of the normalised prompt (64 hex characters, the width of ``Task.fingerprint``)."""
    return hashlib.sha256(normalise_prompt(prompt).encode("utf-8")).hexdigest()
