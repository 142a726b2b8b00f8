"""What the `asmbpe` commands share: the one-line error, the checks of paths and
options, the options several commands take, and writing to a stdout that may close."""
from __future__ import annotations

import contextlib
import os
import sys
import tempfile
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


def _same_file(a: Path, b: Path) -> bool:
    """Whether a and b name one file: the same resolved path, or (links) the same
    (st_dev, st_ino)."""
    try:
        if a.resolve() == b.resolve():
            return True
        sa, sb = a.stat(), b.stat()
    except (OSError, RuntimeError):         # missing, or a loop of links
        return False
    return (sa.st_dev, sa.st_ino) == (sb.st_dev, sb.st_ino)


def _input_paths(inputs) -> list[Path]:
    """The inputs that are paths (not `-`, standard input)."""
    return [Path(p) for p in inputs if isinstance(p, (str, os.PathLike)) and str(p) != "-"]


def _check_output(path, inputs=(), *, directory: bool = False, writes=None) -> Path:
    """Fail before any work when the output could not be written at `path`, or when
    writing it would replace one of `inputs` (the input files and the -t tokenizer),
    compared by resolved path and, for links, by (st_dev, st_ino). A file output (the
    default) must not be a directory, and its directory must exist and be writable.
    directory=True: `path` is a directory (made if missing), not an existing file, and
    no input in it may have a name for which `writes(name)` is true (the names the
    run writes or replaces there)."""
    out = Path(path)
    files = _input_paths(inputs)
    for p in files:
        if _same_file(out, p):
            raise InputError(f"{out}: is also an input ({p}); writing it would replace "
                             "it (give another -o)")
    if directory:
        if out.exists() and not out.is_dir():
            raise InputError(f"{out}: exists and is not a directory (here -o names a "
                             "directory)")
        for p in files:
            if writes is not None and writes(p.name) and _same_file(out, p.parent):
                raise InputError(f"{out}: the input {p} is in it, named like the files "
                                 "this command writes there; it would be replaced "
                                 "(give another -o)")
        return out
    if out.is_dir():
        raise InputError(f"{out}: is a directory (give a file name with -o)")
    parent = out.parent if str(out.parent) else Path(".")
    if not parent.is_dir():
        raise InputError(f"{out}: directory {parent} does not exist")
    if not os.access(parent, os.W_OK):
        raise InputError(f"{out}: cannot write in {parent}: permission denied")
    return out


STDOUT = "-"    # `-o -`: the result goes to stdout


@contextlib.contextmanager
def _output_file(output: str):
    """The path a command writes its result to: `output` itself, or for `-o -` a file in
    a private temporary directory (under $TMPDIR) whose bytes are copied to stdout when
    the block ends without an exception, and which is removed either way. (.tok files
    and tokenizer.bin carry counts in their headers, so they are made whole before
    they are streamed.)"""
    if output != STDOUT:
        yield Path(output)
        return
    with tempfile.TemporaryDirectory(prefix="asmbpe-stdout-") as tmp:
        path = Path(tmp) / "output"
        yield path
        with open(path, "rb") as f:
            _write_stdout_bytes(iter(lambda: f.read(1 << 20), b""))


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
         "512M, 4G), whatever the input size: the batch size follows from it. On top "
         "come the interpreter and libraries (about 90 MB), the tokenizer's tables "
         "(encode; about 90 MB more for cl100k_base) and, for train, the word table. "
         "Parquet row groups are the unit of reading (4x their text is set aside). "
         "Default: fixed batches (16 MB train, 8 MB encode).")
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


def tokenizer_kind(path) -> str:
    """What -t names: "hf" (a tokenizer.json: a .json name or a file that starts with
    "{"), "tiktoken" (a ranks file: a .tiktoken or .tiktoken.gz name, gzip data, or a
    first line "base64 rank") or "bin" (anything else, tokenizer.bin: its loader says
    "bad magic" when it is not one)."""
    import re

    from ..tokenizer import MAGIC

    with open(path, "rb") as f:
        head = f.read(256)
    name = str(path).lower()
    if head.startswith(MAGIC):
        return "bin"
    if name.endswith(".json") or head.lstrip()[:1] == b"{":
        return "hf"
    if (name.endswith((".tiktoken", ".tiktoken.gz")) or head[:2] == b"\x1f\x8b"
            or re.match(rb"[A-Za-z0-9+/]+=* \d+\r?\n", head)):
        return "tiktoken"
    return "bin"


def _load_tokenizer(path: str, pretokenizer=None):
    """The tokenizer -t names: tokenizer.bin (version 1 or 2), a tiktoken ranks file
    (.tiktoken or .tiktoken.gz; cl100k_base and o200k_base known by their hash, any
    other needs --pretokenizer) or a tokenizer.json. Every bad file is a one-line
    error (TokenizerFileError, VocabError, InputError)."""
    from ..tokenizer import Tokenizer
    from ..vocab import VocabError

    file = check_file(path)
    kind = tokenizer_kind(file)
    if pretokenizer is not None and kind != "tiktoken":
        raise InputError(f"--pretokenizer applies to tiktoken ranks files; {path} is a "
                         f"{'tokenizer.bin' if kind == 'bin' else 'tokenizer.json'}, which "
                         "names its own")
    if kind == "bin":
        return Tokenizer.load(file)
    if kind == "hf":
        return Tokenizer.from_hf(file)
    try:
        return Tokenizer.from_tiktoken(file, pretokenizer=pretokenizer)
    except VocabError as e:
        if type(e) is VocabError and pretokenizer is None and "pretokenizer=" in str(e):
            raise InputError(
                f"{path}: not a known tiktoken encoding (cl100k_base and o200k_base are "
                "recognised by their hash), so its pre-tokenizer is unknown: give "
                f"--pretokenizer NAME (one of {', '.join(PRETOKENIZER_NAMES)})") from None
        raise


