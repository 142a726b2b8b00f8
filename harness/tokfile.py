"""`.tok` files (SPEC §7, §11): the one place that knows their format (docs/FORMATS.md
spells out both versions byte by byte).

All integers little-endian. Version 1 (asmbpe's own tokenizers, documents start at
`<|bos|>`): a 64-byte header, then one u16 per token:

    0   8 bytes  magic "ASMBPTOK"
    8   u16      format version (1)
    10  u16      flags (bit 0: chat file, MASKBIT in use)
    12  u32      reserved (0)
    16  u64      merges hash of the tokenizer that wrote it
    24  u64      number of tokens
    32  u64      number of documents
    40  u64      number of source text bytes
    48  16 bytes reserved (0)

Version 2 (loaded vocabularies, u32 ids, or documents not delimited by `<|bos|>`):

    0   8 bytes  magic "ASMBPTOK"
    8   u16      format version (2)
    10  u16      flags (bit 0: chat file, MASKBIT in use; only with width 2)
    12  u16      token width in bytes: 2 (u16 ids) or 4 (u32 ids)
    14  u16      reserved (0)
    16  u64      identity hash of the tokenizer that wrote it (Tokenizer.merges_hash)
    24  u64      number of tokens
    32  u64      number of documents
    40  u64      number of source text bytes
    48  16 bytes reserved (0)
    64  width x n_tokens     the tokens
        0..7 zero bytes      padding, so that the index starts at a multiple of 8
        u64 x n_documents    the document index: the token offset where each document
                             starts; the first is 0, each is >= the one before (an
                             empty document starts where the next one does) and
                             <= n_tokens; document k is tokens[index[k]:index[k+1]],
                             the last one ends at n_tokens

In version 1 every document starts with `<|bos|>` (SPEC §5), so the documents are the
runs of tokens that start at each `<|bos|>`; in version 2 the index says where they
start, whatever tokens (if any) delimit them. In a chat file (flag bit 0) the tokens the model should
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
Version 2 adds: a width other than 2 or 4, a non-zero reserved u16, chat with width 4,
a length that is not header + tokens + padding + index (a truncated index, trailing
bytes), non-zero padding, an index that does not start at 0, decreases, or points past
the tokens. `TokFile.documents()` yields the documents of both versions.

Encoding input files into `.tok` files and decoding them back to text are
harness.pipeline's.
"""
from __future__ import annotations

import os
import struct
from collections.abc import Iterator
from pathlib import Path

import numpy as np

from .errors import AsmbpeError
from .tokenizer import MASKBIT   # MASKBIT: set on the tokens to learn (SPEC §5)
from .tokenizer import PathArg, Tokenizer

__all__ = ["MAGIC", "VERSION", "VERSION_INDEXED", "HEADER_SIZE", "WIDTHS", "FLAG_CHAT", "MASKBIT", "CHAT_MAX_VOCAB",
           "TokFileError", "TokWriter", "TokFile", "read_tok", "is_tok_file"]

MAGIC = b"ASMBPTOK"
VERSION = 1
VERSION_INDEXED = 2         # token width in the header, a document index at the end
WIDTHS = (2, 4)
HEADER_SIZE = 64
FLAG_CHAT = 1               # flags bit 0: a chat file, MASKBIT in use
KNOWN_FLAGS = FLAG_CHAT
CHAT_MAX_VOCAB = MASKBIT    # chat ids must leave bit 15 free
WRITEBACK_BYTES = 16 << 20  # TokWriter starts writing back to disk every this many bytes

# magic, version, flags, reserved u32, hash, tokens, documents, source bytes, reserved
_HEADER = struct.Struct("<8sHHIQQQQ16s")
assert _HEADER.size == HEADER_SIZE
# version 2: the u32 at 12 is the width (u16) and a reserved u16
_HEADER2 = struct.Struct("<8sHHHHQQQQ16s")
assert _HEADER2.size == HEADER_SIZE
OFF_MAGIC, OFF_VERSION, OFF_FLAGS, OFF_RESERVED1, OFF_HASH = 0, 8, 10, 12, 16
OFF_WIDTH, OFF_RESERVED_W = 12, 14
OFF_TOKENS, OFF_DOCUMENTS, OFF_BYTES, OFF_RESERVED2 = 24, 32, 40, 48


