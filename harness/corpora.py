"""Where the corpora are, and reading documents from files (SPEC §8).

The shared corpora (english, multilingual, code: Parquet files with a `text` column)
live in the directory named by the environment variable ASMBPE_CORPORA, or else in
`shared/corpora` next to the repository.

One streaming reader per format, `iter_documents(path)`, yields the documents of one
file as bytes (UTF-8 for text formats; plain text files are passed through as they
are, valid UTF-8 or not):

- `.parquet`: the `text` column (string or binary), read one row group at a time
  (the unit of streaming: memory holds about one row group) and handed out in batches
  of rows; null rows are skipped, and counted (a `NullsSkipped` warning per file);
- `.jsonl` / `.ndjson`, optionally `.gz` or `.zst` (zstd needs the `zstandard`
  module): the `text` field of each line, read line by line; blank lines are skipped;
- anything else, optionally `.gz` / `.zst`: plain text, the whole file one document,
  or, with a separator, the pieces between separator lines (a line that equals the
  separator apart from its line ending; "" = a blank line), or with `lines`, each line
  (without its line ending); empty pieces and lines are skipped.

`ReadOptions` (keyword `read_options=`) holds the separator, the lines mode, and
another Parquet column or JSONL field than `text` (`messages` for chat); the older
`separator=` keyword still works. A compressed file must end at the end of a complete
gzip member or zstd frame, else reading fails ("stream ends early"). Inputs must be
regular files or FIFOs (devices are refused). `resolve_inputs(specs)` turns the
command line's inputs into files, `-` into a `StdinInput`: standard input, read once
as a stream, its format told by its first bytes (gzip / zstd magic: decompressed;
"PAR1": Parquet, copied to a temporary file first; a first non-blank "{": JSONL; else
plain text).

Chat input (SPEC §5, §8), `iter_conversations(path)`: conversations in the role/content
format of SmolTalk, each a list of {"role", "content"} dicts (both strings; the role one
of CHAT_ROLES unless told otherwise):

- `.jsonl` / `.ndjson`, optionally `.gz` / `.zst`: the `messages` field of each line;
- `.parquet`: a `messages` column (a list of structs with `role` and `content`).

On top of it: `iter_batches(paths, batch_bytes)` groups the documents of several files
into lists of about `batch_bytes` bytes (what `harness.train` counts per library call),
`iter_conversation_batches` does the same for conversations,
`read_documents(path)` returns them all as a list, and `estimate_bytes(paths)` guesses
the text bytes ahead of reading (for progress bars).

Problems with a file (missing, unreadable, a directory, empty, malformed, a bad
compressed stream) raise `InputError`, whose message is one line naming the file and,
where it applies, the line (`FILE:LINE: ...`) or the row (`FILE: row N: ...`).
"""
from __future__ import annotations

import gzip
import io
import json
import os
import contextlib
import queue
import shutil
import stat
import struct
import sys
import tempfile
import threading
import warnings
import weakref
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from ._lazy import lazy_numpy

from .buffers import PackedBuilder, TextBatch
from .errors import AsmbpeError, memory_phase, out_of_memory
from . import parquet_pages                  # (plain string pages, without pyarrow)
from .parquet_pages import row_group_arrays
from .tokenizer import CHAT_ROLES       # the roles that have a special token (SPEC §5)

np = lazy_numpy(globals())    # numpy imported on first use (harness/_lazy.py)

ROOT = Path(__file__).resolve().parent.parent
NAMES = ("english", "multilingual", "code")
ENV = "ASMBPE_CORPORA"

__all__ = ["InputError", "NullsSkipped", "NAMES", "corpora_dir", "corpus_path", "available",
           "ReadOptions", "StdinInput", "STDIN", "resolve_inputs",
           "check_file", "file_format", "iter_documents", "iter_batches", "read_documents",
           "estimate_bytes", "BATCH_BYTES", "PARQUET_BATCH_ROWS", "CHAT_ROLES",
           "iter_conversations", "iter_conversation_batches", "conversation_bytes", "prefetch",
           "parse_size", "budget_batch_bytes", "check_streamable", "max_row_group_bytes",
           "give_back_freed_memory"]

BATCH_BYTES = 64 << 20          # iter_batches: about this many text bytes per batch
PARQUET_BATCH_ROWS = 256        # rows per ParquetFile.iter_batches batch
# Give the memory Arrow freed back to the OS after every Parquet row group, so that
# reading holds about one row group (what bounded streaming, `--memory`, and the
# distributed workers rely on). Within `arrow_memory_kept()` the allocator keeps it for
# the next row group instead, which is faster where memory the OS hands out afresh is
# slow to touch (this VM, reading english.parquet: 11,000 page faults and 0.1-0.5 s
# of system time with the release, 3,900 and 0.04-0.2 s without; peak RSS +50 MB).
RELEASE_ARROW_MEMORY = True
# Within `arrow_memory_kept(readers=N)`, the row groups of a Parquet file are read by N
# threads at once (Arrow decompresses without the GIL), in order: one reader thread
# decodes about 650 MB of text per second here, less than a few encoding threads use.
PARQUET_READERS = 1


_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD, _M_ARENA_MAX = -1, -3, -8    # glibc mallopt parameters
_GLIBC_DEFAULT_THRESHOLD = 128 << 10
_GLIBC_MAX_MMAP_THRESHOLD = 32 << 20


def _glibc_keeps_memory(keep: bool) -> None:
    """glibc's malloc keeps freed memory for reuse (no trimming, blocks up to 32 MB
    from the heap instead of their own mappings) in one arena for all threads (a
    reader thread's own arena kept a second set of freed blocks: 99 -> 90 MB peak for
    `asmbpe train` on code, log T61), or back to its defaults (threads started
    meanwhile keep the one arena; the arena limit goes back to glibc's default of 8
    per core, as mallopt cannot unset it). A no-op where there is no glibc mallopt."""
    import ctypes

    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return
    mallopt(_M_TRIM_THRESHOLD, (1 << 31) - 1 if keep else _GLIBC_DEFAULT_THRESHOLD)
    mallopt(_M_MMAP_THRESHOLD, _GLIBC_MAX_MMAP_THRESHOLD if keep else _GLIBC_DEFAULT_THRESHOLD)
    # glibc ignores 0, so "back" is its default limit: 8 arenas per core (64-bit)
    mallopt(_M_ARENA_MAX, 1 if keep else 8 * (os.cpu_count() or 1))


def give_back_freed_memory() -> None:
    """Hand the memory freed so far back to the OS (glibc's malloc_trim), also within
    arrow_memory_kept: called once reading is over (the reader's buffers, kept for
    reuse while reading, would otherwise count in the peak of the work after it).
    A no-op where there is no glibc."""
    import ctypes

    try:
        ctypes.CDLL(None).malloc_trim(0)
    except (OSError, AttributeError):
        pass


