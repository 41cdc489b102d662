"""Sandbox latency: start-up (``pass``), a trivial function (``print(1+1)``) and a 5-test unittest module.

Measures the round trip as the caller sees it (``run_python`` call to result) and reports median and p95 per mode
(bubblewrap, limits_only) and per interpreter start (with the venv's site-packages, and ``-S`` without them).
Prints a table and writes ``benchmarks/results/bench_sandbox.json``.

    python benchmarks/bench_sandbox.py [--runs 50]
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import platform
import shutil
import statistics
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

from lamarck.platform.sandbox import Sandbox
from lamarck.platform.settings import SandboxSettings

RESULTS = Path(__file__).resolve().parent / "results" / "bench_sandbox.json"

UNITTEST_CODE = """\
import unittest
from solution import add, mul

class Arithmetic(unittest.TestCase):
    def test_add(self):
        self.assertEqual(add(2, 3), 5)
    def test_add_negative(self):
        self.assertEqual(add(-2, 3), 1)
    def test_mul(self):
        self.assertEqual(mul(4, 5), 20)
    def test_mul_zero(self):
        self.assertEqual(mul(0, 5), 0)
    def test_types(self):
        self.assertIsInstance(add(1, 2), int)

unittest.main(verbosity=0)
"""
SOLUTION = "def add(a, b):\n    return a + b\n\ndef mul(a, b):\n    return a * b\n"

CASES: dict[str, tuple[str, dict[str, str]]] = {
    "pass": ("pass", {}),
    "print(1+1)": ("print(1+1)", {}),
    "unittest x5": (UNITTEST_CODE, {"solution.py": SOLUTION}),
}


def summarise(round_trips: list[float], inside: list[float]) -> dict[str, float]:
    ordered = sorted(round_trips)
    return {
        "median_ms": statistics.median(ordered),
        "p95_ms": ordered[max(0, int(round(0.95 * len(ordered))) - 1)],
        "min_ms": ordered[0],
        "process_median_ms": statistics.median(inside),
        "runs": len(ordered),
    }


def measure(configs: list[tuple[str, bool, str]], runs: int) -> list[dict[str, object]]:
    """Round-robin over the configurations, so load from elsewhere on the machine hits them all alike."""
    sandboxes = {(mode, site): Sandbox(SandboxSettings(mode=mode, site_packages=site)) for mode, site, _ in configs}
    samples: dict[tuple[str, bool, str], tuple[list[float], list[float]]] = {config: ([], []) for config in configs}
    for index in range(runs + 1):  # the first round warms the page cache and is not counted
        for mode, site, case in configs:
            code, files = CASES[case]
            started = time.perf_counter()
            result = sandboxes[(mode, site)].run_python(code, files=files)
            elapsed = (time.perf_counter() - started) * 1000
            if not result.ok:
                raise RuntimeError(f"benchmark run failed: {result}")
            if index:
                samples[(mode, site, case)][0].append(elapsed)
                samples[(mode, site, case)][1].append(result.wall_seconds * 1000)
    return [
        {"mode": mode, "site_packages": site, "case": case, **summarise(*samples[(mode, site, case)])}
        for mode, site, case in configs
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=50)
    args = parser.parse_args()
    logging.getLogger("lamarck.platform.sandbox").setLevel(logging.ERROR)  # limits_only warns on every run

    modes = ["bubblewrap", "limits_only"] if shutil.which("bwrap") else ["limits_only"]
    configs = [(mode, site, case) for mode in modes for site in (True, False) for case in CASES]
    load_before = os.getloadavg()[0]
    rows = measure(configs, args.runs)
    load_after = os.getloadavg()[0]

    title = f"sandbox round trip, {args.runs} runs each (load average {load_before:.1f} -> {load_after:.1f})"
    table = Table(title=title)
    for column in ("mode", "python", "case", "median ms", "p95 ms", "min ms", "sandbox wall median ms"):
        table.add_column(column, justify="right" if "ms" in column else "left")
    for row in rows:
        table.add_row(
            row["mode"],
            "-I" if row["site_packages"] else "-I -S",
            row["case"],
            f"{row['median_ms']:.1f}",
            f"{row['p95_ms']:.1f}",
            f"{row['min_ms']:.1f}",
            f"{row['process_median_ms']:.1f}",
        )
    console = Console(width=120)
    console.print(table)

    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    report = {
        "benchmark": "sandbox",
        "machine": {
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
            "kernel": platform.release(),
            "euid": os.geteuid(),
            "loadavg_1m": [load_before, load_after],
        },
        "target": {"case": "print(1+1)", "mode": "bubblewrap", "median_ms_below": 50},
        "results": rows,
    }
    RESULTS.write_text(json.dumps(report, indent=2) + "\n")
    console.print(f"wrote {RESULTS}")


if __name__ == "__main__":
    main()
