"""The tokenizer: its vocabulary layout (SPEC §5) and `tokenizer.bin` (SPEC §7).

This module is the one place that knows the file format. All integers little-endian:

    0   8 bytes  magic "ASMBPETK"
    8   u16      format version (1)
    10  u16      pre-tokenizer id (harness.pretokenizers: 1 seed = SPEC §3, 2 nanochat,
                 3 cl100k, 4 o200k, 5 gpt2; SPEC §10)
    12  u32      vocab_size
    16  u32      n_merges
    20  u32      n_special (16)
    24  u64      FNV-1a-64 hash of the merge table bytes
    32  u32 x n_merges: left id in bits 0-15, right id in bits 16-31

Vocabulary: ids 0..255 are the bytes, merge i makes id 256 + i, and the 16 specials
are the top ids, vocab_size - 16 .. vocab_size - 1, in the order of `SPECIALS`. So
vocab_size = 256 + n_merges + 16 always; when training stops early (no pair left with
min_count) the tokenizer is smaller than asked and the specials move down with it.

Pre-tokenizer: every tokenizer encodes with the pre-tokenizer it was trained with
(`Tokenizer.pretokenizer`, a name of harness.pretokenizers), whose id the file stores.
Files written before the exact pre-tokenizers existed hold id 1 and load as seed.

`Tokenizer.load` refuses every bad file listed in SPEC §7 with a `TokenizerFileError`
whose message names the file, the problem and its byte offset; an unknown pre-tokenizer
id is one of them. The constructor makes the same checks on the merges it is given (a
plain ValueError, no offsets).
"""
from __future__ import annotations

import os
import struct
from collections.abc import Mapping
from typing import NamedTuple

import numpy as np

from .errors import AsmbpeError
from .pretokenizers import DEFAULT as DEFAULT_PRETOKENIZER
from .pretokenizers import PRETOKENIZERS, resolve

__all__ = [
    "MAGIC", "VERSION", "N_BYTES", "N_SPECIAL", "MAX_VOCAB", "HEADER_SIZE",
    "SPECIALS", "MASKBIT", "CHAT_ROLES", "fnv1a64", "TokenizerFileError", "Tokenizer",
]

MAGIC = b"ASMBPETK"
VERSION = 1
N_BYTES = 256
N_SPECIAL = 16
MAX_VOCAB = 65535      # ids are u16 and 0xFFFF is never a token
MAX_MERGES = MAX_VOCAB - N_BYTES - N_SPECIAL
HEADER_SIZE = 32

SPECIALS = ["<|bos|>", "<|user|>", "<|assistant|>", "<|system|>", "<|end|>"] + [
    f"<|reserved_{k}|>" for k in range(11)
]
assert len(SPECIALS) == N_SPECIAL

MASKBIT = 0x8000       # chat output: set on the tokens the model should learn (SPEC §5)
CHAT_ROLES = ("user", "assistant", "system")   # each has the special <|role|>

# magic, version, pre-tokenizer id, vocab_size, n_merges, n_special, hash
_HEADER = struct.Struct("<8sHHIIIQ")
assert _HEADER.size == HEADER_SIZE
OFF_MAGIC, OFF_VERSION, OFF_PRETOK, OFF_VOCAB, OFF_NMERGES, OFF_NSPECIAL, OFF_HASH = (
    0, 8, 10, 12, 16, 20, 24)

FNV_OFFSET = 0xCBF29CE484222325
FNV_PRIME = 0x100000001B3
_MASK64 = (1 << 64) - 1


def fnv1a64(data) -> int:
    """FNV-1a, 64 bits, of a bytes-like object.

    Byte by byte in plain Python (FNV is sequential): about 20 ms for the largest merge
    table (65,263 merges, 261 KB)."""
    h = FNV_OFFSET
    for byte in bytes(data):
        h = ((h ^ byte) * FNV_PRIME) & _MASK64
    return h


class TokenizerFileError(AsmbpeError, ValueError):
    """A `tokenizer.bin` that cannot be used. The message names the file, the problem
    and the byte offset; `.path`, `.offset` and `.problem` hold them too."""

    def __init__(self, path, offset: int, problem: str):
        self.path = str(path)
        self.offset = offset
        self.problem = problem
        super().__init__(f"{self.path}: {problem}")


# ------------------------------------------------------------------------ merge checks

