"""Untrusted code execution: Python in a bubblewrap sandbox under a non-root user, with resource limits.

How one run is confined (``mode="bubblewrap"``):

* ``bwrap`` gives new pid, network, ipc, uts (and cgroup) namespaces, a root that holds only a read-only ``/usr``
  (plus ``/lib*`` links), the Python installation and venv bound read-only at their own paths, fresh ``/proc`` and
  ``/dev``, and a size-limited in-memory ``/scratch`` (the working directory). ``--die-with-parent`` plus the pid
  namespace mean that killing bwrap kills every process the code started.
* As root, bwrap runs privileged (it can bind the interpreter even from a 0700 home such as ``/root``) and
  ``setpriv`` then drops to the configured user (``nobody``), clears groups, capabilities and the bounding set and
  sets no-new-privs before Python starts. As a normal user, bwrap runs unprivileged in a user namespace.
* A short prelude, run by ``python -I`` before the code, sets the rlimits (CPU, address space, file size, open files,
  processes) and reads the code from an inherited memfd, so scratch holds exactly the caller's ``files``.
* The environment is built from nothing: no variable of the caller (API keys, ``LAMARCK_*``) reaches the code.

``mode="limits_only"`` keeps the user switch, rlimits, clean environment and a process-group kill, but has no
namespaces: the code sees the host filesystem and network. It logs a warning on every run.

Known limits: as root (no user namespace) RLIMIT_NPROC counts every process of the sandbox user on the host, so
concurrent runs share it (use a dedicated user for heavy concurrency); there is no seccomp filter yet; bwrap reports a
signalled child as 128+signal, so an explicit ``sys.exit(137)`` reads as SIGKILL.
"""

from __future__ import annotations

import logging
import os
import pwd
import re
import resource
import secrets
import selectors
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from lamarck.platform import tracing
from lamarck.platform.settings import SandboxSettings

logger = logging.getLogger(__name__)

SCRATCH = "/scratch"
_SYSTEM_PATH = "/usr/local/bin:/usr/bin:/bin"
_INSTALL_HINT = "install bubblewrap (`apt-get install bubblewrap`) or set LAMARCK_SANDBOX__MODE=limits_only"
_CHUNK = 65536


@dataclass(frozen=True)
class SandboxResult:
    stdout: str
    stderr: str
    exit_code: int | None  # negative: killed by that signal; None: never finished (killed by the sandbox)
    wall_seconds: float
    limit_hit: str | None  # None, "cpu", "memory", "wall", "file_size", "open_files", "processes", "output"

    @property
    def ok(self) -> bool:
        return self.exit_code == 0 and self.limit_hit is None


class SandboxUnavailable(RuntimeError):
    """The sandbox cannot run here; the message is one line and names the fix."""


@dataclass(frozen=True)
class _Interpreter:
    executable: str
    binds: tuple[str, ...]  # host directories bound read-only at the same path


