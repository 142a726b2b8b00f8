"""The base of every error asmbpe raises on purpose: bad input, a bad file, a failed
download, a library that cannot load or train, memory that ran out. `except
AsmbpeError` catches them all; each also keeps its older base where it had one
(TokFileError and TokenizerFileError are ValueErrors, TrainError and LibraryError
RuntimeErrors, OutOfMemory a MemoryError). The messages are one line: the `asmbpe`
command prints them as `asmbpe: error: MESSAGE`."""
from __future__ import annotations

import contextlib

__all__ = ["AsmbpeError", "OutOfMemory", "out_of_memory", "memory_phase"]


class AsmbpeError(Exception):
    """An expected failure of asmbpe, with a one-line message."""


class OutOfMemory(AsmbpeError, MemoryError):
    """Memory (or the address space a new thread needs) ran out while `phase` ("reading
    the input", "counting words", "training merges", "encoding", ...); `detail` says
    what could not be had (numpy's, pyarrow's or the library's words)."""

    def __init__(self, phase: str, detail: str = ""):
        self.phase, self.detail = phase, detail
        super().__init__(f"out of memory while {phase}" + (f" ({detail})" if detail else ""))


def _first_line(e: BaseException) -> str:
    text = str(e).strip()
    return text.splitlines()[0] if text else ""


def _is_thread_start(e: BaseException) -> bool:
    """Python's threading could not start a thread (its stack did not fit)."""
    return isinstance(e, RuntimeError) and "can't start new thread" in str(e)


def out_of_memory(e: BaseException, phase: str) -> OutOfMemory | None:
    """`e` as an OutOfMemory while `phase` when it says memory ran out: a MemoryError
    (numpy's _ArrayMemoryError, pyarrow's ArrowMemoryError, the library's out of
    memory), RuntimeError("can't start new thread"), or an OSError ENOMEM; e itself
    when it already is one; None for any other error."""
    import errno

    if isinstance(e, OutOfMemory):
        return e
    if _is_thread_start(e):
        return OutOfMemory(phase, "a new thread's stack could not be mapped")
    if isinstance(e, OSError) and e.errno == errno.ENOMEM:
        return OutOfMemory(phase, e.strerror or "ENOMEM")
    if not isinstance(e, MemoryError):
        return None
    text = _first_line(e)
    if type(e).__module__.startswith("numpy"):  # "Unable to allocate 20.1 MiB for an array"
        text = "numpy: " + text.split(" for an array")[0].replace("Unable", "unable")
    elif type(e).__module__.startswith("pyarrow"):
        text = "pyarrow: " + text
    return OutOfMemory(phase, text or "Python could not allocate")


@contextlib.contextmanager
def memory_phase(phase: str):
    """Within: an error that says memory ran out (see out_of_memory) is raised as an
    OutOfMemory while `phase` instead (one already raised keeps its phase, the
    innermost one)."""
    try:
        yield
    except (MemoryError, RuntimeError, OSError) as e:
        oom = out_of_memory(e, phase)
        if oom is None or oom is e:
            raise
        raise oom from e
