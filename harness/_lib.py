"""The one place that loads the assembly: the declarations of asm/asmbpe.h (from
the package's _ffi.py, which build.py generates with cffi so that no C is parsed
at run time; from the package's copy of the header, asmbpe.h, where a build has no
_ffi.py), dlopen of the package's libasmbpe.so, and the CPU check.  Nothing outside
the installed package is read, except by the development tools: checkasm_lib()
loads build/libasmbpe_test.so and declares asm/test/asmbpe_test.h from a source
checkout."""
from __future__ import annotations

import functools
import re
from pathlib import Path

from .errors import AsmbpeError

PKG = Path(__file__).resolve().parent
HEADER = PKG / "asmbpe.h"
LIB_PATH = PKG / "libasmbpe.so"
# development only: a source checkout's test library (never in a wheel)
ROOT = PKG.parent
TEST_HEADER = ROOT / "asm" / "test" / "asmbpe_test.h"
TEST_LIB_PATH = ROOT / "build" / "libasmbpe_test.so"

REQUIRED = {"AVX2": 1, "BMI1": 2, "BMI2": 4, "SSE4.2": 32, "POPCNT": 64, "LZCNT": 128}
# The most threads one library call takes (ASMBPE_MAX_THREADS, asm/sys.inc): the one
# bound of every `threads` argument and --threads option
MAX_THREADS = 256


class LibraryError(AsmbpeError, RuntimeError):
    """The library is missing, or this CPU cannot run it."""


def _not_built(name: str) -> LibraryError:
    return LibraryError(f"{name} is not built: run `python build.py` in the source checkout "
                        f"(or reinstall asmbpe with pip); looked in {PKG}")


def _cdef_source(path: Path) -> str:
    text = path.read_text()
    # cffi's cdef takes declarations only: drop #include / #ifndef / #define
    return "\n".join(line for line in text.splitlines() if not re.match(r"\s*#", line))


try:
    from ._ffi import ffi           # parsed by build.py (out-of-line ABI mode)
except ImportError:                 # a build without it: parse the header copy here
    from cffi import FFI

    ffi = FFI()
    if HEADER.exists():
        ffi.cdef(_cdef_source(HEADER))


def _dlopen(an_ffi, path: Path):
    """path loaded for good: RTLD_NODELETE, because a Lib from an out-of-line FFI
    unloads its library when it is freed, and at interpreter exit that can come
    before the cdata finalizers (ffi.gc) that still call into it."""
    return an_ffi.dlopen(str(path), an_ffi.RTLD_NOW | an_ffi.RTLD_NODELETE)


def _open(path: Path):
    if not path.exists():
        raise _not_built(path.name)
    return _dlopen(ffi, path)


@functools.cache
def lib():
    """The loaded libasmbpe.so, after checking the CPU features it needs."""
    if not HEADER.exists():
        raise _not_built(HEADER.name)
    handle = _open(LIB_PATH)
    flags = handle.asmbpe_cpu_flags()
    missing = [name for name, bit in REQUIRED.items() if not flags & bit]
    if missing:
        raise LibraryError(
            "this CPU (or its OS) lacks " + ", ".join(missing)
            + ": asmbpe's assembly needs AVX2, BMI1, BMI2, SSE4.2, POPCNT and LZCNT")
    return handle


def fn_address(handle, name: str):
    """The address of function `name` of a loaded library (lib() or checkasm_lib(),
    whichever FFI declared it), as a `void *` for the trampolines."""
    return ffi.cast("void *", getattr(handle, name))


@functools.cache
def checkasm_lib():
    """The test-only libasmbpe_test.so (checked-call trampoline, bench trampoline,
    barrier torture test) of a source checkout, declared by an FFI of its own (its
    header has functions and enums of plain C types only, which cffi shares between
    FFI objects: `ffi`'s buffers and casts pass to it as they are)."""
    lib()
    if not TEST_HEADER.exists() or not TEST_LIB_PATH.exists():
        raise LibraryError(
            f"the test library is not built: run `python build.py` in a source checkout "
            f"(it is not part of an installed wheel); looked for {TEST_LIB_PATH}")
    from cffi import FFI

    test_ffi = FFI()
    test_ffi.cdef(_cdef_source(TEST_HEADER))
    return _dlopen(test_ffi, TEST_LIB_PATH)