class Sandbox:
    """Runs Python code with the limits in ``SandboxSettings``; see the module docstring for how."""

    def __init__(self, settings: SandboxSettings) -> None:
        self.settings = settings
        self._as_root = os.geteuid() == 0
        try:
            entry = pwd.getpwnam(settings.user) if not settings.user.isdigit() else pwd.getpwuid(int(settings.user))
            self._uid, self._gid = entry.pw_uid, entry.pw_gid
        except KeyError:
            self._uid = self._gid = -1  # reported when a run needs it
        if self._as_root and self._uid == 0:
            raise ValueError("sandbox user must not be root: set LAMARCK_SANDBOX__USER to an unprivileged user")

    def run_python(
        self,
        code: str,
        *,
        stdin: str = "",
        files: Mapping[str, str] | None = None,
        wall_seconds: float | None = None,
        cpu_seconds: int | None = None,
    ) -> SandboxResult:
        """Run ``code`` as ``__main__`` in a fresh sandbox; ``files`` (relative paths) go into its scratch dir."""
        wall = float(wall_seconds if wall_seconds is not None else self.settings.wall_seconds)
        cpu = int(cpu_seconds if cpu_seconds is not None else self.settings.cpu_seconds)
        relative = {_relative(name): text for name, text in (files or {}).items()}
        if self._as_root and self._uid < 0:
            raise SandboxUnavailable(f"sandbox user {self.settings.user!r} does not exist: set LAMARCK_SANDBOX__USER")
        with tracing.sandbox_span(self.settings.mode) as span:
            if self.settings.mode == "bubblewrap":
                result = self._run_bwrap(code, stdin, relative, wall, cpu)
            else:
                logger.warning(
                    "sandbox in limits_only mode: no namespaces, the code can read host files and use the network"
                )
                result = self._run_limits_only(code, stdin, relative, wall, cpu)
            tracing.sandbox_result(span, result.exit_code, result.limit_hit, result.wall_seconds)
        return result

    # -- bubblewrap ---------------------------------------------------------------------------------------------

    def _run_bwrap(self, code: str, stdin: str, files: dict[str, str], wall: float, cpu: int) -> SandboxResult:
        bwrap = shutil.which(self.settings.bwrap, path=os.environ.get("PATH", _SYSTEM_PATH))
        if bwrap is None:
            raise SandboxUnavailable(f"bubblewrap ({self.settings.bwrap!r}) not found: {_INSTALL_HINT}")
        drop: list[str] = []
        if self._as_root:
            setpriv = shutil.which("setpriv", path=_SYSTEM_PATH)
            if setpriv is None:
                raise SandboxUnavailable("setpriv not found: install util-linux, or " + _INSTALL_HINT.split(" or ")[1])
            drop = [
                setpriv,
                f"--reuid={self._uid}",
                f"--regid={self._gid}",
                "--clear-groups",
                "--inh-caps=-all",
                "--bounding-set=-all",
                "--no-new-privs",
                "--",
            ]
        interp = self._interpreter(reachable_only=False)
        fds: list[int] = []
        try:
            code_fd = _memfd("code", code)
            fds.append(code_fd)
            args = [bwrap, *self._bwrap_layout(interp)]
            args += ["--size", str(self.settings.scratch_mb << 20), "--perms", "0777", "--tmpfs", SCRATCH]
            made: set[str] = set()
            for name, text in sorted(files.items()):
                for parent in reversed(PurePosixPath(name).parents[:-1]):
                    if str(parent) not in made:
                        made.add(str(parent))
                        args += ["--perms", "0777", "--dir", f"{SCRATCH}/{parent}"]
                fd = _memfd("file", text)
                fds.append(fd)
                args += ["--perms", "0666", "--file", str(fd), f"{SCRATCH}/{name}"]
            for key, value in _environment(SCRATCH).items():
                args += ["--setenv", key, value]
            args += ["--chdir", SCRATCH, "--remount-ro", "/", "--", *drop]
            args += self._python_argv(interp, code_fd, cpu, nproc=True)
            return self._execute(args, stdin, fds, wall, cpu, cwd="/", env={}, user=None, bwrap=True)
        finally:
            for fd in fds:
                os.close(fd)

    def _bwrap_layout(self, interp: _Interpreter) -> list[str]:
        """Namespaces and the read-only filesystem view, without the scratch dir."""
        args = [
            "--unshare-pid",
            "--unshare-net",
            "--unshare-ipc",
            "--unshare-uts",
            "--unshare-cgroup-try",
            "--die-with-parent",
            "--new-session",
            "--clearenv",
        ]
        if not self._as_root:
            args += ["--unshare-user", "--disable-userns"]
        args += ["--ro-bind", "/usr", "/usr"]
        for top in ("bin", "sbin", "lib", "lib32", "lib64", "libx32"):
            host = f"/{top}"
            if os.path.islink(host):
                args += ["--symlink", os.readlink(host), host]
            elif os.path.isdir(host):
                args += ["--ro-bind", host, host]
        args += [
            "--perms",
            "0755",
            "--dir",
            "/etc",
            "--ro-bind-try",
            "/etc/ld.so.cache",
            "/etc/ld.so.cache",
            "--proc",
            "/proc",
            "--dev",
            "/dev",
        ]
        made: set[str] = {"/etc"}
        for bind in interp.binds:
            for parent in reversed(Path(bind).parents[:-1]):
                if str(parent) not in made and not _covered(str(parent)):
                    made.add(str(parent))
                    args += ["--perms", "0755", "--dir", str(parent)]
            args += ["--ro-bind", bind, bind]
            made.add(bind)
        return args

    # -- limits only --------------------------------------------------------------------------------------------

    def _run_limits_only(self, code: str, stdin: str, files: dict[str, str], wall: float, cpu: int) -> SandboxResult:
        interp = self._interpreter(reachable_only=self._as_root)
        switch = self._as_root
        token = secrets.token_hex(8)
        scratch = Path(tempfile.mkdtemp(prefix="lamarck-sandbox-"))
        code_fd = _memfd("code", code)
        try:
            for name, text in files.items():
                target = scratch / name
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_text(text, encoding="utf-8")
            if switch:
                for path in [scratch, *scratch.rglob("*")]:
                    os.chown(path, self._uid, self._gid)
            env = {**_environment(str(scratch)), "SANDBOX_RUN": token}
            # Without a user namespace, RLIMIT_NPROC counts every process of the user: only safe for a dedicated one.
            args = self._python_argv(interp, code_fd, cpu, nproc=switch)
            return self._execute(
                args,
                stdin,
                [code_fd],
                wall,
                cpu,
                cwd=str(scratch),
                env=env,
                user=(self._uid, self._gid) if switch else None,
                bwrap=False,
                token=token,
            )
        finally:
            os.close(code_fd)
            shutil.rmtree(scratch, ignore_errors=True)

    # -- shared -------------------------------------------------------------------------------------------------

    def _interpreter(self, *, reachable_only: bool) -> _Interpreter:
        """The Python to run and the host directories it needs (an installation outside /usr, a venv)."""
        configured = self.settings.python or sys.executable
        exe = os.path.abspath(shutil.which(configured) or configured)
        if reachable_only and not _reachable(exe, self._uid, self._gid):
            # limits_only as root: e.g. a pyenv Python under /root (0700); fall back to the system's Python.
            names = (f"python{sys.version_info[0]}.{sys.version_info[1]}", "python3")
            found = [path for name in names if (path := shutil.which(name, path=_SYSTEM_PATH))]
            usable = [path for path in found if _reachable(path, self._uid, self._gid)]
            if not usable:
                raise SandboxUnavailable(
                    f"{exe} is not readable by user {self.settings.user!r}: set "
                    f"LAMARCK_SANDBOX__PYTHON to a Python it can run, or {_INSTALL_HINT}"
                )
            logger.info("sandbox: %s is not readable by %s, using %s", exe, self.settings.user, usable[0])
            exe = usable[0]
        real = os.path.realpath(exe)
        binds = {str(Path(real).parent.parent)}
        venv = Path(exe).parent.parent
        in_venv = (venv / "pyvenv.cfg").is_file()
        if in_venv and self.settings.site_packages:
            binds.add(str(venv))
        else:
            exe = real
        kept = sorted((b for b in binds if not _covered(b) and b != "/"), key=len)
        return _Interpreter(executable=exe, binds=tuple(kept))

    def _python_argv(self, interp: _Interpreter, code_fd: int, cpu: int, *, nproc: bool) -> list[str]:
        mb = 1 << 20
        s = self.settings
        limits = [
            (resource.RLIMIT_CPU, cpu, cpu + 1),
            (resource.RLIMIT_AS, s.memory_mb * mb, s.memory_mb * mb),
            (resource.RLIMIT_FSIZE, s.file_size_mb * mb, s.file_size_mb * mb),
            (resource.RLIMIT_NOFILE, s.open_files, s.open_files),
            (resource.RLIMIT_CORE, 0, 0),
        ]
        if nproc:
            limits.append((resource.RLIMIT_NPROC, s.processes, s.processes))
        flags = "-I" if s.site_packages else "-IS"
        return [interp.executable, flags, "-c", _PRELUDE.format(limits=limits, fd=code_fd)]

    def _execute(
        self,
        args: list[str],
        stdin: str,
        fds: list[int],
        wall: float,
        cpu: int,
        *,
        cwd: str,
        env: dict[str, str],
        user: tuple[int, int] | None,
        bwrap: bool,
        token: str | None = None,
    ) -> SandboxResult:
        started = time.monotonic()
        proc = subprocess.Popen(
            args,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            cwd=cwd,
            env=env,
            pass_fds=fds,
            start_new_session=True,
            user=user[0] if user else None,
            group=user[1] if user else None,
            extra_groups=[] if user else None,
        )
        try:
            out, err, hit = _pump(proc, stdin.encode(), started + wall, self.settings.output_bytes)
            while hit is None and not _exited(proc.pid):  # the pipes closed, the process may still run
                if time.monotonic() >= started + wall:
                    hit = "wall"
                time.sleep(0.002)
        finally:
            # Until it is reaped the leader's pid stays reserved, so this cannot hit a reused process group.
            _killpg(proc.pid)
            if token is not None:
                _kill_marked(token)
            status, usage = _reap(proc)
        elapsed = time.monotonic() - started
        exit_code: int | None = os.waitstatus_to_exitcode(status)
        if bwrap and exit_code is not None and 128 < exit_code < 128 + signal.NSIG:
            exit_code = 128 - exit_code  # bwrap reports a signalled child as 128 + signal; turn it into -signal
        if hit is not None and exit_code == -signal.SIGKILL:
            exit_code = None
        stderr_text = err.decode("utf-8", "replace")
        # wait4 on bwrap does not see the sandboxed process's CPU time; there, wall time stands in for it.
        cpu_used = elapsed if bwrap else usage.ru_utime + usage.ru_stime
        limit = hit or _classify(exit_code, stderr_text, cpu_used, cpu)
        return SandboxResult(out.decode("utf-8", "replace"), stderr_text, exit_code, elapsed, limit)