@contextlib.contextmanager
def arrow_memory_kept(readers: int = 1):
    """Within: memory freed while reading is kept for the next row group or batch
    instead of going back to the OS (faster where fresh pages are slow to touch, one
    row group more at peak); all restored on exit. Parquet reading skips its release
    after each row group; glibc's malloc stops trimming, and where pyarrow reads (a
    layout harness.parquet_pages leaves to it) Arrow allocates from the system
    allocator (pyarrow's mimalloc pool gives freed pages back after a delay; set when
    pyarrow is first used, so that pyarrow is not imported for nothing; measured
    effect: docs/OPTIMIZATION_LOG.md, E31). The `train` and `encode` commands read
    this way when no --memory budget is given. readers: row groups of a Parquet file
    read at once, on that many threads (memory: one row group each); the documents
    come out in the same order."""
    global RELEASE_ARROW_MEMORY, PARQUET_READERS, _ARROW_POOL
    old, RELEASE_ARROW_MEMORY = RELEASE_ARROW_MEMORY, False
    old_readers, PARQUET_READERS = PARQUET_READERS, max(1, int(readers))
    old_pool, _ARROW_POOL = _ARROW_POOL, None
    _glibc_keeps_memory(True)
    try:
        yield
    finally:
        RELEASE_ARROW_MEMORY = old
        PARQUET_READERS = old_readers
        if _ARROW_POOL is not None:             # pyarrow was used within
            import pyarrow as pa
            pa.set_memory_pool(_ARROW_POOL)
        _ARROW_POOL = old_pool
        _glibc_keeps_memory(False)


_ARROW_POOL = None      # within arrow_memory_kept, once pyarrow is used: the pool before


def _arrow():
    """pyarrow, its memory pool the system allocator within arrow_memory_kept."""
    import pyarrow as pa

    global _ARROW_POOL
    if not RELEASE_ARROW_MEMORY and _ARROW_POOL is None:
        with _ARROW_LOCK:
            if _ARROW_POOL is None:
                _ARROW_POOL = pa.default_memory_pool()
                pa.set_memory_pool(pa.system_memory_pool())
    return pa


_ARROW_LOCK = threading.Lock()


