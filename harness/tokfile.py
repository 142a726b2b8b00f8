"""`.tok` files (SPEC §7): the one place that knows their format.

All integers little-endian; a 64-byte header, then one u16 per token:

    0   8 bytes  magic "ASMBPTOK"
    8   u16      format version (1)
    10  u16      flags (bit 0: chat file, MASKBIT in use)
    12  u32      reserved (0)
    16  u64      merges hash of the tokenizer that wrote it
    24  u64      number of tokens
    32  u64      number of documents
    40  u64      number of source text bytes
    48  16 bytes reserved (0)

Every document starts with `<|bos|>` (SPEC §5), so the documents are the runs of tokens
that start at each `<|bos|>`. In a chat file (flag bit 0) the tokens the model should
learn to produce carry MASKBIT = 0x8000; `<|bos|>` never does.

Writing: `TokWriter` (a context manager) streams blocks of tokens into a temporary file
next to the target (`.NAME.tmp-PID`), counts tokens, documents and source bytes, and on
success writes the final header, fsyncs and renames it to the target; on any exception
it deletes the temporary file, so a partial `.tok` is never left behind.

Reading: `read_tok(path, tokenizer=None)` checks the header and the length and maps the
tokens (numpy memmap, read-only). Every problem raises a `TokFileError` naming the file,
the problem and its byte offset: bad magic, unknown version, unknown flags, non-zero
reserved fields, a token count that disagrees with the file length (an odd length too),
more documents than tokens, and, with a tokenizer, a merges hash that is not the
tokenizer's (or a chat file for a vocabulary above 32768, where MASKBIT cannot work).

Encoding input files into `.tok` files and decoding them back to text are
harness.pipeline's.
"""
from __future__ import annotations

import os
import struct
from pathlib import Path

import numpy as np

from .errors import AsmbpeError
from .tokenizer import MASKBIT   # MASKBIT: set on the tokens to learn (SPEC §5)

__all__ = ["MAGIC", "VERSION", "HEADER_SIZE", "FLAG_CHAT", "MASKBIT", "CHAT_MAX_VOCAB",
           "TokFileError", "TokWriter", "TokFile", "read_tok", "is_tok_file"]

MAGIC = b"ASMBPTOK"
VERSION = 1
HEADER_SIZE = 64
FLAG_CHAT = 1               # flags bit 0: a chat file, MASKBIT in use
KNOWN_FLAGS = FLAG_CHAT
CHAT_MAX_VOCAB = MASKBIT    # chat ids must leave bit 15 free
WRITEBACK_BYTES = 16 << 20  # TokWriter starts writing back to disk every this many bytes

# magic, version, flags, reserved u32, hash, tokens, documents, source bytes, reserved
_HEADER = struct.Struct("<8sHHIQQQQ16s")
assert _HEADER.size == HEADER_SIZE
OFF_MAGIC, OFF_VERSION, OFF_FLAGS, OFF_RESERVED1, OFF_HASH = 0, 8, 10, 12, 16
OFF_TOKENS, OFF_DOCUMENTS, OFF_BYTES, OFF_RESERVED2 = 24, 32, 40, 48


class TokFileError(AsmbpeError, ValueError):
    """A `.tok` file that cannot be used. The message names the file, the problem and
    the byte offset; `.path`, `.offset` and `.problem` hold them too."""

    def __init__(self, path, offset: int, problem: str):
        self.path = str(path)
        self.offset = offset
        self.problem = problem
        super().__init__(f"{self.path}: {problem} (at offset {offset})")


def _pack_header(flags: int, merges_hash: int, tokens: int, documents: int,
                 source_bytes: int) -> bytes:
    return _HEADER.pack(MAGIC, VERSION, flags, 0, merges_hash, tokens, documents,
                        source_bytes, bytes(16))


# ------------------------------------------------------------------------------ writing