# Sets the limits, then runs the code as __main__. Tracebacks show its lines and skip this frame: ``__loader__``
# hands the source to linecache on demand, so linecache (~5 ms of imports) is only loaded when something fails.
_PRELUDE = """\
import os, resource, sys
for _k, _s, _h in {limits!r}:
    resource.setrlimit(_k, (_s, _h))
with open({fd}, encoding="utf-8") as _f:
    _src = _f.read()
def _hook(kind, value, tb):
    import traceback
    traceback.print_exception(kind, value, tb.tb_next if tb is not None else tb)
__loader__ = type("SandboxSource", (), {{"get_source": lambda self, name, text=_src: text}})()
sys.excepthook = _hook
sys.argv[:] = ["main.py"]
sys.path.insert(0, os.getcwd())
__file__ = "main.py"
_code = compile(_src, "main.py", "exec")
del os, resource, sys, _k, _s, _h, _f, _src, _hook
exec(globals().pop("_code"))
"""

_PATTERNS = (
    ("memory", re.compile(r"MemoryError|\[Errno 12\]|Cannot allocate memory")),
    ("file_size", re.compile(r"\[Errno 27\]|File too large")),
    ("open_files", re.compile(r"\[Errno 24\]|Too many open files")),
    ("processes", re.compile(r"\[Errno 11\]|Resource temporarily unavailable")),
)


