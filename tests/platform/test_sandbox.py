"""The sandbox against an escape corpus: every attempt must stay confined, leave the host unchanged and no process.

Each test asserts on the effect (host files, processes, what the code could print), not on how the attempt failed.
"""

from __future__ import annotations

import hashlib
import logging
import os
import pwd
import shutil
import signal
import socket
import sys
import sysconfig
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from lamarck.platform.sandbox import Sandbox, SandboxResult, SandboxUnavailable
from lamarck.platform.settings import SandboxSettings

REPO = Path(__file__).resolve().parents[2]
HAS_BWRAP = shutil.which("bwrap") is not None
needs_bwrap = pytest.mark.skipif(not HAS_BWRAP, reason="bubblewrap not installed: apt-get install bubblewrap")
SANDBOX_UID = pwd.getpwnam("nobody").pw_uid if os.geteuid() == 0 else os.geteuid()


def _user_processes() -> set[int]:
    """Live processes of the sandbox user (when running as root) or our descendants (otherwise)."""
    if os.geteuid() != 0:
        return {p.pid for p in psutil.Process().children(recursive=True) if p.status() != psutil.STATUS_ZOMBIE}
    found = set()
    for proc in psutil.process_iter(["uids", "status"]):
        if proc.info["uids"] and proc.info["uids"].real == SANDBOX_UID and proc.info["status"] != psutil.STATUS_ZOMBIE:
            found.add(proc.pid)
    return found


def _sandbox_dirs() -> set[str]:
    return {name for name in os.listdir(tempfile.gettempdir()) if name.startswith("lamarck-sandbox-")}


@pytest.fixture(autouse=True)
def host_unchanged() -> Iterator[None]:
    """After every test: no process of the sandbox survives, no descendant of ours, no scratch dir on the host."""
    before, dirs = _user_processes(), _sandbox_dirs()
    children = {p.pid for p in psutil.Process().children(recursive=True)}
    yield
    deadline = time.monotonic() + 3
    while (left := _user_processes() - before) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not left, f"sandbox processes survived: {sorted(left)}"
    assert {p.pid for p in psutil.Process().children(recursive=True) if p.status() != psutil.STATUS_ZOMBIE} <= children
    assert _sandbox_dirs() <= dirs


@pytest.fixture
def settings() -> SandboxSettings:
    return SandboxSettings(cpu_seconds=5, wall_seconds=20.0, memory_mb=512, file_size_mb=4, processes=32)


@pytest.fixture
def sandbox(settings: SandboxSettings) -> Sandbox:
    if not HAS_BWRAP:
        pytest.skip("bubblewrap not installed: apt-get install bubblewrap")
    return Sandbox(settings)


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


# -- normal use ------------------------------------------------------------------------------------------------


def test_stdout_stderr_and_exit_code(sandbox: Sandbox) -> None:
    result = sandbox.run_python("import sys\nprint('out')\nprint('err', file=sys.stderr)\nsys.exit(3)")
    assert isinstance(result, SandboxResult)
    assert (result.stdout, result.stderr, result.exit_code, result.limit_hit) == ("out\n", "err\n", 3, None)
    assert not result.ok
    assert 0 < result.wall_seconds < 10


def test_stdin_files_and_imports_from_scratch(sandbox: Sandbox) -> None:
    code = (
        "import os, sys\nfrom pkg.helper import double\n"
        "print(double(int(input())), open('data/in.txt').read(), os.getcwd(), sorted(os.listdir('.')))\n"
        "open('written.txt', 'w').write('ok')\nprint(open('written.txt').read(), __name__, sys.argv)\n"
    )
    files = {"pkg/__init__.py": "", "pkg/helper.py": "def double(x):\n    return 2 * x\n", "data/in.txt": "héllo"}
    result = sandbox.run_python(code, stdin="21\n", files=files)
    assert result.ok, result.stderr
    assert result.stdout == "42 héllo /scratch ['data', 'pkg']\nok __main__ ['main.py']\n"