def _as_merges(merges) -> np.ndarray:
    """merges as a C-contiguous (M, 2) uint16 array; ValueError if it cannot be one."""
    arr = np.asarray(merges)
    if arr.size == 0:
        return np.zeros((0, 2), dtype=np.uint16)
    if arr.ndim != 2 or arr.shape[1] != 2:
        raise ValueError(f"merges must have shape (M, 2), got {arr.shape}")
    if arr.dtype.kind not in "iu":
        raise ValueError(f"merges must be integers, got dtype {arr.dtype}")
    if arr.min() < 0 or arr.max() > 0xFFFF:
        raise ValueError("merges hold ids outside 0..65535")
    return np.ascontiguousarray(arr, dtype=np.uint16)


def _first_merge_problem(merges: np.ndarray):
    """(index, side, message) of the first merge that references an id not yet defined
    (>= 256 + its index; side 0 = left, 1 = right) or repeats an earlier pair; None when
    every merge is fine. Merge checks of SPEC §7, shared by the loader and constructor."""
    limit = N_BYTES + np.arange(len(merges), dtype=np.int64)
    bad = merges.astype(np.int64) >= limit[:, None]
    first_bad = int(np.argmax(bad.any(axis=1))) if bad.any() else len(merges)
    head = merges[:first_bad].astype(np.uint32)
    keys = head[:, 0] << 16 | head[:, 1]
    order = np.argsort(keys, kind="stable")     # equal keys keep their merge order
    ordered = keys[order]
    repeats = order[1:][ordered[1:] == ordered[:-1]]
    if len(repeats):
        i = int(repeats.min())                  # the first merge that repeats a pair
        j = int(order[np.searchsorted(ordered, keys[i])])
        a, b = (int(x) for x in merges[i])
        return i, 0, f"repeats the pair ({a}, {b}) of merge {j}"
    if first_bad < len(merges):
        i = first_bad
        side = 0 if bad[i, 0] else 1
        ident = int(merges[i, side])
        which = "left" if side == 0 else "right"
        return i, side, (f"references id {ident} not yet defined ({which} side; "
                         f"must be < {N_BYTES + i})")
    return None


def _check_counts(vocab_size: int, n_merges: int, n_special: int = N_SPECIAL):
    """Message for a vocab_size / n_merges / n_special that disagree, or None."""
    if n_special != N_SPECIAL:
        return f"n_special {n_special}, expected {N_SPECIAL}"
    if vocab_size != N_BYTES + n_merges + n_special:
        return (f"vocab_size {vocab_size} != 256 + n_merges {n_merges} + n_special "
                f"{n_special} = {N_BYTES + n_merges + n_special}")
    if vocab_size > MAX_VOCAB:
        return f"vocab_size {vocab_size} is above {MAX_VOCAB} (ids are u16, 0xFFFF is never a token)"
    return None


# ---------------------------------------------------------------------------- Tokenizer