def _classify(exit_code: int | None, stderr: str, cpu_used: float, cpu_limit: int) -> str | None:
    """Best guess at which limit ended the run, from the signal or the last error Python printed."""
    if exit_code == -signal.SIGXCPU:
        return "cpu"
    if exit_code == -signal.SIGXFSZ:
        return "file_size"
    if exit_code == -signal.SIGKILL:
        return "cpu" if cpu_used >= cpu_limit - 0.5 else "memory"
    if exit_code in (0, None):
        return None
    tail = stderr[-4000:]
    for name, pattern in _PATTERNS:
        if pattern.search(tail):
            return name
    return None


def _environment(home: str) -> dict[str, str]:
    """The whole environment the code sees. Thread counts are pinned because threads count as processes."""
    return {
        "PATH": "/usr/bin:/bin",
        "HOME": home,
        "TMPDIR": home,
        "LANG": "C.UTF-8",
        "OMP_NUM_THREADS": "1",
        "OPENBLAS_NUM_THREADS": "1",
        "MKL_NUM_THREADS": "1",
    }


def _pump(proc: subprocess.Popen[bytes], data: bytes, deadline: float, cap: int) -> tuple[bytes, bytes, str | None]:
    """Feed stdin and collect stdout/stderr until both close, the deadline passes or a stream exceeds ``cap``."""
    assert proc.stdin and proc.stdout and proc.stderr
    out_fd, err_fd, in_fd = proc.stdout.fileno(), proc.stderr.fileno(), proc.stdin.fileno()
    buffers = {out_fd: bytearray(), err_fd: bytearray()}
    pending = memoryview(data)
    exited_at: float | None = None
    hit: str | None = None
    with selectors.DefaultSelector() as selector:
        for fd in (out_fd, err_fd):
            os.set_blocking(fd, False)
            selector.register(fd, selectors.EVENT_READ)
        if pending:
            os.set_blocking(in_fd, False)
            selector.register(in_fd, selectors.EVENT_WRITE)
        else:
            proc.stdin.close()
        while selector.get_map() and hit is None:
            now = time.monotonic()
            if now >= deadline:
                hit = "wall"
                break
            if _exited(proc.pid):
                # limits_only: a background child may hold the pipes open after the main process ended.
                exited_at = exited_at or now
                if now - exited_at > 0.5:
                    break
            for key, _ in selector.select(min(deadline - now, 0.1)):
                if key.fd == in_fd:
                    try:
                        pending = pending[os.write(in_fd, pending[:_CHUNK]) :]
                    except BlockingIOError:
                        continue
                    except BrokenPipeError:
                        pending = pending[:0]
                    if not pending:
                        selector.unregister(in_fd)
                        proc.stdin.close()
                    continue
                try:
                    chunk = os.read(key.fd, _CHUNK)
                except BlockingIOError:
                    continue
                if not chunk:
                    selector.unregister(key.fd)
                    continue
                buffers[key.fd] += chunk
                if len(buffers[key.fd]) > cap:
                    del buffers[key.fd][cap:]
                    hit = "output"
                    break
    return bytes(buffers[out_fd]), bytes(buffers[err_fd]), hit


