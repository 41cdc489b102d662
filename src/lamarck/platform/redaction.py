"""Secrets out of stored text: prompts, replies and tool arguments are kept for people to read, keys never.

Two kinds of secret are replaced with ``[REDACTED]``: the values this process knows are secret (the routes' API keys,
passed in by the caller), and anything shaped like a well-known credential (provider API keys, bearer tokens,
``api_key=...`` assignments, private key blocks, Lamarck's own ``lmk_`` keys). The patterns err on the side of
redacting: a trace that hides a harmless string is better than one that keeps a key.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

REDACTED = "[REDACTED]"

_PATTERNS: tuple[tuple[re.Pattern[str], str], ...] = (
    (
        re.compile(r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----.*?(?:-----END [A-Z0-9 ]*PRIVATE KEY-----|\Z)", re.DOTALL),
        REDACTED,
    ),
    (re.compile(r"(?i)\b(authorization\s*[:=]\s*)(?:bearer|basic|token)?\s*[^\s\"',;]+"), rf"\1{REDACTED}"),
    (re.compile(r"(?i)\b(bearer\s+)[A-Za-z0-9._~+/=-]{8,}"), rf"\1{REDACTED}"),
    (
        re.compile(
            r"(?i)\b((?:api[_-]?key|apikey|secret[_-]?key|access[_-]?token|auth[_-]?token|password|passwd|secret)"
            r"[\"']?\s*[:=]\s*[\"']?)[^\s\"',;]{4,}"
        ),
        rf"\1{REDACTED}",
    ),
    (re.compile(r"\bsk-(?:[A-Za-z0-9]+-)*[A-Za-z0-9_-]{16,}"), REDACTED),  # OpenAI, Anthropic (sk-ant-...)
    (re.compile(r"\blmk_[A-Za-z0-9]+_[A-Za-z0-9_-]{16,}"), REDACTED),  # Lamarck API keys
    (re.compile(r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b"), REDACTED),  # AWS access key ids
    (re.compile(r"\bgh[pousr]_[A-Za-z0-9]{30,}\b|\bgithub_pat_[A-Za-z0-9_]{30,}"), REDACTED),
    (re.compile(r"\bAIza[0-9A-Za-z_-]{35}\b"), REDACTED),  # Google API keys
    (re.compile(r"\bxox[abposr]-[A-Za-z0-9-]{10,}"), REDACTED),  # Slack tokens
    (re.compile(r"\bhf_[A-Za-z0-9]{30,}\b"), REDACTED),  # Hugging Face tokens
    (re.compile(r"\beyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}"), REDACTED),  # JWTs
)


def redact(text: str, secrets: Iterable[str] = ()) -> str:
    """``text`` with every known secret value and every credential-shaped string replaced by ``[REDACTED]``."""
    for secret in sorted({s for s in secrets if len(s) >= 4}, key=len, reverse=True):
        text = text.replace(secret, REDACTED)
    for pattern, replacement in _PATTERNS:
        text = pattern.sub(replacement, text)
    return text