TOKENIZER_HELP = ("The tokenizer: tokenizer.bin (version 1 or 2), a tiktoken ranks file "
                  "(.tiktoken or .tiktoken.gz) or a Hugging Face tokenizer.json.")


def _tokenizer_options(fn, help_text: str = TOKENIZER_HELP):
    """-t/--tokenizer FILE and --pretokenizer NAME (for tiktoken ranks files)."""
    fn = click.option(
        "--pretokenizer", "vocab_pretokenizer", type=click.Choice(PRETOKENIZER_NAMES),
        default=None,
        help="With a tiktoken ranks file that is not cl100k_base or o200k_base: its "
             "pre-tokenizer (required there; overrides a known encoding's).")(fn)
    return click.option("-t", "--tokenizer", "tokenizer_path", required=True,
                        metavar="FILE", help=help_text)(fn)


def _readers(threads) -> int:
    """Parquet row groups read at once for a run on `threads` worker threads (None:
    all CPUs): one reader thread per four, as one decodes about as much text per
    second as three or four encoding threads use (docs/OPTIMIZATION_LOG.md, E55)."""
    return max(1, (threads or os.cpu_count() or 1) // 4)


def _check_threads(threads) -> None:
    """--threads, when given, within 1..MAX_THREADS (the library's bound): every
    command that takes --threads checks it here, before any work."""
    from .._lib import MAX_THREADS

    if threads is not None and not 1 <= threads <= MAX_THREADS:
        raise InputError(f"--threads must be between 1 and {MAX_THREADS}, got {threads}")


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


def _read_option_flags(fn):
    """--column NAME, --field NAME and --lines (see harness.corpora.ReadOptions)."""
    fn = click.option(
        "--lines", "per_line", is_flag=True,
        help="Plain text files: every line is a document (empty lines skipped); not "
             "with --separator.")(fn)
    fn = click.option(
        "--field", default=None, metavar="NAME",
        help="JSONL: the field holding the text (default: text, or messages with "
             "--chat).")(fn)
    return click.option(
        "--column", default=None, metavar="NAME",
        help="Parquet: the column holding the text (default: text, or messages with "
             "--chat).")(fn)


def _read_options(separator=None, column=None, field=None, per_line=False):
    """The ReadOptions of the command's --separator, --column, --field and --lines;
    InputError when they do not go together."""
    from ..corpora import ReadOptions

    try:
        return ReadOptions(separator=separator, column=column, field=field, lines=per_line)
    except ValueError as e:
        raise InputError(str(e)) from None


def _inputs(specs, cluster: str | None = None) -> list:
    """The command's INPUT arguments as files (harness.corpora.resolve_inputs: `-` is
    standard input); standard input is refused where workers read the files (`cluster`:
    the option that sends them there, e.g. "--cluster")."""
    from ..corpora import StdinInput, resolve_inputs

    files = resolve_inputs(specs)
    if cluster and any(isinstance(p, StdinInput) for p in files):
        raise InputError(f"-: standard input cannot be read with {cluster} (each input "
                         "file is a shard its worker reads); give files")
    return files


@contextlib.contextmanager
def _input_notes(before=None):
    """Within: the notes of reading the inputs (harness.corpora.NullsSkipped warnings,
    from any thread) are kept, and printed when the block ends without an error, one
    `asmbpe: note: ...` line each on stderr, after `before()` (the progress output's
    close: the notes would cut its line)."""
    import warnings

    from ..corpora import NullsSkipped

    notes: list = []
    with warnings.catch_warnings():
        warnings.simplefilter("always", NullsSkipped)
        show = warnings.showwarning

        def keep(message, category, *args, **kw):
            if issubclass(category, NullsSkipped):
                notes.append(message)
            else:
                show(message, category, *args, **kw)

        warnings.showwarning = keep
        yield
    if notes and before is not None:
        before()
    for note in notes:
        click.echo(f"asmbpe: note: {note}", err=True)


def _write_stdout_bytes(pieces) -> None:
    """Write bytes pieces to stdout; a closed pipe (`| head`) ends quietly."""
    stdout = sys.stdout.buffer
    try:
        for piece in pieces:
            stdout.write(piece)
        stdout.flush()
    except BrokenPipeError:
        _quiet_broken_pipe()


def _write_stdout(pieces) -> None:
    """Write str pieces to stdout as UTF-8; a closed pipe (`| head`) ends quietly."""
    stdout = sys.stdout.buffer
    try:
        for piece in pieces:
            stdout.write(piece.encode("utf-8", "surrogateescape"))
        stdout.flush()
    except BrokenPipeError:
        _quiet_broken_pipe()