class Tokenizer:
    """A trained tokenizer: its merges and vocabulary layout (SPEC §5).

    Tokenizer(merges, vocab_size=None, pretokenizer="nanochat"): merges is an (M, 2)
    array of ids, merge i making id 256 + i; vocab_size, when given, must be 256 + M +
    16; pretokenizer: a name or id of harness.pretokenizers, the one the merges were
    learned with (every encode uses it).

    Encoding (`encode`, `encode_batch`, `encode_document`, `encode_many`,
    `render_chat`) goes through `harness.encoder.encode_many`. str input is encoded as
    UTF-8 (lone surrogates passed through); bytes may be anything. Special tokens are
    only ever produced by `bos=True`, `encode_document` and `render_chat`: special-token
    text inside ordinary text (e.g. the string "<|bos|>") is encoded as ordinary text,
    byte by byte and merged like any other text, never turned into a special id.
    `decode_bytes` / `decode` map ids back (specials to their names' text).
    """

    def __init__(self, merges, vocab_size: int | None = None, *,
                 pretokenizer=DEFAULT_PRETOKENIZER):
        self._pretok = resolve(pretokenizer)
        arr = _as_merges(merges)
        n = len(arr)
        if vocab_size is None:
            vocab_size = N_BYTES + n + N_SPECIAL
        if isinstance(vocab_size, bool) or not isinstance(vocab_size, (int, np.integer)):
            raise TypeError(f"vocab_size must be an integer, got {vocab_size!r}")
        vocab_size = int(vocab_size)
        problem = _check_counts(vocab_size, n)
        if problem:
            raise ValueError(f"bad tokenizer: {problem}")
        found = _first_merge_problem(arr)
        if found:
            raise ValueError(f"bad tokenizer: merge {found[0]} {found[2]}")
        arr.flags.writeable = False
        self._merges = arr
        self._vocab_size = vocab_size
        self._hash = fnv1a64(self._table_bytes())

    # -- properties

    @property
    def merges(self) -> np.ndarray:
        """(M, 2) uint16, read-only: merge i made id 256 + i from (left, right)."""
        return self._merges

    @property
    def vocab_size(self) -> int:
        return self._vocab_size

    @property
    def pretokenizer(self) -> str:
        """The name of the pre-tokenizer this tokenizer splits text with (a name of
        harness.pretokenizers; tokenizer.bin stores its id)."""
        return self._pretok.name

    @property
    def n_merges(self) -> int:
        return len(self._merges)

    @property
    def specials(self) -> dict[str, int]:
        """Special token name -> id (the top 16 ids, SPEC §5)."""
        base = self._vocab_size - N_SPECIAL
        return {name: base + k for k, name in enumerate(SPECIALS)}

    def special_id(self, name: str) -> int:
        try:
            return self._vocab_size - N_SPECIAL + SPECIALS.index(name)
        except ValueError:
            raise KeyError(f"unknown special token {name!r}; the specials are "
                           f"{', '.join(SPECIALS)}") from None

    @property
    def merges_hash(self) -> int:
        """FNV-1a-64 of the merge table as stored in tokenizer.bin (little-endian u32
        per merge: left | right << 16). `.tok` files record it."""
        return self._hash

    def _table_bytes(self) -> bytes:
        # (M, 2) little-endian u16, row-major == one u32 left | right << 16 per merge
        return self._merges.astype("<u2", copy=False).tobytes()

    def id_to_bytes(self) -> list[bytes]:
        """The bytes of every id, a list of length vocab_size: the 256 bytes, each merged
        token as the concatenation of its two parts, and each special as the UTF-8 of its
        name (e.g. b"<|bos|>"; decoding will treat specials by id, not by these bytes)."""
        table = [bytes([b]) for b in range(N_BYTES)]
        for a, b in self._merges.tolist():
            table.append(table[a] + table[b])
        table.extend(name.encode() for name in SPECIALS)
        return table

    # -- encoding (SPEC §6); every path goes through harness.encoder.encode_many

    def encode_many(self, docs, threads: int | None = None, *, bos: bool = False,
                    cache: bool = True) -> tuple[np.ndarray, np.ndarray]:
        """Encode a list of documents (str as UTF-8, surrogates passed through, or
        bytes-like) in one call: (every document's tokens concatenated in order, uint16;
        the token count of each document, uint64). bos: prefix each with <|bos|>."""
        from . import encoder
        from .buffers import TextBatch

        if isinstance(docs, TextBatch):
            data = docs
        else:
            docs = docs if isinstance(docs, (list, tuple)) else list(docs)
            # a list of bytes as it is (the common case: no call per document)
            data = docs if set(map(type, docs)) <= {bytes} else [
                _doc_bytes(doc, k) for k, doc in enumerate(docs)]
        return encoder.encode_many(self, data, threads, bos=bos, cache=cache)

    def encode(self, text, *, bos: bool = False, cache: bool = True) -> np.ndarray:
        """The tokens (uint16) of one str or bytes; bos: prefix <|bos|>."""
        tokens, _ = self.encode_many([text], bos=bos, cache=cache)
        return tokens

    def encode_document(self, text) -> np.ndarray:
        """A plain document as SPEC §5 encodes it: <|bos|> + its text."""
        return self.encode(text, bos=True)

    def encode_batch(self, docs, threads: int | None = None, *,
                     bos: bool = False) -> list[np.ndarray]:
        """The tokens of each document, one uint16 array each (views into one array)."""
        tokens, counts = self.encode_many(docs, threads, bos=bos)
        ends = np.cumsum(counts, dtype=np.int64)
        return [tokens[e - c:e] for e, c in zip(ends.tolist(), counts.tolist())]

    def render_chat(self, messages) -> np.ndarray:
        """A conversation as SPEC §5 encodes it (uint16): <|bos|>, then for each message
        its role's token, its content's tokens and <|end|>, with MASKBIT (0x8000) set
        on each assistant message's content tokens and its <|end|>.

        messages: a list of dicts with "role" ("user", "assistant" or "system") and
        "content" (str). ValueError naming the message for a bad one, and for a
        vocab_size above 32768 (its top ids would collide with MASKBIT)."""
        if self._vocab_size > MASKBIT:
            raise ValueError(f"render_chat needs vocab_size <= {MASKBIT} (MASKBIT 0x8000 "
                             f"marks the tokens to learn); this tokenizer has "
                             f"{self._vocab_size}")
        messages = list(messages)
        for k, m in enumerate(messages):
            if not isinstance(m, Mapping):
                raise ValueError(f"message {k}: expected a dict with 'role' and "
                                 f"'content', got {type(m).__name__}")
            if m.get("role") not in CHAT_ROLES:
                raise ValueError(f"message {k}: unknown role {m.get('role')!r}; the roles "
                                 f"are {', '.join(CHAT_ROLES)}")
            if not isinstance(m.get("content"), str):
                what = "missing" if "content" not in m else type(m["content"]).__name__
                raise ValueError(f"message {k}: content must be a str, got {what}")
        tokens, counts = self.encode_many([m["content"] for m in messages])
        end = self.special_id("<|end|>")
        parts = [np.array([self.special_id("<|bos|>")], dtype=np.uint16)]
        start = 0
        for m, n in zip(messages, counts.tolist()):
            mask = MASKBIT if m["role"] == "assistant" else 0
            parts.append(np.array([self.special_id(f"<|{m['role']}|>")], dtype=np.uint16))
            parts.append(tokens[start:start + n] | np.uint16(mask))
            parts.append(np.array([end | mask], dtype=np.uint16))
            start += n
        return np.concatenate(parts)

    # -- decoding

    def decode_bytes(self, ids) -> bytes:
        """The exact bytes of a sequence of ids (SPEC §6). MASKBIT is stripped first
        (when vocab_size <= 32768, so that no real id has it); specials decode to the
        UTF-8 of their names (e.g. b"<|bos|>"). An id that is not a token after that
        raises ValueError naming its position."""
        arr = np.asarray(ids)
        if arr.size == 0:
            return b""
        if arr.ndim != 1:
            raise ValueError(f"ids must be a flat sequence, got shape {arr.shape}")
        if arr.dtype.kind not in "iu":
            raise TypeError(f"ids must be integers, got dtype {arr.dtype}")
        vals = arr.astype(np.int64)          # (a uint64 above 2**63 turns negative: bad)
        if self._vocab_size <= MASKBIT:
            masked = (vals >= MASKBIT) & (vals <= 0xFFFF)
            vals[masked] -= MASKBIT
        bad = (vals < 0) | (vals >= self._vocab_size)
        if bad.any():
            pos = int(np.argmax(bad))
            raise ValueError(f"id {arr[pos]} at position {pos} is not a token "
                             f"(vocab_size {self._vocab_size})")
        # the library's id -> bytes table (asmbpe_decode) between specials, whose
        # bytes are their names
        from . import encoder

        plain = N_BYTES + self.n_merges
        ids16 = vals.astype(np.uint16)
        out, start = [], 0
        for pos in np.flatnonzero(vals >= plain).tolist() + [len(vals)]:
            if pos > start:
                out.append(encoder.decode_ids(self, ids16[start:pos]))
            if pos < len(vals):
                out.append(SPECIALS[int(vals[pos]) - plain].encode())
            start = pos + 1
        return b"".join(out)

    def decode(self, ids, errors: str = "replace") -> str:
        """decode_bytes, then UTF-8 decoding with `errors` ("replace" by default,
        "strict" raises UnicodeDecodeError on bytes that are not UTF-8)."""
        return self.decode_bytes(ids).decode("utf-8", errors)

    def __eq__(self, other):
        if not isinstance(other, Tokenizer):
            return NotImplemented
        return (self._vocab_size == other._vocab_size and self._pretok == other._pretok
                and np.array_equal(self._merges, other._merges))

    __hash__ = None

    def __repr__(self):
        return (f"Tokenizer(vocab_size={self._vocab_size}, n_merges={self.n_merges}, "
                f"merges_hash=0x{self._hash:016x}, pretokenizer={self.pretokenizer!r})")

    # -- tokenizer.bin

    def to_bytes(self) -> bytes:
        """The tokenizer.bin image (SPEC §7)."""
        header = _HEADER.pack(MAGIC, VERSION, self._pretok.id, self._vocab_size,
                              self.n_merges, N_SPECIAL, self._hash)
        return header + self._table_bytes()

    def save(self, path) -> None:
        """Write tokenizer.bin to path: to a temporary name beside it first, then
        rename, so path is either its old content or the complete new file."""
        from .files import write_atomic
        write_atomic(path, self.to_bytes())

    @classmethod
    def from_bytes(cls, data, name: str = "tokenizer.bin") -> "Tokenizer":
        """Parse and validate a tokenizer.bin image; `name` is used in error messages."""
        data = bytes(data)
        head = _check_header(data[:HEADER_SIZE], len(data), name)
        return cls._from_table(data[HEADER_SIZE:], head, name)

    @classmethod
    def load(cls, path) -> "Tokenizer":
        """Read and validate tokenizer.bin; TokenizerFileError for every bad file of
        SPEC §7 (the header and the size are checked before the table is read)."""
        name = os.fspath(path)
        with open(path, "rb") as f:
            file_len = os.fstat(f.fileno()).st_size
            header = f.read(HEADER_SIZE)
            head = _check_header(header, file_len, name)
            table = f.read(4 * head.n_merges + 1)
        if len(table) != 4 * head.n_merges:     # the file changed under us
            raise TokenizerFileError(name, HEADER_SIZE + len(table),
                                     f"merge table is {len(table)} bytes, expected "
                                     f"{4 * head.n_merges} (file changed while reading?)")
        return cls._from_table(table, head, name)

    @classmethod
    def _from_table(cls, table: bytes, head: "_Header", name: str) -> "Tokenizer":
        n_merges, stored_hash = head.n_merges, head.hash
        merges = np.frombuffer(table, dtype="<u2").reshape(n_merges, 2)
        found = _first_merge_problem(merges)
        if found:
            i, side, message = found
            raise TokenizerFileError(
                name, HEADER_SIZE + 4 * i + 2 * side,
                f"merge {i} at offset {HEADER_SIZE + 4 * i + 2 * side} {message}")
        actual = fnv1a64(table)
        if actual != stored_hash:
            raise TokenizerFileError(
                name, OFF_HASH,
                f"hash mismatch at offset {OFF_HASH}: the header says 0x{stored_hash:016x}, "
                f"the merge table hashes to 0x{actual:016x}")
        return cls(merges.astype(np.uint16), head.vocab_size, pretokenizer=head.pretok)