def test_large_stdin_read_or_ignored(sandbox: Sandbox) -> None:
    data = "x" * (3 << 20)
    read = sandbox.run_python("import sys\nprint(len(sys.stdin.read()))", stdin=data)
    assert read.ok and read.stdout == f"{len(data)}\n"
    ignored = sandbox.run_python("print('done')", stdin=data)
    assert ignored.ok and ignored.stdout == "done\n"


def test_closing_the_pipes_does_not_escape_the_wall_clock(sandbox: Sandbox) -> None:
    result = sandbox.run_python("import os, time\nos.close(1)\nos.close(2)\ntime.sleep(100)\n", wall_seconds=1)
    assert result.limit_hit == "wall" and result.wall_seconds < 3


def test_unittest_module_runs_and_reports(sandbox: Sandbox) -> None:
    code = (
        "import unittest\nfrom solution import add\n"
        "class T(unittest.TestCase):\n"
        "    def test_add(self):\n        self.assertEqual(add(2, 3), 5)\n"
        "    def test_fails(self):\n        self.assertEqual(add(1, 1), 3)\n"
        "unittest.main()\n"
    )
    result = sandbox.run_python(code, files={"solution.py": "def add(a, b):\n    return a + b\n"})
    assert result.exit_code == 1 and result.limit_hit is None
    assert "Ran 2 tests" in result.stderr and "FAILED (failures=1)" in result.stderr


def test_traceback_shows_the_code_line(sandbox: Sandbox) -> None:
    result = sandbox.run_python("x = 1\nraise ValueError('boom')\n")
    assert result.exit_code == 1
    assert 'File "main.py", line 2' in result.stderr and "raise ValueError('boom')" in result.stderr
    assert "<string>" not in result.stderr


def test_unittest_failure_report_shows_source_lines(sandbox: Sandbox) -> None:
    code = (
        "import unittest\nclass T(unittest.TestCase):\n    def test_x(self):\n        self.assertEqual(1, 2)\n"
        "unittest.main()\n"
    )
    result = sandbox.run_python(code)
    assert "self.assertEqual(1, 2)" in result.stderr and "FAILED" in result.stderr


def test_runs_as_non_root_with_a_clean_environment(sandbox: Sandbox, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LAMARCK_API__API_KEY", "lamarck-secret-123")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-secret-456")
    code = (
        "import os\nprint(os.getuid(), os.geteuid(), os.getgroups(), dict(os.environ))\n"
        "for path in ('/proc/self/environ', '/proc/1/environ', f'/proc/{os.getppid()}/environ'):\n"
        "    try:\n        print(open(path, 'rb').read())\n    except OSError as exc:\n        print(path, exc)\n"
    )
    result = sandbox.run_python(code)
    assert result.ok, result.stderr
    uid = result.stdout.split()[0]
    assert uid != "0" and int(uid) == SANDBOX_UID
    for secret in ("lamarck-secret-123", "sk-secret-456", "LAMARCK_", "OPENAI"):
        assert secret not in result.stdout + result.stderr


def test_concurrent_runs_do_not_interfere(sandbox: Sandbox) -> None:
    from concurrent.futures import ThreadPoolExecutor

    code = "import sys\nn = int(input())\nopen('n.txt', 'w').write(str(n))\nprint(n * n, open('n.txt').read())\n"
    with ThreadPoolExecutor(4) as pool:
        results = list(pool.map(lambda n: sandbox.run_python(code, stdin=f"{n}\n"), range(8)))
    assert [r.stdout for r in results] == [f"{n * n} {n}\n" for n in range(8)]


def test_rejects_file_names_outside_scratch(sandbox: Sandbox) -> None:
    for name in ("../evil.py", "/tmp/evil.py", "a/../../b"):
        with pytest.raises(ValueError):
            sandbox.run_python("pass", files={name: "x"})