class TokFileError(AsmbpeError, ValueError):
    """A `.tok` file that cannot be used. The message names the file, the problem and
    the byte offset; `.path`, `.offset` and `.problem` hold them too."""

    def __init__(self, path: PathArg, offset: int, problem: str) -> None:
        self.path = str(path)
        self.offset = offset
        self.problem = problem
        super().__init__(f"{self.path}: {problem} (at offset {offset})")


def _pack_header(flags: int, merges_hash: int, tokens: int, documents: int,
                 source_bytes: int, version: int = VERSION, width: int = 2) -> bytes:
    if version == VERSION_INDEXED:
        return _HEADER2.pack(MAGIC, version, flags, width, 0, merges_hash, tokens,
                             documents, source_bytes, bytes(16))
    return _HEADER.pack(MAGIC, VERSION, flags, 0, merges_hash, tokens, documents,
                        source_bytes, bytes(16))


def _padding(width: int, n_tokens: int) -> int:
    """Zero bytes between the tokens and a version-2 index (to a multiple of 8)."""
    return -(width * n_tokens) % 8


# ------------------------------------------------------------------------------ writing

class TokWriter:
    """Stream tokens into a `.tok` file, atomically:

        with TokWriter(path, tokenizer.merges_hash, chat=False) as w:
            for block in ...:
                w.write(tokens_uint16, documents=n, source_bytes=b)

    Nothing exists at `path` until the `with` block ends without an exception; then
    the complete file replaces whatever was there. On an exception the temporary file
    is removed and the exception propagates. Counters: `.tokens`, `.documents`,
    `.source_bytes`.

    version=2 writes the indexed format with `width` (2 or 4) bytes per token; each
    `write` then also takes `counts`, the token count of each of its documents (their
    starts go into the index, which follows the tokens when the file is complete)."""

    def __init__(self, path, merges_hash: int, *, chat: bool = False, version: int = VERSION,
                 width: int = 2):
        if version not in (VERSION, VERSION_INDEXED):
            raise ValueError(f"version must be {VERSION} or {VERSION_INDEXED}, got {version}")
        if width not in WIDTHS or (version == VERSION and width != 2):
            raise ValueError(f"width must be 2 or 4 (2 in version 1), got {width}")
        if chat and width != 2:
            raise ValueError("a chat file needs 2-byte tokens (MASKBIT is bit 15)")
        self.version = version
        self.width = width
        self._dtype = np.dtype("<u2" if width == 2 else "<u4")
        self._index: list[np.ndarray] = []
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

    def write(self, tokens, documents: int = 0, source_bytes: int = 0, counts=None) -> None:
        """Append `tokens` (anything numpy turns into ids that fit the width: 0..65535,
        or 0..2**32-1) and add `documents` and `source_bytes` to the counts. Version 2:
        `counts`, the token count of each of the `documents` (required)."""
        if self._f is None:
            raise RuntimeError("TokWriter.write outside its with block")
        if self.version == VERSION_INDEXED:
            if counts is None or len(counts) != int(documents):
                raise ValueError(f"a version-2 .tok needs the token count of each document: "
                                 f"{int(documents)} documents, counts "
                                 f"{None if counts is None else len(counts)}")
            c = np.asarray(counts, dtype=np.int64)
            if c.sum() != np.asarray(tokens).size:
                raise ValueError(f"the documents' counts add up to {int(c.sum())}, the "
                                 f"block has {np.asarray(tokens).size} tokens")
            starts = self.tokens + np.concatenate(([0], np.cumsum(c)[:-1])) if len(c) else c
            self._index.append(np.asarray(starts, dtype="<u8"))
        arr = np.asarray(tokens)
        if arr.dtype != self._dtype:
            top = 0xFFFF if self.width == 2 else 0xFFFFFFFF
            if arr.size and (arr.min() < 0 or arr.max() > top):
                raise ValueError(f"token ids must be 0..{top}")
            arr = arr.astype(self._dtype)
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
            if self.version == VERSION_INDEXED:
                self._f.write(bytes(_padding(self.width, self.tokens)))
                for part in self._index:
                    self._f.write(part.data)
            self._f.seek(0)
            self._f.write(_pack_header(self.flags, self.merges_hash, self.tokens,
                                       self.documents, self.source_bytes, self.version,
                                       self.width))
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
        end = HEADER_SIZE + self.width * self.tokens
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
                 n_documents: int, source_bytes: int, tokens: np.ndarray, tokenizer=None,
                 index: np.ndarray | None = None):
        self.path = Path(path)
        self.version = version
        self.flags = flags
        self.merges_hash = merges_hash
        self.n_tokens = n_tokens
        self.n_documents = n_documents
        self.source_bytes = source_bytes
        self.tokens = tokens
        self.tokenizer = tokenizer
        self.index = index          # version 2: each document's first token (u64)

    @property
    def width(self) -> int:
        """Bytes per token: 2 (u16 ids) or 4 (u32, version 2)."""
        return self.tokens.dtype.itemsize

    @property
    def chat(self) -> bool:
        """Flag bit 0: a chat file, MASKBIT set on the tokens to learn."""
        return bool(self.flags & FLAG_CHAT)

    def ids(self, start: int = 0, stop: int | None = None) -> np.ndarray:
        """tokens[start:stop] with MASKBIT cleared (a copy in chat files; a view else)."""
        part = self.tokens[start:stop]
        return part & part.dtype.type(~MASKBIT & 0xFFFF) if self.chat else part

    def blocks(self, block_tokens: int = 1 << 20) -> Iterator[np.ndarray]:
        """The tokens in consecutive read-only slices of at most block_tokens."""
        for start in range(0, self.n_tokens, block_tokens):
            yield self.tokens[start:start + block_tokens]

    def document_bounds(self) -> np.ndarray:
        """Version 2: the n_documents + 1 token offsets that bound the documents (the
        index, then n_tokens)."""
        if self.index is None:
            raise ValueError("document_bounds: a version-1 file has no document index "
                             "(documents() finds them at <|bos|>)")
        return np.append(np.asarray(self.index, dtype=np.int64), self.n_tokens)

    def documents(self) -> Iterator[np.ndarray]:
        """Each document's tokens (a view, MASKBIT kept), in file order. Version 2: as
        the document index says. Version 1: the runs that start at each `<|bos|>`
        (tokens before the first one, if any, come first); needs the tokenizer (to
        know the `<|bos|>` id)."""
        if self.index is not None:
            bounds = self.document_bounds().tolist()
            for a, b in zip(bounds, bounds[1:]):
                yield self.tokens[a:b]
            return
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
        return (f"TokFile({str(self.path)!r}, version={self.version}, width={self.width}, "
                f"tokens={self.n_tokens}, "
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


def read_tok(path: PathArg, tokenizer: Tokenizer | None = None) -> TokFile:
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
    if version == VERSION_INDEXED:
        return _read_v2(name, header, file_len, tokenizer, fail)
    if version != VERSION:
        fail(OFF_VERSION, f"unknown format version {version}, expected {VERSION} or "
                          f"{VERSION_INDEXED}")
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


def _check_tokenizer(tokenizer, flags: int, merges_hash: int, fail) -> None:
    if merges_hash != tokenizer.merges_hash:
        fail(OFF_HASH, f"written by a different tokenizer: hash 0x{merges_hash:016x}, "
                       f"this tokenizer's is 0x{tokenizer.merges_hash:016x}")
    if flags & FLAG_CHAT and tokenizer.vocab_size > CHAT_MAX_VOCAB:
        fail(OFF_FLAGS, f"a chat file needs vocab_size <= {CHAT_MAX_VOCAB}, the "
                        f"tokenizer has {tokenizer.vocab_size}")


def _read_v2(name: str, header: bytes, file_len: int, tokenizer, fail) -> TokFile:
    """read_tok for a version-2 file (module doc)."""
    (_, version, flags, width, reserved_w, merges_hash, n_tokens, n_documents,
     source_bytes, reserved2) = _HEADER2.unpack(header)
    if flags & ~KNOWN_FLAGS:
        fail(OFF_FLAGS, f"unknown flags 0x{flags:04x} (only bit 0, chat, is defined)")
    if width not in WIDTHS:
        fail(OFF_WIDTH, f"token width {width}, expected 2 or 4")
    if reserved_w:
        fail(OFF_RESERVED_W, f"reserved field is 0x{reserved_w:04x}, must be 0")
    if any(reserved2):
        at = OFF_RESERVED2 + next(i for i, b in enumerate(reserved2) if b)
        fail(at, "reserved bytes 48..63 must be 0")
    if flags & FLAG_CHAT and width != 2:
        fail(OFF_FLAGS, f"a chat file needs token width 2 (MASKBIT is bit 15), the "
                        f"width is {width}")
    if n_documents > n_tokens and flags & FLAG_CHAT:
        fail(OFF_DOCUMENTS, f"{n_documents} conversations but only {n_tokens} tokens "
                            "(every conversation starts with <|bos|>)")
    tokens_end = HEADER_SIZE + width * n_tokens
    index_at = tokens_end + _padding(width, n_tokens)
    expected = index_at + 8 * n_documents
    if file_len < tokens_end:
        fail(OFF_TOKENS, f"token count {n_tokens} needs {tokens_end} bytes of header "
                         f"and tokens, the file is {file_len} bytes")
    if file_len < expected:
        fail(file_len, f"truncated document index: {n_documents} documents (offset "
                       f"{OFF_DOCUMENTS}) need an index of {8 * n_documents} bytes at "
                       f"offset {index_at}, the file ends at {file_len}")
    if file_len > expected:
        fail(expected, f"trailing bytes: the file is {file_len} bytes, header, tokens, "
                       f"padding and index make {expected}")
    with open(name, "rb") as f:
        f.seek(tokens_end)
        tail = f.read(expected - tokens_end)
    pad = tail[:index_at - tokens_end]
    if any(pad):
        fail(tokens_end + next(i for i, b in enumerate(pad) if b),
             "padding before the document index must be 0")
    index = np.frombuffer(tail, dtype="<u8", offset=index_at - tokens_end)
    if n_documents:
        if index[0] != 0:
            fail(index_at, f"document index starts at token {int(index[0])}, must be 0")
        down = np.flatnonzero(index[1:] < index[:-1])
        if down.size:
            k = int(down[0]) + 1
            fail(index_at + 8 * k, f"document index not increasing: document {k} starts at "
                                   f"token {int(index[k])}, before document {k - 1} "
                                   f"({int(index[k - 1])})")
        past = np.flatnonzero(index > n_tokens)
        if past.size:
            k = int(past[0])
            fail(index_at + 8 * k, f"document index past the tokens: document {k} starts "
                                   f"at token {int(index[k])}, there are {n_tokens}")
    if tokenizer is not None:
        _check_tokenizer(tokenizer, flags, merges_hash, fail)
    dtype = "<u2" if width == 2 else "<u4"
    if n_tokens:
        tokens = np.memmap(name, dtype=dtype, mode="r", offset=HEADER_SIZE,
                           shape=(n_tokens,))
    else:
        tokens = np.zeros(0, dtype=dtype)
        tokens.flags.writeable = False
    return TokFile(name, version, flags, merges_hash, n_tokens, n_documents, source_bytes,
                   tokens, tokenizer, index=index)
