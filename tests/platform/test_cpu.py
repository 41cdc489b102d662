from __future__ import annotations

from pathlib import Path

from lamarck.platform.cpu import cpu_summary


def test_the_summary_names_the_cpu_its_vector_width_and_int8_dot_products(tmp_path: Path) -> None:
    info = tmp_path / "cpuinfo"
    info.write_text("model name\t: Some CPU\nflags\t\t: fpu avx2 avx512f avx512_vnni\n")
    assert cpu_summary(info) == "Some CPU, avx512, avx512_vnni"
    info.write_text("model name\t: AMD EPYC\nflags\t\t: fpu avx2 fma\n")
    assert cpu_summary(info) == "AMD EPYC, avx2, no int8 dot-product instructions"
    assert cpu_summary(tmp_path / "missing") == "unknown CPU"
