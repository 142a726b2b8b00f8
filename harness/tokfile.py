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
    10  u16      flags (bit 0: chat file, MASKBIT in use; only with width 2;
                 bit 1: FLAG_CHECKSUM, the CRC-32 at 48 is set)
    12  u16      token width in bytes: 2 (u16 ids) or 4 (u32 ids)
    14  u16      reserved (0)
    16  u64      identity hash of the tokenizer that wrote it (Tokenizer.merges_hash)
    24  u64      number of tokens
    32  u64      number of documents
    40  u64      number of source text bytes
    48  u32      with FLAG_CHECKSUM: CRC-32 (zlib.crc32) of every byte after the header
                 (tokens, padding, index); without (files written before it): 0
    52  12 bytes reserved (0)
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
next to the target (harness.files.AtomicFile: an unnamed O_TMPFILE file where the file
system allows, else `.NAME.tmp-PID`), counts tokens, documents and source bytes, and on
success writes the final header, fsyncs and renames it to the target; on any exception
it deletes the temporary file, so a partial `.tok` is never left behind.

Reading: `read_tok(path, tokenizer=None)` checks the header and the length and maps the
tokens (numpy memmap, read-only), reading nothing else of them but the first. Every
problem raises a `TokFileError` naming the file, the problem and its byte offset: bad
magic, unknown version, unknown flags, non-zero reserved fields, a token count that
disagrees with the file length (an odd length too), more documents than tokens, no
documents for some tokens, source bytes without tokens or fewer than the text tokens
need (each spells at least a byte; a plain document holds at most one special; chat:
none without a token besides the <|bos|>), and, with a tokenizer, a merges hash that is
not the tokenizer's, a chat file for a vocabulary above 32768 (where MASKBIT cannot
work), or a first token that is not its `<|bos|>` (version 1, chat). Version 2 adds: a
width other than 2 or 4, a non-zero reserved u16, chat with width 4, a length that is
not header + tokens + padding + index (a truncated index, trailing bytes), non-zero
padding, an index that does not start at 0, decreases, or points past the tokens.

