"""The ``run_python`` skill: run a snippet of Python and see its output. Always runs in the sandbox."""

from __future__ import annotations

from lamarck.platform.sandbox import Sandbox
from lamarck.skills_library.verify import failure_summary

# The stored code: what runs when the skill itself is verified (inside the sandbox already).
CODE = '''\
def run_python(code: str) -> str:
    """Run a Python snippet in the sandbox and return what it printed (stdout, then stderr)."""
    import contextlib
    import io
    import traceback

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            exec(compile(code, "snippet", "exec"), {"__name__": "__main__"})
        except BaseException:
            traceback.print_exc()
    text = out.getvalue()
    if err.getvalue():
        text += "stderr:\\n" + err.getvalue()
    return text
'''

TESTS = """
assert run_python("print(2 + 2)").strip() == "4"
assert "ZeroDivisionError" in run_python("1 / 0")
assert run_python("x = 1") == ""
"""


def run_python_host(sandbox: Sandbox, code: str) -> str:
    """The executor's path: the snippet runs as its own sandboxed program, with the same output format."""
    result = sandbox.run_python(code)
    text = result.stdout
    if result.stderr:
        text += "stderr:\n" + result.stderr
    if result.limit_hit is not None:
        text += f"\n{failure_summary(result)}"
    return text