class TokWriter:
    """Stream tokens into a `.tok` file, atomically:

        with TokWriter(path, tokenizer.merges_hash, chat=False) as w:
            for block in ...:
                w.write(tokens_uint16, documents=n, source_bytes=b)

    Nothing exists at `path` until the `with` block ends without an exception; then
    the complete file replaces whatever was there. On an exception the temporary file
    is removed and the exception propagates. Counters: `.tokens`, `.documents`,
    `.source_bytes`."""

    def __init__(self, path, merges_hash: int, *, chat: bool = False):
        self.path = Path(path)
        self.flags = FLAG_CHAT if chat else 0
        self.merges_hash = int(merges_hash)
        self.tmp = self.path.with_name(f".{self.path.name}.tmp-{os.getpid()}")
        self.tokens = self.documents = self.source_bytes = 0
        self._f = None
        self._flushed = HEADER_SIZE             # bytes handed to writeback so far

    def __enter__(self) -> "TokWriter":
        self._f = open(self.tmp, "wb")
        try:
            self._f.write(bytes(HEADER_SIZE))     # the real header comes at the end
        except BaseException:
            self._discard()
            raise
        return self

    def write(self, tokens, documents: int = 0, source_bytes: int = 0) -> None:
        """Append `tokens` (anything numpy turns into ids 0..65535) and add `documents`
        and `source_bytes` to the counts."""
        if self._f is None:
            raise RuntimeError("TokWriter.write outside its with block")
        arr = np.asarray(tokens)
        if arr.dtype != np.dtype("<u2"):
            if arr.size and (arr.min() < 0 or arr.max() > 0xFFFF):
                raise ValueError("token ids must be 0..65535")
            arr = arr.astype("<u2")
        self._f.write(np.ascontiguousarray(arr).data)
        self.tokens += arr.size
        self._start_writeback()
        self.documents += int(documents)
        self.source_bytes += int(source_bytes)

    def __exit__(self, exc_type, exc, tb) -> bool:
        if exc_type is not None:
            self._discard()
            return False
        try:
            self._f.seek(0)
            self._f.write(_pack_header(self.flags, self.merges_hash, self.tokens,
                                       self.documents, self.source_bytes))
            self._f.flush()
            os.fsync(self._f.fileno())
            self._f.close()
            self._f = None
            os.replace(self.tmp, self.path)
        except BaseException:
            self._discard()
            raise
        return False

    def _start_writeback(self) -> None:
        """Every WRITEBACK_BYTES, hand what was written to the disk without waiting
        (POSIX_FADV_DONTNEED starts the writeback of dirty pages on Linux), so that the
        final fsync waits for the last part only (measured: OPTIMIZATION_LOG.md, E50)."""
        end = HEADER_SIZE + 2 * self.tokens
        if end - self._flushed < WRITEBACK_BYTES or not hasattr(os, "posix_fadvise"):
            return
        self._f.flush()
        try:
            os.posix_fadvise(self._f.fileno(), self._flushed, end - self._flushed,
                             os.POSIX_FADV_DONTNEED)
        except OSError:                     # a hint: a file system may not take it
            pass
        self._flushed = end

    def _discard(self) -> None:
        if self._f is not None:
            self._f.close()
            self._f = None
        try:
            os.unlink(self.tmp)
        except OSError:
            pass


# ------------------------------------------------------------------------------ reading

class TokFile:
    """A checked `.tok` file: the header fields as attributes and the tokens as a
    read-only numpy array (uint16, memory-mapped)."""

    def __init__(self, path, version: int, flags: int, merges_hash: int, n_tokens: int,
                 n_documents: int, source_bytes: int, tokens: np.ndarray, tokenizer=None):
        self.path = Path(path)
        self.version = version
        self.flags = flags
        self.merges_hash = merges_hash
        self.n_tokens = n_tokens
        self.n_documents = n_documents
        self.source_bytes = source_bytes
        self.tokens = tokens
        self.tokenizer = tokenizer

    @property
    def chat(self) -> bool:
        """Flag bit 0: a chat file, MASKBIT set on the tokens to learn."""
        return bool(self.flags & FLAG_CHAT)

    def ids(self, start: int = 0, stop: int | None = None) -> np.ndarray:
        """tokens[start:stop] with MASKBIT cleared (a copy in chat files; a view else)."""
        part = self.tokens[start:stop]
        return part & np.uint16(~MASKBIT & 0xFFFF) if self.chat else part

    def blocks(self, block_tokens: int = 1 << 20):
        """The tokens in consecutive read-only slices of at most block_tokens."""
        for start in range(0, self.n_tokens, block_tokens):
            yield self.tokens[start:start + block_tokens]

    def documents(self):
        """Each document's tokens (a view, MASKBIT kept), in file order: the runs that
        start at each `<|bos|>` (tokens before the first one, if any, come first).
        Needs the tokenizer (to know the `<|bos|>` id)."""
        if self.tokenizer is None:
            raise ValueError("TokFile.documents needs the tokenizer "
                             "(read_tok(path, tokenizer)) to find <|bos|>")
        bos = self.tokenizer.special_id("<|bos|>")
        starts = np.flatnonzero(self.tokens == bos)
        if self.n_tokens and (not starts.size or starts[0] != 0):
            starts = np.concatenate([[0], starts])
        ends = np.append(starts[1:], self.n_tokens)
        for a, b in zip(starts.tolist(), ends.tolist()):
            yield self.tokens[a:b]

    def __repr__(self):
        return (f"TokFile({str(self.path)!r}, tokens={self.n_tokens}, "
                f"documents={self.n_documents}, source_bytes={self.source_bytes}, "
                f"chat={self.chat}, merges_hash=0x{self.merges_hash:016x})")


