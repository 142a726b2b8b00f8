"""build.py: incremental, and an assembly error names the file and line."""
from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _build_module():
    spec = importlib.util.spec_from_file_location("asmbpe_build", ROOT / "build.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _run_build() -> str:
    r = subprocess.run([sys.executable, "build.py"], cwd=ROOT, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    return r.stdout


def test_assembly_error_names_file_and_line(tmp_path):
    build = _build_module()
    src = tmp_path / "broken.asm"
    src.write_text('%include "asmbpe.inc"\nsection .text\n    mov rax, rbx, rcx\n')
    with pytest.raises(build.BuildError) as e:
        build.assemble(build.find_nasm(), src, tmp_path / "broken.o")
    assert "broken.asm:3:" in str(e.value) and "error" in str(e.value)
    assert not (tmp_path / "broken.o").exists()


def test_warnings_are_errors(tmp_path):
    build = _build_module()
    src = tmp_path / "warn.asm"
    src.write_text("section .text\n    dq 0x1ffffffffffffffff1\n")     # overflow: a warning
    with pytest.raises(build.BuildError):
        build.assemble(build.find_nasm(), src, tmp_path / "warn.o")


def test_incremental():
    _run_build()
    assert "up to date" in _run_build()
    src = ROOT / "asm" / "memeq.asm"
    os.utime(src)                   # now: newer than its object
    out = _run_build()
    assert "NASM  asm/memeq.asm" in out
    assert "pretok.asm" not in out and "LD    harness/libasmbpe.so" in out
    assert "up to date" in _run_build()


def test_library_has_no_executable_stack():
    r = subprocess.run(["readelf", "-lW", str(ROOT / "harness" / "libasmbpe.so")],
                       capture_output=True, text=True)
    if r.returncode != 0:
        pytest.skip("readelf not available")
    stack = [ln for ln in r.stdout.splitlines() if "GNU_STACK" in ln]
    assert stack and "RWE" not in stack[0]