# -- escapes ---------------------------------------------------------------------------------------------------


def test_no_network_to_local_redis_or_outside(sandbox: Sandbox) -> None:
    with socket.create_connection(("127.0.0.1", 6379), timeout=2):  # the host does reach Redis
        pass
    code = (
        "import socket\n"
        "for host, port in (('127.0.0.1', 6379), ('1.1.1.1', 80), ('localhost', 5432)):\n"
        "    try:\n        socket.create_connection((host, port), timeout=3)\n        print('OPEN', host)\n"
        "    except OSError as exc:\n        print('FAIL', host, exc)\n"
    )
    result = sandbox.run_python(code)
    assert result.ok, result.stderr
    assert "OPEN" not in result.stdout and result.stdout.count("FAIL") == 3
    assert result.wall_seconds < 3  # fails at once, no timeout


def _bound_children() -> dict[str, set[str]]:
    """Per directory, the names the sandbox must show: the path down to the bound interpreter and venv, nothing else."""
    allowed: dict[str, set[str]] = {}
    bound = {Path(sys.prefix), Path(sys.base_prefix), Path(os.path.realpath(sys.executable)).parent.parent}
    for path in bound:
        for parent, child in zip(path.parents, [path, *path.parents], strict=False):
            allowed.setdefault(str(parent), set()).add(child.name)
    return allowed


def test_cannot_read_outside_scratch(sandbox: Sandbox) -> None:
    targets = [
        "/etc/shadow",
        "/etc/passwd",
        str(REPO / "pyproject.toml"),
        "/root/.bashrc",
        str(Path(__file__)),
        str(REPO / "src/lamarck/platform/settings.py"),
    ]
    code = (
        f"import os\nfor path in {targets!r}:\n"
        "    try:\n        print('READ', path, open(path).read()[:50])\n"
        "    except OSError as exc:\n        print('denied', path)\n"
        f"for d in ('/root', '/home', '/tmp', {str(REPO)!r}):\n"
        "    try:\n        print('LIST', d, *os.listdir(d))\n    except OSError:\n        print('denied', d)\n"
    )
    result = sandbox.run_python(code)
    assert result.ok, result.stderr
    assert "READ" not in result.stdout, result.stdout
    assert "[tool.pytest" not in result.stdout and "root:" not in result.stdout
    host_root = set(os.listdir("/root"))
    for line in result.stdout.splitlines():
        if line.startswith("LIST"):
            _, where, *names = line.split(" ")
            allowed = _bound_children().get(where, set())
            assert set(names) <= allowed, line  # only the bound interpreter shows, nothing of the host's
            if where == "/root":
                assert not (host_root - allowed) & set(names)


def test_cannot_write_outside_scratch(sandbox: Sandbox, tmp_path: Path) -> None:
    canary = tmp_path / "canary.txt"
    canary.write_text("original")
    venv_pth = Path(sysconfig.get_paths()["purelib"]) / "evil.pth"  # would run code in every later host Python
    targets = [
        f"/tmp/lamarck-escape-{os.getpid()}",
        str(canary),
        str(REPO / "escape.txt"),
        str(venv_pth),
        str(REPO / "pyproject.toml"),
        "/usr/escape.txt",
        "/escape.txt",
        os.path.realpath(sys.executable),
    ]
    digests = {path: _digest(Path(path)) for path in targets if Path(path).is_file()}
    code = (
        f"for path in {targets!r}:\n"
        "    try:\n        open(path, 'a').write('pwned')\n        print('WROTE', path)\n"
        "    except OSError:\n        print('denied', path)\n"
    )
    result = sandbox.run_python(code)
    assert result.ok, result.stderr
    for path in targets:
        if path in digests:
            assert _digest(Path(path)) == digests[path], path
        else:
            assert not Path(path).exists(), path
    assert canary.read_text() == "original"


