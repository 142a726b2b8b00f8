"""The one place that loads the assembly: cffi cdef from asm/asmbpe.h, dlopen
of libasmbpe.so (and, for tests, libasmbpe_test.so), and the CPU check."""
from __future__ import annotations

import functools
import re
from pathlib import Path

from cffi import FFI

from .errors import AsmbpeError

PKG = Path(__file__).resolve().parent
ROOT = PKG.parent
HEADER = ROOT / "asm" / "asmbpe.h"
LIB_PATH = PKG / "libasmbpe.so"
TEST_LIB_PATH = PKG / "libasmbpe_test.so"

REQUIRED = {"AVX2": 1, "BMI1": 2, "BMI2": 4, "SSE4.2": 32}


class LibraryError(AsmbpeError, RuntimeError):
    """The library is missing, or this CPU cannot run it."""


def _cdef_source() -> str:
    text = HEADER.read_text()
    # cffi's cdef takes declarations only: drop #include / #ifndef / #define
    return "\n".join(line for line in text.splitlines() if not re.match(r"\s*#", line))


ffi = FFI()
ffi.cdef(_cdef_source())


def _open(path: Path):
    if not path.exists():
        raise LibraryError(f"{path.name} is not built: run `python build.py` in {ROOT}")
    return ffi.dlopen(str(path))


@functools.cache
def lib():
    """The loaded libasmbpe.so, after checking the CPU features it needs."""
    handle = _open(LIB_PATH)
    flags = handle.asmbpe_cpu_flags()
    missing = [name for name, bit in REQUIRED.items() if not flags & bit]
    if missing:
        raise LibraryError(
            "this CPU (or its OS) lacks " + ", ".join(missing)
            + ": asmbpe's assembly needs AVX2, BMI1, BMI2 and SSE4.2")
    return handle


@functools.cache
def checkasm_lib():
    """The test-only libasmbpe_test.so (checked-call trampoline)."""
    lib()
    return _open(TEST_LIB_PATH)
