"""Helpers shared by the CLI tests (imported from the tests folder)."""
from __future__ import annotations

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