class InputError(AsmbpeError):
    """A file that cannot be used as input; the message is one line."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

    def __str__(self) -> str:
        return self.message


class NullsSkipped(UserWarning):
    """Warned after the last row of a Parquet file in which some rows of the column read
    were null (those rows are skipped): `path`, `column` and `count` say where and how
    many. The `asmbpe` commands print it as `asmbpe: note: ...`."""

    def __init__(self, path, column: str, count: int) -> None:
        super().__init__(f"{path}: {count} null '{column}' value(s) skipped")
        self.path, self.column, self.count = path, column, count


def corpora_dir() -> Path:
    """$ASMBPE_CORPORA if set, else <repo>/../shared/corpora (it may not exist)."""
    env = os.environ.get(ENV)
    return Path(env) if env else ROOT.parent / "shared" / "corpora"


def corpus_path(name: str) -> Path:
    """The file of the named corpus (english | multilingual | code)."""
    if name not in NAMES:
        raise InputError(f"unknown corpus {name!r} (choose from {', '.join(NAMES)})")
    return corpora_dir() / f"{name}.parquet"


def available() -> list[str]:
    """The corpus names whose file exists, in NAMES order."""
    return [n for n in NAMES if (corpora_dir() / f"{n}.parquet").is_file()]


_NOT_REGULAR = ((stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
                (stat.S_ISSOCK, "a socket"))


def check_file(path) -> Path:
    """`path` as a Path, if it is a readable, non-empty regular file or a FIFO (read
    as a stream); else InputError (devices such as /dev/zero are refused: they never
    end). A StdinInput is returned as it is (it was checked when made)."""
    if isinstance(path, StdinInput):
        return path
    p = Path(path)
    try:
        st = p.stat()
    except FileNotFoundError:
        raise InputError(f"{p}: no such file") from None
    except OSError as e:
        raise InputError(f"{p}: cannot read: {e.strerror or e}") from None
    if stat.S_ISDIR(st.st_mode):
        raise InputError(f"{p}: is a directory")
    for test, kind in _NOT_REGULAR:
        if test(st.st_mode):
            raise InputError(f"{p}: not a regular file ({kind})")
    if not os.access(p, os.R_OK):
        raise InputError(f"{p}: cannot read: permission denied")
    if st.st_size == 0 and stat.S_ISREG(st.st_mode):
        raise InputError(f"{p}: is empty")
    return p


STDIN = "-"         # the input spec that means standard input


def resolve_inputs(specs, stdin=None) -> list:
    """The input files of a command, each checked: a spec "-" is standard input (a
    StdinInput read from `stdin`, default sys.stdin's binary stream; at most once),
    any other is a path (check_file). InputError for a bad one."""
    out: list = []
    for spec in _as_paths(specs):
        if isinstance(spec, str) and spec == STDIN:
            if any(isinstance(p, StdinInput) for p in out):
                raise InputError("-: standard input can be given only once")
            out.append(StdinInput(stdin))
        else:
            out.append(check_file(spec))
    if not out:
        raise InputError("no input files")
    return out


@dataclass(frozen=True)
class ReadOptions:
    """How documents are taken from the input files (the --separator, --column, --field
    and --lines options):

    - separator: plain text: documents are the pieces between lines equal to it (str
      or bytes, one line; "" = a blank line); None: the whole file is one document;
    - lines: plain text: every line is a document (its line ending left out; empty
      lines skipped); not together with a separator;
    - column: the Parquet column read (default `text`, or `messages` for chat);
    - field: the JSONL field read (default `text`, or `messages` for chat).

    ValueError for a separator with a line break, lines with a separator, or an empty
    column or field name."""

    separator: str | bytes | None = None
    column: str | None = None
    field: str | None = None
    lines: bool = False

    def __post_init__(self):
        if self.separator is not None:
            raw = _as_bytes(self.separator)
            if b"\n" in raw or b"\r" in raw:
                raise ValueError("separator must be one line, without line breaks")
            if self.lines:
                raise ValueError("--lines and --separator cannot be used together (each "
                                 "line is a document with --lines)")
        for name, value in (("column", self.column), ("field", self.field)):
            if value is not None and (not isinstance(value, str) or not value):
                raise ValueError(f"{name} must be a non-empty name, got {value!r}")

    def column_name(self, chat: bool = False) -> str:
        """The Parquet column to read."""
        return self.column or ("messages" if chat else "text")

    def field_name(self, chat: bool = False) -> str:
        """The JSONL field to read."""
        return self.field or ("messages" if chat else "text")


def _as_bytes(separator) -> bytes:
    return separator.encode("utf-8") if isinstance(separator, str) else bytes(separator)


def _read_options(options: ReadOptions | None = None, separator=None) -> ReadOptions:
    """The ReadOptions of a call that takes `read_options=` and the older `separator=`
    keyword: `options`, or ReadOptions(separator) when it is None. ValueError when both
    are given."""
    if options is None:
        return ReadOptions(separator=separator)
    if separator is not None:
        raise ValueError("give the separator in read_options (ReadOptions(separator=...)), "
                         "not both")
    return options


# ------------------------------------------------------------------------ formats

_COMPRESSIONS = ((".gz", "gzip"), (".zst", "zstd"), (".zstd", "zstd"))


def file_format(path) -> tuple[str, str | None]:
    """(format, compression) from the file name: format "parquet", "jsonl" or "text";
    compression None, "gzip" or "zstd". A StdinInput's are told by its first bytes."""
    if isinstance(path, StdinInput):
        return path.format, path.compression
    name = Path(path).name.lower()
    compression = None
    for suffix, kind in _COMPRESSIONS:
        if name.endswith(suffix):
            compression, name = kind, name[:-len(suffix)]
            break
    if name.endswith(".parquet"):
        return "parquet", compression
    if name.endswith((".jsonl", ".ndjson")):
        return "jsonl", compression
    return "text", compression


def _first_line(e: BaseException) -> str:
    text = str(e).strip()
    return text.splitlines()[0] if text else type(e).__name__


_GZIP_MAGIC = b"\x1f\x8b"
_ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"
_PARQUET_MAGIC = b"PAR1"


class _ZstdFrames:
    """Follows a zstd stream through its headers as its compressed bytes go by (RFC
    8878: frame header, block headers, checksum; skippable frames), so that its end can
    be checked to fall between two frames (`complete`): zstandard's reader ends
    quietly within a truncated frame. Block contents are passed over, not read."""

    def __init__(self):
        self._state, self._need, self._got = "magic", 4, b""
        self._skip = 0              # bytes to pass over: header fields, block contents
        self._checksum = 0          # bytes of checksum after the frame's last block

    @property
    def complete(self) -> bool:
        """Whether the bytes so far end between two frames."""
        return self._state == "magic" and not self._got and not self._skip

    def feed(self, data: bytes) -> None:
        """Follow the next bytes; ValueError where a frame should start and none does."""
        i, n = 0, len(data)
        while i < n:
            if self._skip:
                k = min(self._skip, n - i)
                self._skip -= k
                i += k
                continue
            k = min(self._need - len(self._got), n - i)
            self._got += data[i:i + k]
            i += k
            if len(self._got) == self._need:
                head, self._got = self._got, b""
                self._header(head)

    def _header(self, head: bytes) -> None:
        if self._state == "magic":
            if head == _ZSTD_MAGIC:
                self._state, self._need = "descriptor", 1
            elif head[0] & 0xF0 == 0x50 and head[1:] == b"\x2a\x4d\x18":
                self._state, self._need = "skippable", 4
            else:
                raise ValueError("unknown frame descriptor (not zstd data)")
        elif self._state == "descriptor":        # the rest of the frame header
            d = head[0]
            single = d >> 5 & 1
            self._checksum = 4 if d >> 2 & 1 else 0
            self._skip = ((0 if single else 1) + (0, 1, 2, 4)[d & 3]
                          + (single, 2, 4, 8)[d >> 6])
            self._state, self._need = "block", 3
        elif self._state == "block":
            h = int.from_bytes(head, "little")
            self._skip = 1 if (h >> 1) & 3 == 1 else h >> 3     # an RLE block: one byte
            if h & 1:                                           # the last block
                self._skip += self._checksum
                self._state, self._need = "magic", 4
        else:                                   # a skippable frame's size
            self._skip = int.from_bytes(head, "little")
            self._state, self._need = "magic", 4


class _ZstdInput:
    """The compressed side of a zstd stream, as zstandard's reader takes it: the bytes
    of `raw`, followed (_ZstdFrames); EOFError at its end when that is within a frame."""

    def __init__(self, raw):
        self._raw, self._frames = raw, _ZstdFrames()

    def read(self, n: int = -1) -> bytes:
        data = self._raw.read(n)
        if data:
            self._frames.feed(data)
        elif not self._frames.complete:
            raise EOFError("zstd stream ends early")
        return data

    def close(self) -> None:
        self._raw.close()


def _zstd_reader(p, raw):
    """A buffered reader of the zstd data in the binary file object `raw` (closed with
    it), every frame to its end: a stream that ends within one raises EOFError."""
    try:
        import zstandard
    except ImportError:
        raw.close()
        raise InputError(f"{p}: reading .zst files needs the zstandard module "
                         "(pip install zstandard)") from None
    reader = zstandard.ZstdDecompressor().stream_reader(_ZstdInput(raw),
                                                        read_across_frames=True,
                                                        closefd=True)
    return io.BufferedReader(reader, buffer_size=1 << 20)


def _open_binary(p: Path, compression: str | None):
    """A binary, line-iterable file object of the (decompressed) content of p (a
    StdinInput: its stream, once)."""
    if isinstance(p, StdinInput):
        return p.open()
    try:
        if compression == "gzip":
            return gzip.open(p, "rb")
        if compression == "zstd":
            return _zstd_reader(p, open(p, "rb"))
        return open(p, "rb", buffering=1 << 20)
    except OSError as e:
        raise InputError(f"{p}: cannot read: {e.strerror or e}") from None


class _Prefixed(io.RawIOBase):
    """A raw binary stream of `head` and then what `rest` holds (what was read to tell a
    format, put back in front). Closing it leaves `rest` open."""

    def __init__(self, head: bytes, rest):
        super().__init__()
        self._head = head
        self._read = getattr(rest, "read1", rest.read)

    def readable(self) -> bool:
        return True

    def readinto(self, b) -> int:
        if self._head:
            n = min(len(b), len(self._head))
            b[:n], self._head = self._head[:n], self._head[n:]
            return n
        data = self._read(len(b))
        b[:len(data)] = data
        return len(data)


def _read_head(stream, enough) -> bytes:
    """The first bytes of a binary stream, read until `enough(head)` or its end."""
    head = b""
    read = getattr(stream, "read1", stream.read)
    while not enough(head):
        data = read(1 << 16)
        if not data:
            break
        head += data
    return head


_SNIFF_BYTES = 1 << 16      # stdin: a first non-blank byte is looked for this far


def _looks_like_jsonl(head: bytes) -> bool:
    """Whether text that begins with `head` is JSONL: its first non-blank line is a
    JSON object (or, when that line is longer than head, begins like one, `{"`). Code
    or text that merely starts with "{" stays plain text."""
    first, newline, _ = head.lstrip().partition(b"\n")
    if not first.startswith(b"{"):
        return False
    if not newline:                                 # the line goes on past the head
        return first[1:].lstrip()[:1] == b'"'
    try:
        return isinstance(json.loads(first), dict)
    except ValueError:
        return False


class StdinInput(os.PathLike):
    """Standard input as an input file (`-` on the command line), read once, as a
    stream. Without a name, its format is told by its first bytes: gzip (1f 8b) or zstd
    (28 b5 2f fd) data is decompressed; Parquet ("PAR1") is copied to a temporary file
    first (removed with this object), as Parquet is read by seeking; then a first
    non-blank byte "{" means JSONL, anything else plain text. Messages name it
    `<stdin>`; os.fspath gives the temporary Parquet file, or "-"."""

    def __init__(self, stream: BinaryIO | None = None) -> None:
        raw = stream if stream is not None else sys.stdin.buffer
        self.format, self.compression = "text", None
        self._spool: str | None = None
        self._reader = None
        try:
            head = _read_head(raw, lambda h: len(h) >= 4)
        except OSError as e:
            raise InputError(f"{self}: cannot read: {e.strerror or e}") from None
        if not head:
            raise InputError(f"{self}: is empty")
        source = _Prefixed(head, raw)
        if head.startswith(_PARQUET_MAGIC):
            self.format, self._spool = "parquet", self._copy(source)
            return
        if head.startswith(_GZIP_MAGIC):
            self.compression = "gzip"
            reader = gzip.GzipFile(fileobj=source, mode="rb")
        elif head.startswith(_ZSTD_MAGIC):
            self.compression = "zstd"
            reader = _zstd_reader(self, source)
        else:
            reader = source
        try:
            text = _read_head(reader, lambda h: len(h) >= _SNIFF_BYTES or h.strip())
        except Exception as e:              # a bad or truncated compressed stream
            raise _stream_error(self, self.compression, "", e) from None
        if _looks_like_jsonl(text):
            self.format = "jsonl"
        self._reader = io.BufferedReader(_Prefixed(text, reader), buffer_size=1 << 20)

    def _copy(self, source) -> str:
        """Copy the stream to a temporary file; its path."""
        fd, path = tempfile.mkstemp(prefix="asmbpe-stdin-", suffix=".parquet")
        weakref.finalize(self, _remove, path)
        try:
            with os.fdopen(fd, "wb") as f:
                shutil.copyfileobj(source, f, 1 << 20)
        except OSError as e:
            raise InputError(f"{self}: cannot copy to {path}: {e.strerror or e}") from None
        return path

    def open(self):
        """The (decompressed) binary stream; once."""
        reader, self._reader = self._reader, None
        if reader is None:
            raise InputError(f"{self}: standard input can be read only once")
        return reader

    def __fspath__(self) -> str:
        return self._spool or STDIN

    def __str__(self) -> str:
        return "<stdin>"

    def __repr__(self) -> str:
        return f"StdinInput(format={self.format!r}, compression={self.compression!r})"


def _remove(path: str) -> None:
    with contextlib.suppress(OSError):
        os.unlink(path)


def _stream_error(p: Path, compression: str | None, where: str,
                  e: BaseException) -> AsmbpeError:
    oom = out_of_memory(e, f"reading {p}{where}")     # not the file's fault
    if oom is not None:
        return oom
    if compression and not isinstance(e, InputError):
        kind = "gzip" if compression == "gzip" else "zstd"
        if isinstance(e, EOFError):
            return InputError(f"{p}{where}: {kind} stream ends early (truncated file?)")
        if not isinstance(e, OSError) or isinstance(e, gzip.BadGzipFile) or e.errno is None:
            return InputError(f"{p}{where}: not a valid {kind} file: {_first_line(e)}")
    if isinstance(e, OSError):
        return InputError(f"{p}{where}: cannot read: {e.strerror or _first_line(e)}")
    return InputError(f"{p}{where}: cannot read: {_first_line(e)}")


def _lines(p: Path, compression: str | None):
    """(line number, line) of the decompressed file, read errors as InputError."""
    with _open_binary(p, compression) as f:
        lineno = 0
        it = iter(f)
        while True:
            try:
                line = next(it)
            except StopIteration:
                return
            except Exception as e:          # gzip.BadGzipFile, EOFError, ZstdError, OSError
                raise _stream_error(p, compression, f":{lineno + 1}", e) from None
            lineno += 1
            yield lineno, line


def _parquet_file(p: Path):
    """A ParquetFile with buffered column reads instead of whole pre-buffered row
    groups: a lower peak of memory at the same speed."""
    import pyarrow.parquet as pq
    return pq.ParquetFile(os.fspath(p), pre_buffer=False, buffer_size=1 << 20)


def _unreadable(p: Path, row: int, e: Exception) -> AsmbpeError:
    oom = out_of_memory(e, f"reading {p} at row {row}")  # not the file's fault
    if oom is not None:
        return oom
    return InputError(f"{p}: row {row}: cannot read as Parquet: {_first_line(e)}")


def _open_parquet(p: Path, column: str):
    """(ParquetFile, the column's Arrow type); InputError when unreadable or without it."""
    try:
        _arrow()
    except ImportError:
        raise InputError(f"{p}: reading Parquet needs pyarrow (pip install pyarrow)") from None
    try:
        pf = _parquet_file(p)
        schema = pf.schema_arrow
    except Exception as e:              # pyarrow raises its own error types
        raise (out_of_memory(e, f"reading {p}")
               or InputError(f"{p}: cannot read as Parquet: {_first_line(e)}")) from None
    if column not in schema.names:
        raise InputError(f"{p}: no '{column}' column (columns: {', '.join(schema.names)})")
    return pf, schema.field(column).type


def _parquet_batches(p: Path, pf, column: str, batch_rows: int):
    """(number of the batch's first row, the column's Arrow array) per batch of rows,
    one row group at a time (the unit of streaming).

    Within arrow_memory_kept, each row group is streamed (`parquet_pages.
    row_group_arrays`: plain string pages as they decompress, E62, else
    `ParquetFile.iter_batches`, its first batch after its first pages), and no single
    array of the whole row group is built (read_row_group grows one by copying;
    measured: docs/OPTIMIZATION_LOG.md, E49). Otherwise the row group is read whole
    (`read_row_group`) and cut into batches: that holds about one row group of Arrow
    memory (iter_batches held several times that, and its allocator kept the peak),
    given back to the OS after each row group."""
    import pyarrow as pa

    if not RELEASE_ARROW_MEMORY and PARQUET_READERS > 1 and pf.metadata.num_row_groups > 1:
        yield from _parquet_batches_parallel(p, column, batch_rows, pf.metadata,
                                             PARQUET_READERS)
        return
    pool = pa.default_memory_pool()
    row = 0
    for g in range(pf.metadata.num_row_groups):
        start = row
        try:
            if not RELEASE_ARROW_MEMORY:
                for array in row_group_arrays(p, pf, g, column, batch_rows):
                    yield row, array
                    row += len(array)
                continue
            table = pf.read_row_group(g, columns=[column], use_threads=False)
        except Exception as e:
            raise _unreadable(p, row, e) from None
        col = table.column(0)
        part = None
        del table
        for first in range(0, len(col), batch_rows):
            part = col.slice(first, batch_rows)
            yield start + first, part.combine_chunks() if part.num_chunks != 1 else part.chunk(0)
        row += len(col)
        del col, part
        pool.release_unused()


def _parquet_batches_parallel(p: Path, column: str, batch_rows: int, metadata, readers: int):
    """_parquet_batches with `readers` row groups read at once, each streamed on a
    thread of its own with its own ParquetFile, and handed on in order (so at most
    `readers` row groups of Arrow memory wait). A row group that fails raises, after
    the batches before the failing one, the InputError the serial reader raises."""
    local = threading.local()
    firsts = [0]
    for g in range(metadata.num_row_groups):
        firsts.append(firsts[-1] + metadata.row_group(g).num_rows)

    def read(g: int):
        """The batches of row group g as (first row, array); the error names its row."""
        row = firsts[g]
        try:
            pf = getattr(local, "pf", None)
            if pf is None:
                pf = local.pf = _parquet_file(p)
            for array in row_group_arrays(p, pf, g, column, batch_rows):
                yield row, array
                row += len(array)
        except Exception as e:
            raise _unreadable(p, row, e) from None

    yield from _in_order(read, metadata.num_row_groups, readers)


class _GroupEnd:
    """_in_order: the end of one read(g)'s items, with its error or None."""

    __slots__ = ("error",)

    def __init__(self, error: BaseException | None) -> None:
        self.error = error


def _in_order(read, n: int, readers: int):
    """The items of read(0) .. read(n - 1) (generators), each run on one of `readers`
    threads, at most `readers` of them at once, handed on in order. The one being
    handed on streams: its items come out as its thread makes them, so the first
    batch does not wait for a whole row group (100 MB of english, two readers: 0.15-0.2
    s before the first block, log T114); the later ones keep theirs until their turn.
    An error of read(g) is raised after the items before it."""
    from concurrent.futures import ThreadPoolExecutor

    stop = threading.Event()

    def run(g: int, q: queue.SimpleQueue) -> None:
        try:
            for item in read(g):
                if stop.is_set():       # the consumer is gone
                    return
                q.put(item)
        except BaseException as e:      # handed over, after the items before it
            q.put(_GroupEnd(e))
            return
        q.put(_GroupEnd(None))

    with ThreadPoolExecutor(readers, thread_name_prefix="asmbpe-parquet") as pool:
        queues: list = []

        def start(g: int) -> None:
            q: queue.SimpleQueue = queue.SimpleQueue()
            pool.submit(run, g, q)
            queues.append(q)

        for g in range(min(readers, n)):
            start(g)
        try:
            for g in range(n):
                q = queues.pop(0)
                while type(item := q.get()) is not _GroupEnd:
                    yield item
                    del item
                if g + readers < n:
                    start(g + readers)
                if item.error is not None:
                    raise item.error
        finally:
            stop.set()


def _parquet_text_columns(p: Path, batch_rows: int, column: str = "text"):
    """A string column of a Parquet file as binary Arrow arrays, batch by batch; after
    the last, a NullsSkipped warning when some of its values were null."""
    import pyarrow as pa

    pf, kind = _open_parquet(p, column)
    if pa.types.is_string(kind) or pa.types.is_binary(kind):
        as_bytes = pa.binary()
    elif pa.types.is_large_string(kind) or pa.types.is_large_binary(kind):
        as_bytes = pa.large_binary()
    else:
        raise InputError(f"{p}: column '{column}' holds {kind}, expected strings")
    nulls = 0
    for _, array in _parquet_batches(p, pf, column, batch_rows):
        nulls += array.null_count
        # string -> binary: the same buffers, as a view (a cast imports
        # pyarrow.compute: 0.03 s before the first block)
        yield array if array.type == as_bytes else array.view(as_bytes)
    _note_nulls(p, column, nulls)


def _note_nulls(p: Path, column: str, nulls: int) -> None:
    if nulls:
        warnings.warn(NullsSkipped(p, column, nulls), stacklevel=3)


def _iter_parquet(p: Path, batch_rows: int, column: str = "text"):
    for batch in _iter_parquet_text_batches(p, batch_rows, column):
        yield from batch


def _iter_parquet_text_batches(p: Path, batch_rows: int, column: str = "text"):
    """The column's documents as TextBatch blocks (one copy, no object per document),
    nulls skipped (a NullsSkipped warning after the last). Read by harness.parquet_pages
    (no pyarrow) where it can: each row group it stops on is finished by pyarrow,
    skipping the rows already given, and a file whose footer it cannot take is read by
    pyarrow whole (whose errors are then the ones raised)."""
    try:
        chunks = parquet_pages.text_chunks(p, column)
    except MemoryError:
        raise
    except Exception:                       # Unsupported, OSError: pyarrow names it
        chunks = None
    if chunks is None:
        for array in _parquet_text_columns(p, batch_rows, column):
            yield TextBatch.from_arrow(array)
        return
    fallback = _RowGroupFallback(p, column, batch_rows)
    fd = os.open(p, os.O_RDONLY)
    try:
        if PARQUET_READERS > 1 and not RELEASE_ARROW_MEMORY and len(chunks) > 1:
            yield from _native_parallel(fd, chunks, fallback, PARQUET_READERS)
        else:
            row = 0
            for g, chunk in enumerate(chunks):
                yield from _native_blocks(fd, g, chunk, row, fallback)
                row += chunk.rows
    finally:
        os.close(fd)
    _note_nulls(p, column, fallback.nulls)


class _RowGroupFallback:
    """pyarrow for the rest of a row group harness.parquet_pages stopped on."""

    def __init__(self, p: Path, column: str, batch_rows: int):
        self.p, self.column, self.batch_rows = p, column, batch_rows
        self.pf = None
        self.nulls = 0
        self.lock = threading.Lock()

    def blocks(self, g: int, row: int, done: int) -> list:
        """Row group g (its first row `row`) from its row `done` on, as TextBatch
        blocks; InputError (the row) where pyarrow cannot read it."""
        with self.lock:
            if self.pf is None:
                self.pf = _open_parquet(self.p, self.column)[0]
            pf = self.pf
        out, at = [], row + done
        try:
            for array in parquet_pages.pyarrow_rows(pf, g, self.column, self.batch_rows,
                                                    done):
                with self.lock:
                    self.nulls += array.null_count
                out.append(TextBatch.from_arrow(array))
                at += len(array)
        except Exception as e:
            raise _unreadable(self.p, at, e) from None
        return out


def _native_blocks(fd: int, g: int, chunk, row: int, fallback):
    """Row group g's TextBatch blocks, read by parquet_pages, the rest by pyarrow."""
    done = 0
    try:
        for data, ends in parquet_pages.chunk_blocks(fd, chunk):
            done += len(ends)
            yield TextBatch(data, ends)
        return
    except MemoryError:
        raise
    except Exception:                       # Unsupported, damage: pyarrow names it
        pass
    yield from fallback.blocks(g, row, done)


def _native_parallel(fd: int, chunks: list, fallback, readers: int):
    """The row groups' blocks, `readers` row groups read at once on threads (zstd
    decompresses without the GIL), handed on in order (_in_order: the first streams,
    at most `readers` row groups wait). An error comes out after the blocks before
    it."""
    firsts = [0]
    for c in chunks:
        firsts.append(firsts[-1] + c.rows)

    def read(g: int):
        return _native_blocks(fd, g, chunks[g], firsts[g], fallback)

    yield from _in_order(read, len(chunks), readers)


def _iter_batch_items(path, options: ReadOptions):
    """iter_batches' reader: TextBatch blocks for Parquet, documents otherwise."""
    p = check_file(path)
    fmt, compression = file_format(p)
    if fmt == "parquet" and not compression:
        return _iter_parquet_text_batches(p, PARQUET_BATCH_ROWS, options.column_name())
    return iter_documents(p, read_options=options)


def _json_value(p, lineno: int, line: bytes, field: str):
    """(the line's JSON object, its `field` or None); InputError for a line that is not
    JSON."""
    try:
        obj = json.loads(line)
    except ValueError as e:             # JSONDecodeError, UnicodeDecodeError
        raise InputError(f"{p}:{lineno}: not valid JSON: {_first_line(e)}") from None
    return obj, obj.get(field) if isinstance(obj, dict) else None


def _fields(obj) -> str:
    """` (fields: a, b)` for a JSON object, to name what a line has instead."""
    if not isinstance(obj, dict):
        return f" (the line holds a JSON {type(obj).__name__}, not an object)"
    return f" (fields: {', '.join(map(str, obj)) or 'none'})"


def _iter_jsonl(p: Path, compression: str | None, field: str = "text"):
    for lineno, line in _lines(p, compression):
        if not line.strip():
            continue
        obj, text = _json_value(p, lineno, line, field)
        if not isinstance(text, str):
            raise InputError(f"{p}:{lineno}: no string '{field}' field"
                             + ("" if isinstance(obj, dict) and field in obj else _fields(obj)))
        yield text.encode("utf-8", "surrogatepass")


def _iter_text(p: Path, compression: str | None, options: ReadOptions):
    if options.lines:
        for _, line in _lines(p, compression):
            doc = line.rstrip(b"\r\n")
            if doc:
                yield doc
        return
    if options.separator is None:
        with _open_binary(p, compression) as f:
            try:
                data = f.read()
            except Exception as e:
                raise _stream_error(p, compression, "", e) from None
        if data:
            yield data
        return
    sep = _as_bytes(options.separator)
    lines: list[bytes] = []
    for _, line in _lines(p, compression):
        if line.rstrip(b"\r\n") == sep:
            if lines:
                yield b"".join(lines)
                lines = []
        else:
            lines.append(line)
    if lines:
        yield b"".join(lines)


def iter_documents(path, *, separator=None, batch_rows: int = PARQUET_BATCH_ROWS,
                   read_options: ReadOptions | None = None):
    """The documents of one file (a path, or a StdinInput), as bytes, read as a stream
    (see the module doc for the formats). The file is checked at once (InputError when
    missing, unreadable, a directory, a device or empty); reading errors come while
    iterating. read_options (ReadOptions): the separator or lines of plain text, the
    Parquet column, the JSONL field; `separator` (str or bytes, no line break) is the
    older way to give a separator."""
    options = _read_options(read_options, separator)
    p = check_file(path)
    fmt, compression = file_format(p)
    if fmt == "parquet":
        if compression:
            raise InputError(f"{p}: a compressed Parquet file is not supported "
                             "(Parquet compresses its columns itself)")
        return _iter_parquet(p, batch_rows, options.column_name())
    if fmt == "jsonl":
        return _iter_jsonl(p, compression, options.field_name())
    return _iter_text(p, compression, options)


# ------------------------------------------------------------------------- chat input

def _messages(where: str, value, roles, name: str = "messages") -> list[dict]:
    """The `messages` value (field or column `name`) of one line or row, checked: a list
    of {"role", "content"} dicts with string values (and roles in `roles` unless it is
    None)."""
    if not isinstance(value, list):
        raise InputError(f"{where}: no '{name}' list")
    out = []
    for k, m in enumerate(value):
        if not isinstance(m, dict):
            raise InputError(f"{where}: message {k} is not an object with role and content")
        role, content = m.get("role"), m.get("content")
        if not isinstance(role, str):
            raise InputError(f"{where}: message {k} has no string 'role'")
        if not isinstance(content, str):
            raise InputError(f"{where}: message {k} has no string 'content'")
        if roles is not None and role not in roles:
            raise InputError(f"{where}: message {k} has unknown role {role!r} "
                             f"(expected one of {', '.join(roles)})")
        out.append({"role": role, "content": content})
    return out


def _iter_jsonl_conversations(p: Path, compression: str | None, roles,
                              field: str = "messages"):
    for lineno, line in _lines(p, compression):
        if not line.strip():
            continue
        obj, value = _json_value(p, lineno, line, field)
        if value is None and not (isinstance(obj, dict) and field in obj):
            raise InputError(f"{p}:{lineno}: no '{field}' list{_fields(obj)}")
        yield _messages(f"{p}:{lineno}", value, roles, field)


def _iter_parquet_conversations(p: Path, batch_rows: int, roles, column: str = "messages"):
    import pyarrow as pa

    pf, kind = _open_parquet(p, column)
    if not (pa.types.is_list(kind) or pa.types.is_large_list(kind)) or \
            not pa.types.is_struct(kind.value_type):
        raise InputError(f"{p}: column '{column}' holds {kind}, expected a list of "
                         "structs with role and content")
    nulls = 0
    for first, array in _parquet_batches(p, pf, column, batch_rows):
        nulls += array.null_count
        for k, value in enumerate(array.to_pylist()):
            if value is not None:
                yield _messages(f"{p}: row {first + k}", value, roles, column)
    _note_nulls(p, column, nulls)


def iter_conversations(path, *, roles=CHAT_ROLES, batch_rows: int = PARQUET_BATCH_ROWS,
                       read_options: ReadOptions | None = None):
    """The conversations of one JSONL (`messages` field) or Parquet (`messages` column)
    file (a path, or a StdinInput), read as a stream: each a list of {"role": str,
    "content": str}. A line or row that is not JSON, has no `messages` list, or holds a
    message without a string role and content, or with a role not in `roles` (None:
    any), raises InputError naming the file and the line (`FILE:LINE: ...`) or row
    (`FILE: row N: ...`). Blank lines and null rows (NullsSkipped) are skipped.
    read_options (ReadOptions): its column and field name another column or field
    than `messages`."""
    options = read_options or ReadOptions()
    p = check_file(path)
    fmt, compression = file_format(p)
    if fmt == "parquet":
        if compression:
            raise InputError(f"{p}: a compressed Parquet file is not supported "
                             "(Parquet compresses its columns itself)")
        return _iter_parquet_conversations(p, batch_rows, roles, options.column_name(True))
    if fmt == "jsonl":
        return _iter_jsonl_conversations(p, compression, roles, options.field_name(True))
    raise InputError(f"{p}: chat input must be JSONL (.jsonl, .ndjson) or Parquet with "
                     "'messages'")


def conversation_bytes(messages) -> int:
    """The UTF-8 bytes of a conversation's contents (its size as source text)."""
    return sum(len(m["content"].encode("utf-8", "surrogatepass")) for m in messages)


def _as_paths(paths) -> list:
    if isinstance(paths, (str, bytes, os.PathLike)):
        return [paths]
    return list(paths)


def iter_batches(paths, batch_bytes: int = BATCH_BYTES, *, separator=None,
                 limit_bytes: int | None = None, read_options: ReadOptions | None = None,
                 packed: bool = False):
    """The documents of every file in `paths` (one path or a list; a StdinInput among
    them), in order, as lists of bytes of about `batch_bytes` bytes each (a batch ends
    with the document that reaches batch_bytes; a longer document is a batch of its
    own). Every file is checked before the first batch; a file without any document
    raises InputError. With `limit_bytes`, whole documents are read until their total
    reaches it. read_options / separator: as for iter_documents.

    packed: the batches are buffers.PackedBatch instead, laid out as the library
    counts them, each Parquet document copied there straight from its decompressed
    page (training: no other copy of the text, T52)."""
    options = _read_options(read_options, separator)
    files = _checked(paths)
    if packed:
        return _packed_batches(files, max(1, int(batch_bytes)), options,
                               int(limit_bytes) if limit_bytes else None)
    return _batches(files, max(1, int(batch_bytes)),
                    lambda p: _iter_batch_items(p, options), len, "documents",
                    int(limit_bytes) if limit_bytes else None)


def iter_conversation_batches(paths, batch_bytes: int = BATCH_BYTES, *, roles=CHAT_ROLES,
                              limit_bytes: int | None = None,
                              read_options: ReadOptions | None = None):
    """iter_batches for chat input: lists of conversations (see iter_conversations)
    whose contents add up to about `batch_bytes` UTF-8 bytes."""
    files = _checked(paths)
    return _batches(files, max(1, int(batch_bytes)),
                    lambda p: iter_conversations(p, roles=roles, read_options=read_options),
                    conversation_bytes, "conversations",
                    int(limit_bytes) if limit_bytes else None)


def _checked(paths) -> list[Path]:
    files = [check_file(p) for p in _as_paths(paths)]
    if not files:
        raise InputError("no input files")
    return files


FIRST_BATCH_BYTES = 1 << 20


def _packed_batches(files, batch_bytes: int, options: ReadOptions, limit: int | None):
    """iter_batches(packed=True): PackedBatch batches, cut as _batches cuts them, the
    first of at most FIRST_BATCH_BYTES: counting waits for the first batch with
    nothing else to do, for the later ones it has the one before (T74)."""
    def target() -> int:
        want = batch_bytes if total else min(batch_bytes, FIRST_BATCH_BYTES)
        return want if limit is None else max(1, min(want, limit - total))

    total = 0                                   # bytes in the batches taken
    sink = PackedBuilder(target())

    def take():
        nonlocal total
        batch = sink.take()
        total += batch.nbytes
        sink.target = target()
        return batch

    for p in files:
        before = sink.added
        fmt, compression = file_format(p)
        if fmt == "parquet" and not compression:
            fill = _parquet_into(p, options.column_name(), sink)
        else:
            fill = _docs_into(iter_documents(p, read_options=options), sink)
        for _ in fill:                          # the sink is full
            yield take()
            if limit is not None and total >= limit:
                fill.close()
                return
        if sink.added == before:
            raise InputError(f"{p}: is empty (no documents)")
    if len(sink):
        yield take()


def _docs_into(docs, sink):
    """Documents (bytes, or TextBatch blocks) into sink; yields when it is full."""
    for item in docs:
        for doc in (item if isinstance(item, TextBatch) else (item,)):
            sink.add(doc)
            if sink.full:
                yield


def _parquet_into(p: Path, column: str, sink):
    """The column's documents into sink (see _iter_parquet_text_batches); yields each
    time it is full. Straight from the pages where harness.parquet_pages reads them
    (one reader), else through TextBatch blocks."""
    try:
        chunks = parquet_pages.text_chunks(p, column)
    except MemoryError:
        raise
    except Exception:
        chunks = None
    if chunks is None or (PARQUET_READERS > 1 and not RELEASE_ARROW_MEMORY
                          and len(chunks) > 1):
        yield from _docs_into(_iter_parquet_text_batches(p, PARQUET_BATCH_ROWS, column), sink)
        return
    fallback = _RowGroupFallback(p, column, PARQUET_BATCH_ROWS)
    fd = os.open(p, os.O_RDONLY)
    try:
        row = 0
        for g, chunk in enumerate(chunks):
            first = sink.added
            try:
                yield from parquet_pages.chunk_into(fd, chunk, sink)
            except MemoryError:
                raise
            except Exception:                   # Unsupported, damage: pyarrow names it
                yield from _docs_into(fallback.blocks(g, row, sink.added - first), sink)
            row += chunk.rows
    finally:
        os.close(fd)
    _note_nulls(p, column, fallback.nulls)


def _batches(files, batch_bytes, read, size_of, noun, limit):
    """Group items into batches of about batch_bytes (see iter_batches). Items are
    documents (size_of gives their size), or TextBatch blocks of documents (from
    Parquet), which are cut at the same documents and joined into TextBatch batches;
    the two kinds never share a batch."""
    batch: list = []
    size = total = 0
    blocks = TextBatchBuilder(batch_bytes, limit)
    for p in files:
        items = 0
        for item in read(p):
            if isinstance(item, TextBatch):
                if not len(item):
                    continue
                items += len(item)
                if batch:                       # documents before blocks: their own batch
                    yield batch
                    batch, size = [], 0
                for full in blocks.add(item):
                    yield full
                if blocks.done:
                    return
                continue
            if len(blocks):
                yield blocks.flush()
            items += 1
            n = size_of(item)
            batch.append(item)
            size += n
            total += n
            if limit is not None and total >= limit:
                yield batch
                return
            if size >= batch_bytes:
                yield batch
                batch, size = [], 0
        if not items:
            raise InputError(f"{p}: is empty (no {noun})")
        total = max(total, blocks.total)
        blocks.total = total
    if batch:
        yield batch
    if len(blocks):
        yield blocks.flush()


class TextBatchBuilder:
    """Joins TextBatch blocks into batches: a batch ends with the document that makes
    it reach batch_bytes, and with `limit`, reading ends with the document that makes
    the total reach it (as _batches does for single documents)."""

    def __init__(self, batch_bytes: int, limit: int | None):
        self.batch_bytes, self.limit = batch_bytes, limit
        self.parts: list = []
        self.size = self.total = 0
        self.done = False

    def __len__(self) -> int:
        return len(self.parts)

    def flush(self) -> TextBatch:
        out = TextBatch.concat(self.parts)
        self.parts, self.size = [], 0
        return out

    def add(self, block: TextBatch):
        while len(block) and not self.done:
            cum = block.ends.astype(np.int64)
            need = self.batch_bytes - self.size
            if self.limit is not None:
                need = min(need, self.limit - self.total)
            k = int(np.searchsorted(cum, need, side="left"))    # first doc reaching it
            if k >= len(block):                 # the whole block fits
                self.parts.append(block)
                self.size += block.nbytes
                self.total += block.nbytes
                return
            head, block = block.split(k + 1)
            self.parts.append(head)
            self.total += head.nbytes
            if self.limit is not None and self.total >= self.limit:
                self.done = True
            yield self.flush()


def read_documents(path, limit_bytes: int | None = None, *, separator=None,
                   read_options: ReadOptions | None = None) -> list[bytes]:
    """The documents of one file, as bytes. With `limit_bytes`, whole documents are read
    until their total reaches it (so the result may pass it by less than one document).
    read_options / separator: as for iter_documents."""
    limit = int(limit_bytes) if limit_bytes else None
    docs: list[bytes] = []
    total = 0
    it = iter_documents(path, separator=separator, read_options=read_options)
    for doc in it:
        docs.append(doc)
        total += len(doc)
        if limit is not None and total >= limit:
            break
    if not docs:
        raise InputError(f"{path}: is empty (no documents)")
    return docs


def _parquet_sizes(p: Path) -> list[dict[str, int]] | None:
    """Per row group, the uncompressed bytes of each top-level column (harness.
    parquet_pages reads the footer; pyarrow where it cannot); None when unreadable."""
    sizes = parquet_pages.column_sizes(p)
    if sizes is not None:
        return sizes
    try:
        _arrow()
        import pyarrow.parquet as pq

        md = pq.ParquetFile(p).metadata
    except Exception:
        return None
    out = []
    for r in range(md.num_row_groups):
        rg, group = md.row_group(r), {}
        for c in range(rg.num_columns):
            col = rg.column(c)
            name = col.path_in_schema.split(".")[0]
            group[name] = group.get(name, 0) + col.total_uncompressed_size
        out.append(group)
    return out


def _estimate_one(p: Path) -> int | None:
    fmt, compression = file_format(p)
    try:
        if fmt == "parquet":
            sizes = _parquet_sizes(p)
            return None if sizes is None else sum(g.get("text", 0) for g in sizes)
        size = p.stat().st_size
        if compression is None:
            return size
        with open(p, "rb") as f:
            if compression == "gzip":            # ISIZE: the last 4 bytes, mod 2**32
                f.seek(max(0, size - 4))
                tail = f.read(4)
                return struct.unpack("<I", tail)[0] if len(tail) == 4 else None
            import zstandard

            n = zstandard.frame_content_size(f.read(18))
            return n if n >= 0 else None
    except Exception:                           # an estimate only: reading will tell
        return None


def estimate_bytes(paths) -> int | None:
    """A guess of the text bytes in the files, before reading them (Parquet: the `text`
    column's uncompressed size; plain files: their size; .gz: the size in the gzip
    trailer; .zst: the frame's content size); None when some file cannot tell."""
    total = 0
    for path in _as_paths(paths):
        n = _estimate_one(Path(path))
        if n is None:
            return None
        total += n
    return total


# ------------------------------------------------------------------- memory budget

_UNITS = {"": 1, "B": 1, "K": 1 << 10, "KB": 1000, "KIB": 1 << 10, "M": 1 << 20,
          "MB": 10 ** 6, "MIB": 1 << 20, "G": 1 << 30, "GB": 10 ** 9, "GIB": 1 << 30,
          "T": 1 << 40, "TB": 10 ** 12, "TIB": 1 << 40}


def parse_size(text) -> int:
    """"512M", "2G", "1.5GiB", "100MB", "65536" -> bytes (K/M/G/T alone are binary
    units, KB/MB/GB decimal, KiB/MiB/GiB binary). ValueError when malformed."""
    import re

    m = re.fullmatch(r"\s*(\d+(?:\.\d*)?)\s*([A-Za-z]*)\s*", str(text))
    unit = m.group(2).upper() if m else None
    if not m or unit not in _UNITS:
        raise ValueError(f"bad size {text!r}: expected e.g. 512M, 2G, 100MB")
    return int(float(m.group(1)) * _UNITS[unit])


# What a `--memory` run holds, fitted to the peak RSS of `asmbpe encode` / `train
# --memory` on english.parquet (row groups up to 52.8 MB), multilingual.parquet and
# english in 4 MB row groups, at batches of 1..64 MB (README, "Out of memory"), with
# the interpreter and libraries (a run on a tiny file) left out:
# - per batch of B text bytes, as multiples of B: encoding holds the batch being read,
#   the one waiting and the one being encoded, its copy for the library and the ids
#   (2 or 4 bytes per input byte, and their gathered copy): measured 3.4-9 B with
#   2-byte ids (9.4 B once, on a loaded machine, where the reader ran ahead: hence
#   10), 10-13 B with 4-byte ids (cl100k); counting 2.8-5.6 B;
BUDGET_SHARES = {"encode": 10, "encode-u32": 14, "train": 6}
# - reading a Parquet row group of G bytes of text (read whole under --memory: the
#   compressed chunk, the decompressed column, its documents as batches): measured
#   3.1-3.6 G;
ROW_GROUP_FACTOR = 4
# - and, whatever the batch, the encoder threads' states and caches and the buffers
#   kept for reuse: 10-30 MB.
BUDGET_FIXED = 24 << 20
MIN_BATCH_BYTES = 1 << 20


def max_row_group_bytes(paths) -> int:
    """The largest row group (uncompressed `text` or `messages` column) of the Parquet
    files among `paths`; 0 when there is none."""
    biggest = 0
    for path in _as_paths(paths):
        p = Path(path)
        if file_format(p)[0] != "parquet":
            continue
        for sizes in _parquet_sizes(p) or ():   # (unreadable: reading will report it)
            biggest = max(biggest, sizes.get("text", 0) + sizes.get("messages", 0))
    return biggest


def budget_batch_bytes(budget: int, kind: str = "encode", paths=None, *,
                       id_bytes: int = 2) -> int:
    """The batch size (text bytes per library call) that keeps the data in flight of
    `kind` ("encode" or "train"; encoding to ids of `id_bytes` bytes, 2 or 4) within
    `budget` bytes, after setting aside BUDGET_FIXED and what reading the largest
    Parquet row group of `paths` takes. InputError when the row groups alone do not
    fit."""
    share = BUDGET_SHARES["encode-u32" if kind == "encode" and id_bytes > 2 else kind]
    reserve = ROW_GROUP_FACTOR * max_row_group_bytes(paths) if paths is not None else 0
    left = int(budget) - BUDGET_FIXED - reserve
    if left < share * MIN_BATCH_BYTES:
        need = -(-(BUDGET_FIXED + reserve + share * MIN_BATCH_BYTES) // 2**20)
        if not reserve:
            raise InputError(f"--memory {budget / 2**20:.0f}M is too small: give --memory "
                             f"{need}M or more")
        raise InputError(f"--memory {budget / 2**20:.0f}M is too small for these inputs: "
                         f"their largest Parquet row group holds "
                         f"{reserve / ROW_GROUP_FACTOR / 1e6:.1f} MB of text (reading it "
                         f"takes about {reserve / 2**20:.0f}M); give --memory "
                         f"{need}M or more, or rewrite the files with smaller "
                         "row groups (asmbpe data prepare --row-group-mb)")
    return max(MIN_BATCH_BYTES, left // share)


def check_streamable(paths, batch_bytes: int, separator=None) -> None:
    """InputError for a plain text file read as ONE document (no separator) that is
    larger than a batch: a document is never cut (that would change its tokens), so
    such a file cannot stream; the message says to give a separator."""
    if separator is not None:
        return
    for path in _as_paths(paths):
        p = Path(path)
        if file_format(p)[0] != "text":
            continue
        n = _estimate_one(p)
        if n is not None and n > batch_bytes:
            raise InputError(f"{p}: a plain text file without --separator is one document "
                             f"of {n / 1e6:.1f} MB, larger than a batch of the --memory "
                             f"budget ({batch_bytes / 1e6:.1f} MB); a document is never "
                             "cut, so give --separator (e.g. '' for blank lines) or more "
                             "--memory")


def prefetch(batches, depth: int = 1, meanwhile=None):
    """Yield the items of `batches`, produced up to `depth` ahead on a reader thread, so
    that reading the next batch (Python, pyarrow, decompression) overlaps the work on
    this one (counting, encoding: the library calls release the GIL). A depth of a few
    lets the reader start on the next Parquet row group while the blocks of this one
    are still being worked on. Exceptions of the reader come out here. meanwhile: a
    function called once the reader has started, before the first item is awaited
    (work that overlaps the first read)."""
    q: queue.Queue = queue.Queue(maxsize=max(1, int(depth)))
    stop = threading.Event()
    done = object()

    def put(item) -> bool:
        while not stop.is_set():
            try:
                q.put(item, timeout=0.1)
                return True
            except queue.Full:
                continue
        return False

    def reader():
        try:
            for item in batches:
                if not put(("item", item)):
                    return
            put(("end", done))
        except BaseException as e:          # handed over to the consumer
            put(("error", out_of_memory(e, "reading the input") or e))

    t = threading.Thread(target=reader, name="asmbpe-reader", daemon=True)
    with memory_phase("reading the input"):     # no room for the thread's stack
        t.start()
    try:
        if meanwhile is not None:
            meanwhile()
        while True:
            kind, item = q.get()
            if kind == "item":
                yield item
            elif kind == "error":
                raise item
            else:
                return
    finally:
        stop.set()
        t.join()
