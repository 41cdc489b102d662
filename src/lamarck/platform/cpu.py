"""What a benchmark records about the CPU it ran on: machines differ between sessions, and which weight format is
fastest depends on the vector instructions (int8 dot products make Q8_0 the fastest on one machine, fp32 on another).
"""

from __future__ import annotations

from pathlib import Path

INT8_DOT_FLAGS = ("avx512_vnni", "avx_vnni", "amx_int8")


def cpu_summary(cpuinfo: Path = Path("/proc/cpuinfo")) -> str:
    """The CPU's model name, its widest vector extension and its int8 dot-product instructions, in one line."""
    try:
        lines = cpuinfo.read_text().splitlines()
    except OSError:
        return "unknown CPU"
    name = next((line.split(":", 1)[1].strip() for line in lines if line.startswith("model name")), "unknown CPU")
    flags = set(next((line.split(":", 1)[1].split() for line in lines if line.startswith("flags")), []))
    vector = "avx512" if "avx512f" in flags else "avx2" if "avx2" in flags else "no avx2"
    int8 = [flag for flag in INT8_DOT_FLAGS if flag in flags]
    return f"{name}, {vector}, " + ("/".join(int8) if int8 else "no int8 dot-product instructions")
