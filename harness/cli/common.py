"""What the `asmbpe` commands share: the one-line error, the checks of paths and
options, the options several commands take, and writing to a stdout that may close."""
from __future__ import annotations

import os
import sys
from pathlib import Path

import click

from ..corpora import InputError, check_file
from ..pretokenizers import DEFAULT as DEFAULT_PRETOKENIZER
from ..pretokenizers import NAMES as PRETOKENIZER_NAMES

CONTEXT = dict(help_option_names=["-h", "--help"])


def _fail(message: str) -> None:
    click.echo(f"asmbpe: error: {message}", err=True)
    sys.exit(1)


def _quiet_broken_pipe() -> None:
    # stdout is gone; point it at /dev/null so the exit-time flush does not complain
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    sys.exit(0)


def _check_output(path: str) -> Path:
    """Fail before any work when tokenizer.bin could not be written at `path`."""
    out = Path(path)
    if out.is_dir():
        raise InputError(f"{out}: is a directory (give a file name with -o)")
    parent = out.parent if str(out.parent) else Path(".")
    if not parent.is_dir():
        raise InputError(f"{out}: directory {parent} does not exist")
    if not os.access(parent, os.W_OK):
        raise InputError(f"{out}: cannot write in {parent}: permission denied")
    return out


def _mb(n: int) -> str:
    return f"{n / 1e6:.1f} MB"


def _memory(value):
    """--memory SIZE -> bytes (None when not given)."""
    from ..corpora import parse_size

    if value is None:
        return None
    try:
        n = parse_size(value)
    except ValueError as e:
        raise InputError(f"--memory: {e}") from None
    if n < 8 << 20:
        raise InputError(f"--memory: {value} is too small (at least 8M)")
    return n


_MEMORY = click.option(
    "--memory", default=None, metavar="SIZE",
    help="Bound the data in flight (input batches, buffers, ids) to about SIZE (e.g. "
         "512M, 4G), whatever the input size: the batch size follows from it. The "
         "interpreter and libraries (about 70 MB) and, for train, the word table come "
         "on top. Parquet row groups are the unit of reading (about 12x their text is set aside). Default: fixed batches (16 MB train, 8 MB encode).")
_CLUSTER = click.option(
    "--cluster", default=None, metavar="ADDRESS",
    help="Run on a Dask cluster: a scheduler address (tcp://host:8786) or local:N for "
         "N worker processes on this machine. Every input file is one shard; paths must "
         "be visible to every worker.")


def _open_cluster(address):
    from ..distributed import connect

    try:
        return connect(address)
    except ValueError as e:
        raise InputError(f"--cluster: {e}") from None


def _load_tokenizer(path: str):
    """tokenizer.bin at path (TokenizerFileError, a one-line error, when it is bad)."""
    from ..tokenizer import Tokenizer

    return Tokenizer.load(check_file(path))


def _readers(threads) -> int:
    """Parquet row groups read at once for a run on `threads` worker threads (None:
    all CPUs): one reader thread per four, as one decodes about as much text per
    second as three or four encoding threads use (docs/OPTIMIZATION_LOG.md, E55)."""
    return max(1, (threads or os.cpu_count() or 1) // 4)


def _check_threads(threads) -> None:
    if threads is not None and threads < 1:
        raise InputError(f"--threads must be >= 1, got {threads}")


def _pretokenizer_option(what: str):
    """--pretokenizer NAME, a name of harness.pretokenizers (default nanochat)."""
    return click.option(
        "--pretokenizer", type=click.Choice(PRETOKENIZER_NAMES), default=DEFAULT_PRETOKENIZER,
        show_default=True,
        help=f"{what}: seed (SPEC §3, byte-level classes) or an exact one with Unicode "
             "classes: nanochat, cl100k, o200k, gpt2 (SPEC §10).")


_SEPARATOR = click.option(
    "--separator", default=None, metavar="LINE",
    help="Plain text files: documents are separated by lines equal to LINE ('' = a blank "
         "line); default: one document per file.")


def _write_stdout(pieces) -> None:
    """Write str pieces to stdout as UTF-8; a closed pipe (`| head`) ends quietly."""
    stdout = sys.stdout.buffer
    try:
        for piece in pieces:
            stdout.write(piece.encode("utf-8", "surrogateescape"))
        stdout.flush()
    except BrokenPipeError:
        _quiet_broken_pipe()