def test_fork_bomb_is_contained(sandbox: Sandbox) -> None:
    result = sandbox.run_python("import os\nwhile True:\n    os.fork()\n", wall_seconds=10)
    assert result.limit_hit in ("processes", "cpu", "wall"), result
    assert result.wall_seconds < 12


def test_sleeping_fork_bomb_is_killed_on_wall_timeout(sandbox: Sandbox) -> None:
    code = (
        "import os, time\nfor _ in range(64):\n    try:\n        os.fork()\n    except OSError:\n        pass\n"
        "try:\n    os.setsid()\nexcept OSError:\n    pass\ntime.sleep(120)\n"
    )
    started = time.monotonic()
    result = sandbox.run_python(code, wall_seconds=2)
    assert result.limit_hit == "wall" and result.exit_code is None
    assert time.monotonic() - started < 6


def test_large_allocation_hits_memory_limit(sandbox: Sandbox) -> None:
    result = sandbox.run_python("x = bytearray(1 << 30)\nprint('ALLOCATED')\n")
    assert result.limit_hit == "memory", result
    assert "ALLOCATED" not in result.stdout


def test_infinite_loop_hits_cpu_limit(sandbox: Sandbox) -> None:
    result = sandbox.run_python("while True:\n    pass\n", cpu_seconds=1, wall_seconds=30)
    assert result.limit_hit == "cpu", result
    assert result.exit_code == -signal.SIGXCPU


def test_ignoring_sigxcpu_still_ends_on_cpu(sandbox: Sandbox) -> None:
    code = "import signal\nsignal.signal(signal.SIGXCPU, signal.SIG_IGN)\nwhile True:\n    pass\n"
    result = sandbox.run_python(code, cpu_seconds=1, wall_seconds=30)
    assert result.limit_hit == "cpu" and result.exit_code == -signal.SIGKILL, result


def test_sleep_forever_hits_wall_limit(sandbox: Sandbox) -> None:
    result = sandbox.run_python("import time\nprint('start', flush=True)\ntime.sleep(1000)\n", wall_seconds=1)
    assert result.limit_hit == "wall" and result.stdout == "start\n"
    assert 1 <= result.wall_seconds < 3


def test_large_file_write_hits_file_size_limit(sandbox: Sandbox) -> None:
    result = sandbox.run_python("open('big.bin', 'wb').write(b'x' * (64 << 20))\n")
    assert result.limit_hit == "file_size", result


def test_many_files_are_bounded_by_the_scratch_size(settings: SandboxSettings) -> None:
    if not HAS_BWRAP:
        pytest.skip("bubblewrap not installed")
    sandbox = Sandbox(settings.model_copy(update={"scratch_mb": 8}))
    code = "for i in range(100):\n    open(f'f{i}.bin', 'wb').write(b'x' * (3 << 20))\n"
    result = sandbox.run_python(code)
    assert result.exit_code == 1 and "No space left" in result.stderr


def test_open_files_limit(sandbox: Sandbox) -> None:
    result = sandbox.run_python("handles = [open('main.txt', 'w') for _ in range(1000)]\n")
    assert result.limit_hit == "open_files", result


def test_output_is_capped(settings: SandboxSettings) -> None:
    if not HAS_BWRAP:
        pytest.skip("bubblewrap not installed")
    sandbox = Sandbox(settings.model_copy(update={"output_bytes": 10_000}))
    result = sandbox.run_python("while True:\n    print('x' * 1000)\n")
    assert result.limit_hit == "output" and len(result.stdout) == 10_000


