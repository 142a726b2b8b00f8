"""Helpers shared by the CLI tests (imported from the tests folder)."""
from __future__ import annotations

import os
from pathlib import Path

from click.testing import CliRunner

from harness.cli import asmbpe


def invoke(*args, **kw):
    return CliRunner().invoke(asmbpe, [str(a) for a in args], **kw)


def one_line_error(result, needle: str, progress_ok: bool = False) -> None:
    """Exit 1, nothing on stdout, exactly one line `asmbpe: error: ...needle...`, no
    traceback.  With progress_ok, other stderr lines (progress) may come before it;
    without, the error is the only output."""
    assert result.exit_code == 1, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)
    assert result.stdout_bytes == b""
    lines = result.stderr.strip().splitlines()
    errors = [ln for ln in lines if ln.startswith("asmbpe: error: ")]
    assert len(errors) == 1, result.output
    assert progress_ok or len(lines) == 1, result.output
    assert needle in errors[0], errors[0]
    assert "Traceback" not in result.output


KJV = Path(__file__).resolve().parents[1] / "datasets" / "kjv.txt"


def kjv_tokenizer(directory: Path, nbytes: int, vocab_size: int) -> Path:
    """directory/tokenizer.bin: a small tokenizer trained on the first nbytes of the KJV."""
    import harness

    p = directory / "tokenizer.bin"
    harness.train(KJV.read_bytes()[:nbytes], vocab_size).tokenizer.save(p)
    return p


def open_files(pid: int) -> list[str]:
    """What process pid has open (the targets of /proc/PID/fd; [] once it is gone)."""
    try:
        fds = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return []
    out = []
    for fd in fds:
        try:
            out.append(os.readlink(f"/proc/{pid}/fd/{fd}"))
        except OSError:
            continue
    return out
