"""Runs candidate code plus hidden test expressions in the platform sandbox and scores the fraction that pass.

The harness prints one marker line per event, tagged with a per-run nonce, and flushes after each, so a
timeout part-way still credits the tests that finished and candidate output cannot easily pose as results.
"""

from __future__ import annotations

import json
import logging
import secrets
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from lamarck.curriculum.environment import Reward

if TYPE_CHECKING:
    from lamarck.platform.sandbox import Sandbox

logger = logging.getLogger(__name__)

_HARNESS = """\
import json as _json, sys as _sys
_N = {nonce!r}
def _emit(**record):
    _sys.__stdout__.write(_N + _json.dumps(record) + "\\n")
    _sys.__stdout__.flush()
def _same(a, b, _type=type, _isinstance=isinstance, _len=len, _zip=zip, _all=all):
    if _type(a) is not _type(b):
        return False
    if _isinstance(a, (list, tuple)):
        return _len(a) == _len(b) and _all(_same(x, y) for x, y in _zip(a, b))
    if _isinstance(a, dict):
        return _len(a) == _len(b) and _all(k in b and _same(v, b[k]) for k, v in a.items())
    return a == b
_ns = {{"__name__": "__candidate__"}}
try:
    _code = compile({code!r}, "<candidate>", "exec")
except SyntaxError as _exc:
    _emit(event="syntax_error", message=f"line {{_exc.lineno}}: {{_exc.msg}}")
    raise SystemExit(0)
try:
    exec(_code, _ns)
except BaseException as _exc:
    _emit(event="load_error", message=f"{{type(_exc).__name__}}: {{_exc}}"[:300])
    raise SystemExit(0)
for _name in {required!r}:
    if not callable(_ns.get(_name)):
        _emit(event="missing", name=_name)
        raise SystemExit(0)
_ns["_same"] = _same
for _i, _test in enumerate({tests!r}):
    try:
        _ok = bool(eval(_test, _ns))
        _emit(event="test", index=_i, ok=_ok, message="" if _ok else "assertion failed")
    except BaseException as _exc:
        _emit(event="test", index=_i, ok=False, message=f"{{type(_exc).__name__}}: {{_exc}}"[:300])
_emit(event="done")
"""


class SandboxMissing(RuntimeError):
    """A code environment was built without a sandbox; it refuses to run candidate code any other way."""


def build_harness(code: str, tests: Sequence[str], required: Sequence[str], nonce: str) -> str:
    return _HARNESS.format(nonce=nonce, code=code, tests=list(tests), required=list(required))


def run_tests(
    sandbox: Sandbox | None,
    code: str,
    tests: Sequence[str],
    *,
    required: Sequence[str] = (),
    wall_seconds: float | None = None,
) -> Reward:
    """Score = fraction of ``tests`` (Python expressions, true when passing) that pass; passed = all pass.

    Tests may call ``_same(got, expected)``: equality that also requires identical types, recursively.
    """
    if sandbox is None:
        raise SandboxMissing(
            "this environment needs a sandbox to verify code: construct it with sandbox=Sandbox(settings.sandbox)"
        )
    if not tests:
        raise ValueError("no tests to run")
    nonce = "@@" + secrets.token_hex(8) + "@@"
    result = sandbox.run_python(build_harness(code, tests, required, nonce), wall_seconds=wall_seconds)
    events = _events(result.stdout, nonce)
    outcomes: dict[int, tuple[bool, str]] = {}
    for event in events:
        kind = event.get("event")
        if kind == "syntax_error":
            return Reward.fail(f"syntax error at {event.get('message', '')}")
        if kind == "load_error":
            return Reward.fail(f"code failed while loading: {event.get('message', '')}")
        if kind == "missing":
            return Reward.fail(f"function {event.get('name')!r} is not defined")
        if kind == "test":
            outcomes[int(event["index"])] = (bool(event.get("ok")), str(event.get("message", "")))
    passed = sum(1 for ok, _ in outcomes.values() if ok)
    score = passed / len(tests)
    failures = [f"test {i}: {message}" for i, (ok, message) in sorted(outcomes.items()) if not ok]
    details = f"{passed}/{len(tests)} tests passed"
    if result.limit_hit:
        details += f"; stopped by the sandbox ({result.limit_hit} limit) after {len(outcomes)} tests"
    elif not any(event.get("event") == "done" for event in events):
        tail = (result.stderr or "").strip().splitlines()[-1:] or [f"exit code {result.exit_code}"]
        details += f"; run ended early: {tail[0][:200]}"
    if failures:
        details += "; " + "; ".join(failures[:3])
    return Reward(score=score, passed=passed == len(tests), details=details)


def _events(stdout: str, nonce: str) -> list[dict[str, Any]]:
    events = []
    for line in stdout.splitlines():
        if line.startswith(nonce):
            try:
                events.append(json.loads(line[len(nonce) :]))
            except json.JSONDecodeError:
                logger.debug("unreadable harness line: %r", line[:200])
    return events