def _exited(pid: int) -> bool:
    """Whether the child has ended, without reaping it (so wait4 can still read its CPU time)."""
    try:
        return os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None
    except ChildProcessError:
        return True


def _reap(proc: subprocess.Popen[bytes]) -> tuple[int, resource.struct_rusage]:
    """Wait for the child with wait4, for its CPU time (with the descendants it reaped; limits_only only)."""
    for stream in (proc.stdin, proc.stdout, proc.stderr):
        if stream is not None and not stream.closed:
            stream.close()
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    return status, usage


def _killpg(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def _kill_marked(token: str) -> None:
    """limits_only: kill processes that left the group (setsid, double fork) but still carry this run's marker."""
    marker = f"SANDBOX_RUN={token}".encode()
    for _ in range(3):
        found = []
        for entry in os.scandir("/proc"):
            if not entry.name.isdigit():
                continue
            try:
                with open(f"/proc/{entry.name}/environ", "rb") as handle:
                    if marker in handle.read().split(b"\0"):
                        found.append(int(entry.name))
            except OSError:
                continue
        if not found:
            return
        for pid in found:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        time.sleep(0.01)


def _memfd(name: str, text: str) -> int:
    fd = os.memfd_create(name)  # close-on-exec; pass_fds makes it inheritable in the sandbox only
    view = memoryview(text.encode("utf-8"))
    while view:
        view = view[os.write(fd, view) :]
    os.lseek(fd, 0, os.SEEK_SET)
    return fd


def _relative(name: str) -> str:
    path = PurePosixPath(name)
    if path.is_absolute() or not path.parts or any(part in ("..", ".") for part in path.parts):
        raise ValueError(f"sandbox file name {name!r} must be a relative path inside scratch, without '..'")
    return str(path)


def _covered(path: str) -> bool:
    """Already visible in the sandbox through the /usr bind."""
    return path == "/usr" or path.startswith("/usr/")


def _reachable(path: str, uid: int, gid: int) -> bool:
    """Whether ``uid`` can traverse to and execute ``path`` (checked by mode bits; root's own check is useless here)."""
    real = Path(os.path.realpath(path))
    try:
        for part in [*reversed(real.parents), real]:
            st = part.stat()
            bits = 0o100 if st.st_uid == uid else 0o010 if st.st_gid == gid else 0o001
            if not st.st_mode & bits:
                return False
        return True
    except OSError:
        return False