def is_tok_file(path) -> bool:
    """Whether the file is meant as a `.tok` file: its name ends in .tok, or it starts
    with the magic (read_tok will tell whether it is a good one)."""
    if Path(path).suffix.lower() == ".tok":
        return True
    try:
        with open(path, "rb") as f:
            return f.read(len(MAGIC)) == MAGIC
    except OSError:
        return False


def read_tok(path, tokenizer=None) -> TokFile:
    """Check the header of the `.tok` file at `path` against its length (and, when given,
    against `tokenizer`) and map its tokens. TokFileError for every bad file."""
    name = os.fspath(path)
    with open(path, "rb") as f:
        file_len = os.fstat(f.fileno()).st_size
        header = f.read(HEADER_SIZE)

    def fail(offset: int, problem: str):
        raise TokFileError(name, offset, problem)

    if header[:len(MAGIC)] != MAGIC:
        fail(OFF_MAGIC, f"bad magic {header[:len(MAGIC)]!r}, expected {MAGIC!r} "
                        "(not a .tok file)")
    if len(header) < HEADER_SIZE:
        fail(len(header), f"file too short: {file_len} bytes, the header alone is "
                          f"{HEADER_SIZE}")
    (_, version, flags, reserved1, merges_hash, n_tokens, n_documents, source_bytes,
     reserved2) = _HEADER.unpack(header)
    if version != VERSION:
        fail(OFF_VERSION, f"unknown format version {version}, expected {VERSION}")
    if flags & ~KNOWN_FLAGS:
        fail(OFF_FLAGS, f"unknown flags 0x{flags:04x} (only bit 0, chat, is defined)")
    if reserved1:
        fail(OFF_RESERVED1, f"reserved field is 0x{reserved1:08x}, must be 0")
    if any(reserved2):
        at = OFF_RESERVED2 + next(i for i, b in enumerate(reserved2) if b)
        fail(at, "reserved bytes 48..63 must be 0")
    data_len = file_len - HEADER_SIZE
    if data_len % 2:
        fail(file_len - 1, f"token data is {data_len} bytes, an odd length (tokens are "
                           "2 bytes each; truncated or appended to?)")
    if data_len != 2 * n_tokens:
        fail(OFF_TOKENS, f"token count {n_tokens} needs {HEADER_SIZE + 2 * n_tokens} "
                         f"bytes, the file is {file_len} bytes")
    if n_documents > n_tokens:
        fail(OFF_DOCUMENTS, f"{n_documents} documents but only {n_tokens} tokens "
                            "(every document starts with <|bos|>)")
    if tokenizer is not None:
        if merges_hash != tokenizer.merges_hash:
            fail(OFF_HASH, f"written by a different tokenizer: hash 0x{merges_hash:016x}, "
                           f"this tokenizer's is 0x{tokenizer.merges_hash:016x}")
        if flags & FLAG_CHAT and tokenizer.vocab_size > CHAT_MAX_VOCAB:
            fail(OFF_FLAGS, f"a chat file needs vocab_size <= {CHAT_MAX_VOCAB}, the "
                            f"tokenizer has {tokenizer.vocab_size}")
    if n_tokens:
        tokens = np.memmap(name, dtype="<u2", mode="r", offset=HEADER_SIZE,
                           shape=(n_tokens,))
    else:                                   # mmap cannot map zero bytes
        tokens = np.zeros(0, dtype="<u2")
        tokens.flags.writeable = False
    return TokFile(name, version, flags, merges_hash, n_tokens, n_documents,
                   source_bytes, tokens, tokenizer)