def _doc_bytes(doc, k: int) -> bytes:
    """Document k as bytes: str as UTF-8 (surrogatepass), bytes-like as is."""
    if isinstance(doc, str):
        return doc.encode("utf-8", "surrogatepass")
    if isinstance(doc, (bytes, bytearray, memoryview)):
        return bytes(doc)
    raise TypeError(f"document {k}: expected str or bytes, got {type(doc).__name__}")


class _Header(NamedTuple):
    vocab_size: int
    n_merges: int
    hash: int
    pretok: int             # a known pre-tokenizer id


def _check_header(header: bytes, file_len: int, name: str) -> _Header:
    """Validate the 32-byte header against the file length. Checks in the order of
    SPEC §7 (the pre-tokenizer id with the version)."""
    if not MAGIC.startswith(header[:len(MAGIC)]):     # (a short file may be cut in it)
        raise TokenizerFileError(name, OFF_MAGIC,
                                 f"bad magic at offset {OFF_MAGIC}: {header[:8]!r}, "
                                 f"expected {MAGIC!r} (not a tokenizer.bin)")
    if file_len < HEADER_SIZE or len(header) < HEADER_SIZE:
        raise TokenizerFileError(name, min(file_len, len(header)),
                                 f"file too short at offset {min(file_len, len(header))}: "
                                 f"{file_len} bytes, the header alone is {HEADER_SIZE}")
    _, version, pretok, vocab_size, n_merges, n_special, stored_hash = _HEADER.unpack(header)
    if version != VERSION:
        raise TokenizerFileError(name, OFF_VERSION,
                                 f"bad format version {version} at offset {OFF_VERSION}, "
                                 f"expected {VERSION}")
    if pretok not in {p.id for p in PRETOKENIZERS}:
        known = ", ".join(str(p) for p in PRETOKENIZERS)
        raise TokenizerFileError(name, OFF_PRETOK,
                                 f"unknown pre-tokenizer id {pretok} at offset {OFF_PRETOK}, "
                                 f"expected one of {known}")
    expected_len = HEADER_SIZE + 4 * n_merges
    if file_len != expected_len:
        raise TokenizerFileError(name, OFF_NMERGES,
                                 f"size mismatch: n_merges {n_merges} at offset {OFF_NMERGES} "
                                 f"needs a file of {expected_len} bytes, the file is "
                                 f"{file_len} bytes")
    if n_special != N_SPECIAL:
        raise TokenizerFileError(name, OFF_NSPECIAL,
                                 f"bad n_special {n_special} at offset {OFF_NSPECIAL}, "
                                 f"expected {N_SPECIAL}")
    if vocab_size != N_BYTES + n_merges + n_special or vocab_size > MAX_VOCAB:
        raise TokenizerFileError(name, OFF_VOCAB,
                                 f"bad vocab_size at offset {OFF_VOCAB}: "
                                 + _check_counts(vocab_size, n_merges, n_special))
    return _Header(vocab_size, n_merges, stored_hash, pretok)
