"""The lock files install what pyproject.toml pins: a pin changed without `make lock` fails here, not on a fresh
machine that would quietly install the old version."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PIN = re.compile(r"^([A-Za-z0-9._-]+)(?:\[[^\]]*\])?==([^\s;\\]+)")


def _name(raw: str) -> str:
    return re.sub(r"[-_.]+", "-", raw).lower()


def _locked(path: Path) -> dict[str, tuple[str, int]]:
    """Package name -> (version, number of hashes) for every entry of a hash-pinned requirements file."""
    entries: dict[str, tuple[str, int]] = {}
    current: str | None = None
    for line in path.read_text().splitlines():
        if match := PIN.match(line):
            current = _name(match.group(1))
            entries[current] = (match.group(2), 0)
        elif current is not None and line.strip().startswith("--hash=sha256:"):
            version, hashes = entries[current]
            entries[current] = (version, hashes + 1)
    return entries


def _pinned() -> dict[str, str]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    pins: dict[str, str] = {}
    for requirement in [*project["dependencies"], *project["optional-dependencies"]["test"]]:
        match = PIN.match(requirement)
        assert match is not None, f"pyproject.toml: pin {requirement!r} with == so the lock can follow it"
        pins[_name(match.group(1))] = match.group(2)
    return pins


def test_every_pin_of_pyproject_is_locked_at_the_same_version() -> None:
    locked = _locked(ROOT / "requirements" / "lock.txt")
    stale = {
        name: (version, locked.get(name, ("missing", 0))[0])
        for name, version in _pinned().items()
        if locked.get(name, ("missing", 0))[0].split("+")[0] != version
    }
    assert stale == {}, f"pyproject.toml and requirements/lock.txt disagree (pyproject, lock): {stale}; run make lock"


def test_every_locked_package_carries_hashes() -> None:
    for lock in ("lock.txt", "model-lock.txt"):
        entries = _locked(ROOT / "requirements" / lock)
        assert entries, lock
        unhashed = sorted(name for name, (_, hashes) in entries.items() if hashes == 0)
        assert unhashed == [], f"{lock}: no hashes for {unhashed}"


def test_pytorch_is_the_cpu_build_and_pulls_no_cuda_libraries() -> None:
    locked = _locked(ROOT / "requirements" / "lock.txt")
    assert locked["torch"][0].endswith("+cpu")
    assert not [name for name in locked if name.startswith("nvidia-")]