What needs every token is checked when first needed, in one pass (about 0.05 s per
100M tokens in the page cache, 0.13 s from disk, for the <|bos|> scan; 0.5 s with a
tokenizer's id counts): version 1's document count against its `<|bos|>` tokens on the
first use of the documents (`len(tf)`, `tf[k]`, iteration, `documents()`);
`TokFile.check_counts()` (`asmbpe stats`) also a chat file's conversations against
its `<|bos|>` tokens and, with the tokenizer, every id against the vocabulary and the
source bytes against the bytes the text tokens spell; `TokFile.verify()` (`asmbpe stats
--verify`) adds the CRC-32.

Encoding input files into `.tok` files and decoding them back to text are
harness.pipeline's.
"""
from __future__ import annotations

import operator
import os
import struct
import zlib
from dataclasses import dataclass
from collections.abc import Iterator
from pathlib import Path

import numpy as np

from .errors import AsmbpeError
from .files import AtomicFile
from .tokenizer import MASKBIT   # MASKBIT: set on the tokens to learn (SPEC §5)
from .tokenizer import PathArg, Tokenizer

__all__ = ["MAGIC", "VERSION", "VERSION_INDEXED", "HEADER_SIZE", "WIDTHS", "FLAG_CHAT",
           "FLAG_CHECKSUM", "MASKBIT", "CHAT_MAX_VOCAB", "TokFileError", "TokWriter", "TokFile",
           "Verified", "read_tok", "is_tok_file"]

MAGIC = b"ASMBPTOK"
VERSION = 1
VERSION_INDEXED = 2         # token width in the header, a document index at the end
WIDTHS = (2, 4)
HEADER_SIZE = 64
FLAG_CHAT = 1               # flags bit 0: a chat file, MASKBIT in use
FLAG_CHECKSUM = 2           # flags bit 1 (version 2): the CRC-32 at offset 48 is set
KNOWN_FLAGS = FLAG_CHAT
KNOWN_FLAGS_V2 = FLAG_CHAT | FLAG_CHECKSUM
CHAT_MAX_VOCAB = MASKBIT    # chat ids must leave bit 15 free
WRITEBACK_BYTES = 16 << 20  # TokWriter starts writing back to disk every this many bytes

# magic, version, flags, reserved u32, hash, tokens, documents, source bytes, reserved
_HEADER = struct.Struct("<8sHHIQQQQ16s")
assert _HEADER.size == HEADER_SIZE
# version 2: the u32 at 12 is the width (u16) and a reserved u16; the first four of the
# reserved bytes at 48 are the CRC-32 (with FLAG_CHECKSUM; else 0)
_HEADER2 = struct.Struct("<8sHHHHQQQQI12s")
assert _HEADER2.size == HEADER_SIZE
OFF_MAGIC, OFF_VERSION, OFF_FLAGS, OFF_RESERVED1, OFF_HASH = 0, 8, 10, 12, 16
OFF_WIDTH, OFF_RESERVED_W = 12, 14
OFF_TOKENS, OFF_DOCUMENTS, OFF_BYTES, OFF_RESERVED2 = 24, 32, 40, 48
OFF_CHECKSUM, OFF_RESERVED3 = 48, 52       # version 2
SCAN_TOKENS = 1 << 22       # TokFile's checks read the tokens this many at a time


class TokFileError(AsmbpeError, ValueError):
    """A `.tok` file that cannot be used. The message names the file, the problem and
    the byte offset; `.path`, `.offset` and `.problem` hold them too."""

    def __init__(self, path: PathArg, offset: int, problem: str) -> None:
        self.path = str(path)
        self.offset = offset
        self.problem = problem
        super().__init__(f"{self.path}: {problem} (at offset {offset})")


def _pack_header(flags: int, merges_hash: int, tokens: int, documents: int,
                 source_bytes: int, version: int = VERSION, width: int = 2,
                 checksum: int = 0) -> bytes:
    """The 64-byte header (module doc). checksum: version 2's CRC-32, with flags
    FLAG_CHECKSUM (0 without)."""
    if version == VERSION_INDEXED:
        return _HEADER2.pack(MAGIC, version, flags, width, 0, merges_hash, tokens,
                             documents, source_bytes, checksum, bytes(12))
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
    starts go into the index, which follows the tokens when the file is complete), and
    `.checksum` accumulates the CRC-32 of the tokens, padding and index (FLAG_CHECKSUM:
    the header's offset 48)."""

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
        self.flags = (FLAG_CHAT if chat else 0) | (
            FLAG_CHECKSUM if version == VERSION_INDEXED else 0)
        self.checksum = 0       # version 2: CRC-32 of what follows the header, so far
        self.merges_hash = int(merges_hash)
        self._out = None            # the AtomicFile (harness.files) while open
        self.tokens = self.documents = self.source_bytes = 0
        self._f = None
        self._flushed = HEADER_SIZE             # bytes handed to writeback so far

    def __enter__(self) -> "TokWriter":
        self._out = AtomicFile(self.path)     # unnamed until complete, where possible
        self._f = self._out.file
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
        data = np.ascontiguousarray(arr).data
        self._f.write(data)
        if self.version == VERSION_INDEXED:
            self.checksum = zlib.crc32(data, self.checksum)
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
                for part in [bytes(_padding(self.width, self.tokens))] + [
                        p.data for p in self._index]:
                    self._f.write(part)
                    self.checksum = zlib.crc32(part, self.checksum)
            self._f.seek(0)
            self._f.write(_pack_header(self.flags, self.merges_hash, self.tokens,
                                       self.documents, self.source_bytes, self.version,
                                       self.width, self.checksum))
            self._f.flush()
            self._f = None
            self._out.commit()                  # fsync, then rename over the target
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
        self._f = None
        if self._out is not None:
            self._out.discard()                 # closes it; removes a named temporary


# ------------------------------------------------------------------------------ reading

@dataclass(frozen=True)
class Verified:
    """What `TokFile.verify` found: the counts it confirmed and the checks it made
    (`str()` is the line `asmbpe stats --verify` prints after `verified: `)."""

    path: str
    tokens: int
    documents: int
    source_bytes: int
    checks: tuple[str, ...]

    def __str__(self) -> str:
        return (f"{self.path}: {self.tokens:,} tokens, {self.documents:,} documents, "
                f"{self.source_bytes:,} source bytes; " + ", ".join(self.checks))


@dataclass(frozen=True)
class _IdTable:
    """What the checks need of a tokenizer: which ids are tokens, each id's byte length
    (0 for a special, which spells no source text) and the specials that are also
    ordinary tokens (a tokenizer.json may keep them in its vocabulary: text can spell
    them, so they count 0 or their length)."""

    name: str
    vocab_size: int
    valid: np.ndarray           # bool per id
    lengths: np.ndarray         # int64 per id
    both: np.ndarray            # ids of specials that are ordinary tokens too
    both_lengths: np.ndarray

    @classmethod
    def of(cls, tokenizer) -> "_IdTable":
        from .tokenizer import N_SPECIAL

        lengths = np.fromiter(map(len, tokenizer.id_to_bytes()), dtype=np.int64,
                              count=tokenizer.vocab_size)
        special = np.array(sorted(tokenizer.specials.values()), dtype=np.int64)
        ordinary = (tokenizer.n_tokens if tokenizer.is_loaded
                    else tokenizer.vocab_size - N_SPECIAL)
        valid = lengths > 0             # ids without bytes are no token (a loaded gap)
        valid[special] = True
        both = special[special < ordinary]
        both_lengths = lengths[both]
        lengths[special] = 0
        return cls(tokenizer.name, tokenizer.vocab_size, valid, lengths, both, both_lengths)


class TokFile:
    """A checked `.tok` file (`read_tok`): the header fields as attributes, the tokens
    and the documents.

        tf = harness.read_tok("train.tok")      # no tokenizer needed
        tf.tokens         # every token: a read-only numpy memmap (tf.dtype: <u2 or <u4)
        len(tf), tf[k]    # the documents; document k is a read-only view into tf.tokens
        for doc in tf: ...

    read_tok checks what it can without reading the tokens; the counts are checked
    against the tokens on first use of the documents (version 1: one pass to find the
    `<|bos|>` tokens), by `check_counts` (`asmbpe stats`) and by `verify`, each raising
    TokFileError."""

    def __init__(self, path: PathArg, version: int, flags: int, merges_hash: int,
                 n_tokens: int, n_documents: int, source_bytes: int, tokens: np.ndarray,
                 tokenizer: Tokenizer | None = None, index: np.ndarray | None = None,
                 checksum: int | None = None) -> None:
        self.path = Path(path)
        self.version = version
        self.flags = flags
        self.merges_hash = merges_hash
        self.n_tokens = n_tokens
        self.n_documents = n_documents
        self.source_bytes = source_bytes
        self.tokens = tokens        # the memmap (a read-only empty array for no tokens)
        self.tokenizer = tokenizer
        self.index = index          # version 2: each document's first token (u64)
        self.checksum = checksum    # version 2 with FLAG_CHECKSUM: the header's CRC-32
        self._starts = None if index is None else np.asarray(index, dtype=np.int64)
        self._counted = False       # check_counts done
        self._id_counts = None      # its count of every id, when it made one

    @property
    def width(self) -> int:
        """Bytes per token: 2 (u16 ids) or 4 (u32, version 2)."""
        return self.tokens.dtype.itemsize

    @property
    def dtype(self) -> np.dtype:
        """The tokens' numpy dtype: little-endian uint16 or uint32 (`width`)."""
        return self.tokens.dtype

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
        """The n_documents + 1 token offsets that bound the documents (int64): where
        each starts, then n_tokens. Version 2: the index; version 1: where the
        `<|bos|>` tokens are (found on first use, counted against the header)."""
        return np.append(self._document_starts(), self.n_tokens)

    def documents(self) -> Iterator[np.ndarray]:
        """Each document's tokens (a read-only view, MASKBIT kept), in file order.
        Version 2: as the document index says; version 1: the runs that start at each
        `<|bos|>`."""
        bounds = self.document_bounds().tolist()
        for a, b in zip(bounds, bounds[1:]):
            yield self.tokens[a:b]

    def __iter__(self) -> Iterator[np.ndarray]:
        return self.documents()

    def __len__(self) -> int:
        """The number of documents (version 1: checked against the `<|bos|>` tokens)."""
        return len(self._document_starts())

    def __getitem__(self, k) -> np.ndarray:
        """Document k (negative k from the end): a read-only view into `tokens`."""
        starts = self._document_starts()
        k = operator.index(k)
        n = len(starts)
        if not -n <= k < n:
            raise IndexError(f"document {k} out of range: {self.path} has {n} documents")
        k %= n
        end = int(starts[k + 1]) if k + 1 < n else self.n_tokens
        return self.tokens[int(starts[k]):end]

    def check_counts(self) -> None:
        """Check the header's counts against the tokens, in one pass over them (once):
        version 1 and chat files, the documents against the `<|bos|>` tokens; with the
        tokenizer read_tok was given, every id a token of it and the source bytes
        against the bytes the text tokens spell (MASKBIT stripped). TokFileError for
        the first disagreement, naming the header field's offset."""
        if not self._counted:
            self._check(self.tokenizer, checksum=False)
            self._counted = True

    def id_counts(self) -> np.ndarray | None:
        """The number of times each id occurs (MASKBIT stripped; int64, one per id of
        the tokenizer read_tok was given), from check_counts' pass over the tokens, so
        that `asmbpe stats` reads them once; None when read without a tokenizer."""
        self.check_counts()
        return self._id_counts

    def verify(self, tokenizer: Tokenizer | None = None) -> Verified:
        """Read the whole file and check everything: check_counts' checks, with
        `tokenizer` (else the one read_tok was given; a different one is checked
        against the header as read_tok does), and the CRC-32 of the tokens, padding and
        index (version 2 files with FLAG_CHECKSUM). TokFileError for the first problem;
        what was checked otherwise."""
        if tokenizer is None:
            tokenizer = self.tokenizer
        elif tokenizer is not self.tokenizer:
            _check_tokenizer(tokenizer, self.version, self.flags, self.merges_hash,
                             self._first_token(), self._fail)
        checks = self._check(tokenizer, checksum=True)
        return Verified(str(self.path), self.n_tokens, self.n_documents, self.source_bytes,
                        tuple(checks))

    # -- the checks that read the tokens

    def _fail(self, offset: int, problem: str):
        raise TokFileError(self.path, offset, problem)

    def _first_token(self) -> int | None:
        return int(self.tokens[0]) if self.n_tokens else None

    def _bos(self) -> int | None:
        """The `<|bos|>` id that starts each document (version 1) or conversation (chat
        files): the first token, which read_tok checked against its tokenizer; None for
        version-2 plain files (their delimiting special, if any, is not recorded)."""
        if self.version == VERSION_INDEXED and not self.chat:
            return None
        return self._first_token()

    def _document_starts(self) -> np.ndarray:
        if self._starts is None:                # version 1: find the <|bos|> tokens
            self._check(None, checksum=False)
        return self._starts

    def _index_at(self) -> int:
        """Version 2: the file offset of the document index."""
        return HEADER_SIZE + self.width * self.n_tokens + _padding(self.width, self.n_tokens)

    def _check(self, tokenizer, checksum: bool) -> list[str]:
        """One pass over the tokens (SCAN_TOKENS at a time) for what is asked and
        possible: the <|bos|> positions (version 1, chat), with a tokenizer the count of
        every id, with `checksum` the CRC-32 (FLAG_CHECKSUM). Then the checks, in this
        order: checksum, ids, documents, source bytes. What was checked, in words."""
        table = None if tokenizer is None else _IdTable.of(tokenizer)
        bos = self._bos()
        checksum = checksum and bool(self.flags & FLAG_CHECKSUM)
        starts, crc, out_of_range = [], 0, False
        counts = None if table is None else np.zeros(table.vocab_size, dtype=np.int64)
        if bos is not None or table is not None or checksum:
            for at in range(0, self.n_tokens, SCAN_TOKENS):
                block = self.tokens[at:at + SCAN_TOKENS]
                if checksum:
                    crc = zlib.crc32(block, crc)
                if bos is not None:
                    starts.append(np.flatnonzero(block == bos) + at)
                if table is not None and not out_of_range:
                    plain = block & block.dtype.type(~MASKBIT & 0xFFFF) if self.chat else block
                    if int(plain.max()) >= table.vocab_size:
                        out_of_range = True     # (bincount would size by it)
                    else:
                        counts += np.bincount(plain, minlength=table.vocab_size)
        checks = []
        if self.version == VERSION:
            checks.append("no checksum (version 1)")
        elif not self.flags & FLAG_CHECKSUM:
            checks.append("no checksum (written before FLAG_CHECKSUM)")
        elif checksum:
            crc = zlib.crc32(bytes(_padding(self.width, self.n_tokens)), crc)
            crc = zlib.crc32(self.index, crc)
            if crc != self.checksum:
                self._fail(OFF_CHECKSUM, f"checksum mismatch: the header says CRC-32 "
                                         f"0x{self.checksum:08x}, the tokens, padding and "
                                         f"index give 0x{crc:08x} (changed since written)")
            checks.append(f"CRC-32 0x{crc:08x}")
        if table is not None:
            if out_of_range or counts[~table.valid].any():
                self._first_bad_id(table)
            checks.append(f"every id a token of {table.name}")
        if bos is not None:
            self._check_bos(np.concatenate(starts) if starts else np.zeros(0, np.int64),
                            bos)
            checks.append(f"{'conversations' if self.chat else 'documents'} recounted "
                          "at <|bos|>")
        elif self._starts is None:              # version 1 without tokens
            self._starts = np.zeros(0, dtype=np.int64)
        if table is not None:
            self._check_spelled(counts, table)
            checks.append("source bytes respelled")
            if tokenizer is self.tokenizer:
                self._id_counts = counts
        return checks

    def _first_bad_id(self, table: _IdTable) -> None:
        """Raise TokFileError at the first id that is no token of the table's tokenizer."""
        for at in range(0, self.n_tokens, SCAN_TOKENS):
            plain = self.ids(at, at + SCAN_TOKENS).astype(np.int64)
            bad = plain >= table.vocab_size
            bad[~bad] = ~table.valid[plain[~bad]]
            if bad.any():
                pos = at + int(np.argmax(bad))
                self._fail(HEADER_SIZE + self.width * pos,
                           f"id {int(self.tokens[pos])} at position {pos} is not a token "
                           f"of {table.name} (vocab_size {table.vocab_size})")

    def _check_bos(self, starts: np.ndarray, bos: int) -> None:
        """The <|bos|> positions against the header (version 1) or the index (chat)."""
        what = "conversations" if self.chat else "documents"
        if len(starts) != self.n_documents:
            self._fail(OFF_DOCUMENTS, f"{self.n_documents} {what} in the header, but the "
                                      f"tokens hold {len(starts)} <|bos|> (id {bos}), one "
                                      f"per {what[:-1]}")
        if self.index is not None:
            off = np.flatnonzero(starts != self._starts)
            if off.size:
                k = int(off[0])
                self._fail(self._index_at() + 8 * k,
                           f"conversation {k} starts at token {int(self._starts[k])}, "
                           f"which is not <|bos|> (id {bos})")
        else:
            self._starts = starts

    def _check_spelled(self, counts: np.ndarray, table: _IdTable) -> None:
        """source_bytes against the bytes of the text tokens (specials spell none; a
        special that is also an ordinary token may spell its bytes or none)."""
        low = int(counts @ table.lengths)
        high = low + int(counts[table.both] @ table.both_lengths)
        if not low <= self.source_bytes <= high:
            spelled = f"{low}" if low == high else f"{low} to {high}"
            self._fail(OFF_BYTES, f"{self.source_bytes} source bytes in the header, but the "
                                  f"text tokens spell {spelled} bytes")

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
    if n_tokens and not n_documents:
        fail(OFF_DOCUMENTS, f"0 documents but {n_tokens} tokens (every document starts "
                            "with <|bos|>, the first at token 0)")
    _check_source_bytes(n_tokens, n_documents, source_bytes, bool(flags & FLAG_CHAT), fail)
    tokens = _map_tokens(name, "<u2", n_tokens)
    if tokenizer is not None:
        _check_tokenizer(tokenizer, version, flags, merges_hash,
                         int(tokens[0]) if n_tokens else None, fail)
    return TokFile(name, version, flags, merges_hash, n_tokens, n_documents,
                   source_bytes, tokens, tokenizer)


def _map_tokens(name: str, dtype: str, n_tokens: int) -> np.ndarray:
    """The tokens after the header, memory-mapped read-only (an empty read-only array
    for none: mmap cannot map zero bytes)."""
    if n_tokens:
        return np.memmap(name, dtype=dtype, mode="r", offset=HEADER_SIZE, shape=(n_tokens,))
    tokens = np.zeros(0, dtype=dtype)
    tokens.flags.writeable = False
    return tokens


def _check_source_bytes(n_tokens: int, n_documents: int, source_bytes: int, chat: bool,
                        fail) -> None:
    """The bounds the header alone puts on the source bytes: every text token spells at
    least one byte; a plain document holds at most one special (its <|bos|> or
    --doc-token), a conversation its <|bos|> and at least one more token per message."""
    if source_bytes and not n_tokens:
        fail(OFF_BYTES, f"{source_bytes} source bytes but no tokens")
    if chat:
        if source_bytes and n_tokens <= n_documents:
            fail(OFF_BYTES, f"{source_bytes} source bytes but no text tokens: {n_tokens} "
                            f"tokens, the <|bos|> of {n_documents} conversations")
    elif source_bytes < n_tokens - n_documents:
        fail(OFF_BYTES, f"{source_bytes} source bytes, fewer than the text tokens spell: "
                        f"{n_tokens} tokens, at most {n_documents} specials (one per "
                        "document), every other token at least one byte")


def _check_tokenizer(tokenizer, version: int, flags: int, merges_hash: int,
                     first: int | None, fail) -> None:
    """The header (and the first token) against the tokenizer: its hash, a chat file's
    vocabulary size, and <|bos|> first where documents (version 1) or conversations
    (chat) start with it."""
    if merges_hash != tokenizer.merges_hash:
        fail(OFF_HASH, f"written by a different tokenizer: hash 0x{merges_hash:016x}, "
                       f"this tokenizer's is 0x{tokenizer.merges_hash:016x}")
    if flags & FLAG_CHAT and tokenizer.vocab_size > CHAT_MAX_VOCAB:
        fail(OFF_FLAGS, f"a chat file needs vocab_size <= {CHAT_MAX_VOCAB}, the "
                        f"tokenizer has {tokenizer.vocab_size}")
    if first is not None and (version == VERSION or flags & FLAG_CHAT):
        bos = tokenizer.specials.get("<|bos|>")
        if first != bos:
            what = "conversation" if flags & FLAG_CHAT else "document"
            fail(HEADER_SIZE, f"the first token is {first}, not <|bos|> ({bos}): every "
                              f"{what} starts with it")


def _read_v2(name: str, header: bytes, file_len: int, tokenizer, fail) -> TokFile:
    """read_tok for a version-2 file (module doc)."""
    (_, version, flags, width, reserved_w, merges_hash, n_tokens, n_documents,
     source_bytes, checksum, reserved3) = _HEADER2.unpack(header)
    if flags & ~KNOWN_FLAGS_V2:
        fail(OFF_FLAGS, f"unknown flags 0x{flags:04x} (only bit 0, chat, and bit 1, "
                        "checksum, are defined)")
    if width not in WIDTHS:
        fail(OFF_WIDTH, f"token width {width}, expected 2 or 4")
    if reserved_w:
        fail(OFF_RESERVED_W, f"reserved field is 0x{reserved_w:04x}, must be 0")
    reserved, first = ((reserved3, OFF_RESERVED3) if flags & FLAG_CHECKSUM
                       else (header[OFF_RESERVED2:], OFF_RESERVED2))
    if any(reserved):
        at = first + next(i for i, b in enumerate(reserved) if b)
        fail(at, f"reserved bytes {first}..63 must be 0")
    if flags & FLAG_CHAT and width != 2:
        fail(OFF_FLAGS, f"a chat file needs token width 2 (MASKBIT is bit 15), the "
                        f"width is {width}")
    if n_documents > n_tokens and flags & FLAG_CHAT:
        fail(OFF_DOCUMENTS, f"{n_documents} conversations but only {n_tokens} tokens "
                            "(every conversation starts with <|bos|>)")
    if n_tokens and not n_documents:
        fail(OFF_DOCUMENTS, f"0 documents but {n_tokens} tokens (the document index "
                            "starts at token 0)")
    _check_source_bytes(n_tokens, n_documents, source_bytes, bool(flags & FLAG_CHAT), fail)
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
    tokens = _map_tokens(name, "<u2" if width == 2 else "<u4", n_tokens)
    if tokenizer is not None:
        _check_tokenizer(tokenizer, version, flags, merges_hash,
                         int(tokens[0]) if n_tokens else None, fail)
    return TokFile(name, version, flags, merges_hash, n_tokens, n_documents, source_bytes,
                   tokens, tokenizer, index=index,
                   checksum=checksum if flags & FLAG_CHECKSUM else None)