def test_ctypes_tricks_are_refused(sandbox: Sandbox) -> None:
    code = (
        "import ctypes, os\nlibc = ctypes.CDLL(None, use_errno=True)\n"
        "print('setuid', libc.setuid(0), os.getuid())\n"
        "print('kill1', libc.kill(1, 9))\n"
        "print('ptrace', libc.ptrace(16, 1, 0, 0))\n"  # PTRACE_ATTACH to the sandbox's pid 1 (root)
        "print('mount', libc.mount(b'/', b'/scratch', None, 4096, None))\n"  # MS_BIND
        "print('uid', os.getuid(), os.geteuid())\n"
    )
    result = sandbox.run_python(code)
    assert result.ok, result.stderr
    lines = dict(line.split(" ", 1) for line in result.stdout.splitlines())
    assert lines["setuid"].startswith("-1") and lines["kill1"] == "-1" and lines["ptrace"] == "-1"
    assert lines["mount"] == "-1" and lines["uid"] == f"{SANDBOX_UID} {SANDBOX_UID}"


def test_subclass_walk_reaches_os_but_stays_confined(sandbox: Sandbox, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-walk-secret")
    marker = f"/tmp/lamarck-walk-{os.getpid()}"
    code = (
        "wrap = [c for c in ().__class__.__base__.__subclasses__() if c.__name__ == '_wrap_close'][0]\n"
        "g = wrap.__init__.__globals__\n"
        f"g['system']('id -u; env; touch {marker}; cat /etc/shadow; kill -9 -1; true')\n"
        "pid = g['fork']()\n"
        "if pid == 0:\n    g['setsid']()\n    g['execv']('/bin/sleep', ['sleep', '300'])\n"
        "print('spawned', pid)\n"
    )
    result = sandbox.run_python(code, wall_seconds=5)
    assert result.stdout.splitlines()[0] == str(SANDBOX_UID)
    assert "sk-walk-secret" not in result.stdout
    assert not Path(marker).exists()


# -- availability and the weaker mode ---------------------------------------------------------------------------


def test_missing_bwrap_by_setting_raises_with_the_fix(settings: SandboxSettings) -> None:
    sandbox = Sandbox(settings.model_copy(update={"bwrap": "/nonexistent/bwrap"}))
    with pytest.raises(SandboxUnavailable) as info:
        sandbox.run_python("print(1)")
    message = str(info.value)
    assert "\n" not in message and "apt-get install bubblewrap" in message
    assert "LAMARCK_SANDBOX__MODE=limits_only" in message


def test_missing_bwrap_on_path_raises(
    settings: SandboxSettings, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(SandboxUnavailable, match="apt-get install bubblewrap"):
        Sandbox(settings).run_python("print(1)")


def test_limits_only_warns_and_still_limits(
    settings: SandboxSettings, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("LAMARCK_API__API_KEY", "lamarck-secret-789")
    sandbox = Sandbox(settings.model_copy(update={"mode": "limits_only", "bwrap": "/nonexistent/bwrap"}))
    with caplog.at_level(logging.WARNING, logger="lamarck.platform.sandbox"):
        first = sandbox.run_python(
            "import os\nprint(os.getuid(), input(), open('f.txt').read(), dict(os.environ))",
            stdin="in\n",
            files={"f.txt": "file"},
        )
        second = sandbox.run_python("x = bytearray(1 << 30)")
    assert [r.levelname for r in caplog.records].count("WARNING") == 2
    assert first.ok, first.stderr
    uid, rest = first.stdout.split(" ", 1)
    assert int(uid) == SANDBOX_UID and uid != "0" and rest.startswith("in file")
    assert "lamarck-secret-789" not in first.stdout
    assert second.limit_hit == "memory"


def test_limits_only_kills_escaped_children_on_wall_timeout(settings: SandboxSettings) -> None:
    sandbox = Sandbox(settings.model_copy(update={"mode": "limits_only"}))
    code = (
        "import os, time\n"
        "if os.fork() == 0:\n    os.setsid()\n    if os.fork() == 0:\n        time.sleep(300)\n    os._exit(0)\n"
        "time.sleep(300)\n"
    )
    result = sandbox.run_python(code, wall_seconds=1)
    assert result.limit_hit == "wall"
    # host_unchanged asserts that the double-forked, setsid'd sleeper is gone too
