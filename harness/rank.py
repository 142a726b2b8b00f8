"""Encoding with a loaded vocabulary (SPEC §11) through the library's rank encoder
(asm/encode_rank.inc and its units): tiktoken rank files and Hugging Face tokenizer.json models
(harness.vocab loads them), u32 ids.

    enc = RankEncoder(harness.vocab.from_tiktoken("cl100k_base.tiktoken.gz"))
    enc.encode_ordinary(b"hello world")        -> np.ndarray[uint32]
    enc.encode("a<|endoftext|>", allowed_special="all")
    enc.encode_batch(docs, threads=4)           -> [np.ndarray[uint32], ...]
    enc.decode_bytes(ids)                       -> bytes

The encoder object holds the pair table (harness.vocab.pair_table: every pair that may
merge, with its priority and result), the whole-token table (tiktoken: a chunk that is a
token is that token) and the token bytes. The library splits the text with the
vocabulary's pre-tokenizer and encodes chunk by chunk: the lowest-priority adjacent pair
merges first, leftmost first (a scan for chunks up to 128 bytes, a heap beyond). A
chunk of 16..128 bytes met for the first time is cut where no token's bytes span (the
pieces encode apart, exactly) when merging alone decides or the vocabulary is regular
(Vocab.regular: cl100k_base, o200k_base); `RankEncoder(vocab, split=False)` never cuts.

`encode_batch(docs, threads)` encodes documents on the library's threads (each keeps a
chunk table with the encoder). harness.loaded.LoadedTokenizer is the `Tokenizer` over
it (the CLI's `-t`, tokenizer.bin and `.tok` version 2). One call at a time per encoder
(a lock serialises Python threads).
"""
from __future__ import annotations

import threading

import numpy as np

from ._lib import ffi, lib
from .buffers import Padded, Pool, doc_pointers
from .pretokenizers import resolve
from .vocab import Vocab, VocabError, byte_ids, pair_table

__all__ = ["RankEncoder", "rank_pairs"]

RENC_WHOLE = 1              # asmbpe.h: ASMBPE_RENC_WHOLE
RENC_RANKS = 2              # asmbpe.h: ASMBPE_RENC_RANKS (a rank file's pairs)
RENC_NOGROW = 4             # asmbpe.h: ASMBPE_RENC_NOGROW (tests: tables reset, never grow)
RENC_SPLIT = 8              # asmbpe.h: ASMBPE_RENC_SPLIT (long chunks cut where no token spans)
MAX_TOKENS = 0xFFFFF        # asmbpe.h: asmbpe_renc_new takes up to 2^20 - 1 tokens


# The arrays encode_many returns: views of blocks that come back to this pool when the
# result and its views are gone, so a process's calls write their ids into pages an
# earlier call touched (harness.buffers.Pool; the merge encoder's _RESULTS, E66).
_RESULTS = Pool(np.uint32)


def _flags(vocab: Vocab, split: bool = True) -> int:
    """The library's flags for a vocabulary: whole chunks; ranks for a rank file (its
    pair table is every split of a token, priority = result = the token's id); long
    chunks cut where no token spans (split, exact without the whole-chunk rule, or with
    it where every token's bytes merge to that token: Vocab.regular)."""
    if vocab.merges is None and vocab.whole_chunk:
        flags = RENC_WHOLE | RENC_RANKS
    else:
        flags = RENC_WHOLE if vocab.whole_chunk else 0
    if split and (vocab.regular or not vocab.whole_chunk):
        flags |= RENC_SPLIT
    return flags


def pair_rows_room(offsets: np.ndarray) -> int:
    """The rows asmbpe_rank_pairs may write for tokens at these offsets: one per split
    point, the sum of length - 1 over the tokens of 2+ bytes."""
    return int(np.maximum(np.diff(offsets.astype(np.int64)) - 1, 0).sum())


def rank_pairs(token_bytes: bytes, offsets: np.ndarray) -> np.ndarray:
    """A rank file's pair table by the library (asmbpe_rank_pairs): uint32 rows {left,
    right, priority, result}, every split of every token into two tokens, in token order;
    the rows of harness.vocab.pair_table (its Python twin, which sorts them), in a
    twentieth of its time (o200k_base: 0.06 s against 0.8). token i is
    token_bytes[offsets[i]:offsets[i + 1]], the tokens distinct (Vocab checks that)."""
    n = len(offsets) - 1
    rows = np.empty((pair_rows_room(offsets), 4), dtype=np.uint32)
    got = lib().asmbpe_rank_pairs(token_bytes, ffi.from_buffer("uint64_t[]", offsets), n,
                                  ffi.from_buffer("uint32_t[]", rows))
    if got < 0:
        raise MemoryError("asmbpe_rank_pairs: out of memory") if got == -2 else \
            VocabError(f"asmbpe_rank_pairs: {n:,} tokens (at most {MAX_TOKENS:,})")
    return rows[:got]


class RankEncoder:
    """The library's encoder of a loaded vocabulary (see the module doc)."""

    def __init__(self, vocab: Vocab, grow: bool = True, split: bool = True):
        """grow=False: each thread's tables keep their first size and go back to the
        vocabulary's seed when full (where they would double): for tests of that path.
        split=False: long chunks are never cut (tests compare both ways)."""
        self.vocab = vocab
        self._pretok = resolve(vocab.pretokenizer).id
        if len(vocab.tokens) > MAX_TOKENS:
            raise VocabError(f"{vocab.name}: {len(vocab.tokens):,} tokens; the library's rank "
                             f"encoder takes up to {MAX_TOKENS:,} (20-bit ids in its pair keys)")
        lengths = np.fromiter(map(len, vocab.tokens), dtype=np.uint64,
                              count=len(vocab.tokens))
        offsets = np.zeros(len(vocab.tokens) + 1, dtype=np.uint64)
        np.cumsum(lengths, out=offsets[1:])
        token_bytes = b"".join(vocab.tokens) or b"\0"
        L = lib()
        if vocab.merges is None:
            rows = rank_pairs(token_bytes, offsets)
        else:
            left, right, priority, result = pair_table(vocab)
            if len(priority) and int(priority.max()) >= len(vocab.tokens):
                raise VocabError(f"{vocab.name}: a merge priority of {int(priority.max()):,} is "
                                 f"not below the {len(vocab.tokens):,} tokens (more merges than "
                                 "tokens)")
            rows = np.ascontiguousarray(np.stack([left, right, priority, result], axis=1),
                                        dtype=np.uint32)
        ids = np.ascontiguousarray(byte_ids(vocab), dtype=np.uint32)
        handle = L.asmbpe_renc_new(ffi.from_buffer("uint32_t[]", rows), len(rows),
                                   ffi.from_buffer("uint32_t[]", ids), token_bytes,
                                   ffi.from_buffer("uint64_t[]", offsets), len(vocab.tokens),
                                   _flags(vocab, split) | (0 if grow else RENC_NOGROW))
        if handle == ffi.NULL:
            raise MemoryError("asmbpe_renc_new: out of memory")
        self._handle = ffi.gc(handle, L.asmbpe_renc_free)
        self._lock = threading.Lock()
        self._special_text = {i: name.encode("utf-8") for name, i in vocab.specials.items()}

    def encode_ordinary(self, text) -> np.ndarray:
        """The ids (uint32) of text (bytes-like, or str as UTF-8), special-token text
        being ordinary text."""
        if isinstance(text, str):
            text = text.encode("utf-8", "surrogatepass")
        buf = Padded(text)
        n = buf.size
        if n == 0:
            return np.empty(0, dtype=np.uint32)
        out = np.empty(n, dtype=np.uint32)
        with self._lock:
            got = lib().asmbpe_renc_text(self._handle, buf.ptr, n, self._pretok,
                                         ffi.from_buffer("uint32_t[]", out), n)
        if got < 0:
            if got == -2:
                raise MemoryError("asmbpe_renc_text: out of memory")
            raise RuntimeError(f"asmbpe_renc_text failed with status {got}")
        out.resize(got, refcheck=False)
        return out

    def encode_batch(self, docs, threads: int | None = None) -> list[np.ndarray]:
        """The ids (uint32) of each document (bytes-like or str), special-token text
        being ordinary text, on `threads` threads (default: the CPUs this process may
        use): each thread claims the next document."""
        ids, counts = self.encode_many(docs, threads)
        bounds = np.concatenate(([0], np.cumsum(counts))).astype(np.int64)
        return [ids[bounds[i]:bounds[i + 1]].copy() for i in range(len(counts))]

    def encode_many(self, docs, threads: int | None = None) -> tuple[np.ndarray, np.ndarray]:
        """(every document's ids concatenated in order, uint32; each document's id
        count, uint64), as encode_batch encodes them, in one array."""
        import os
        datas = [d.encode("utf-8", "surrogatepass") if isinstance(d, str) else bytes(d) for d in docs]
        if not datas:
            return np.empty(0, dtype=np.uint32), np.empty(0, dtype=np.uint64)
        if threads is None:
            threads = len(os.sched_getaffinity(0))
        table, ends, size, keep = doc_pointers(datas)   # where they lie: no join
        out = _RESULTS.take(max(size, 1))      # ids (a block used before: no new pages)
        counts = np.zeros(len(datas), dtype=np.uint64)
        with self._lock:
            got = lib().asmbpe_renc_encode_docs(self._handle, table,
                                                ffi.from_buffer("uint64_t[]", ends),
                                                len(datas), min(threads, 256), self._pretok,
                                                ffi.from_buffer("uint32_t[]", out),
                                                ffi.from_buffer("uint64_t[]", counts))
        del keep
        if got < 0:
            _RESULTS.give_back(out)
            if got == -2:
                raise MemoryError("asmbpe_renc_encode: out of memory")
            raise RuntimeError(f"asmbpe_renc_encode failed with status {got}")
        return _RESULTS.lend(out, got), counts

    def encode(self, text, allowed_special=()) -> np.ndarray:
        """As tiktoken's encode, except that special-token text not allowed is ordinary
        text (SPEC §11): the text of each allowed special (names, or "all") becomes its
        id, and the pieces between are encoded as encode_ordinary does. Where two allowed
        specials start at the same place, the longer one wins (harness.tokenizer's
        split_specials, which the Tokenizer classes use too)."""
        from .tokenizer import split_specials

        if isinstance(text, str):
            text = text.encode("utf-8", "surrogatepass")
        names = list(self.vocab.specials) if allowed_special == "all" else list(allowed_special)
        for name in names:
            if name not in self.vocab.specials:
                raise ValueError(f"{name!r} is not a special token of {self.vocab.name}")
        if not names:
            return self.encode_ordinary(text)
        specials = [(name.encode("utf-8"), self.vocab.specials[name]) for name in names]
        parts = [self.encode_ordinary(p) if isinstance(p, bytes) else np.array([p], dtype=np.uint32)
                 for p in split_specials(text, specials)]
        return np.concatenate(parts).astype(np.uint32, copy=False) if parts else \
            np.empty(0, dtype=np.uint32)

    def decode_bytes(self, ids) -> bytes:
        """The bytes of ids: each token's bytes (the library's asmbpe_renc_decode), a
        special's text; ValueError for an id that is neither."""
        arr = np.asarray(ids).ravel()
        n_tokens = len(self.vocab.tokens)
        other = np.flatnonzero((arr < 0) | (arr >= n_tokens))   # specials (or bad ids)
        if not other.size:
            return self._decode_tokens(np.ascontiguousarray(arr, dtype=np.uint32))
        out, start = [], 0
        for k in other.tolist():                # one step per special, not per id
            i = int(arr[k])
            if i not in self._special_text:
                raise ValueError(f"id {i} is not a token of {self.vocab.name}")
            out += [self._decode_tokens(np.ascontiguousarray(arr[start:k], dtype=np.uint32)),
                    self._special_text[i]]
            start = k + 1
        out.append(self._decode_tokens(np.ascontiguousarray(arr[start:], dtype=np.uint32)))
        return b"".join(out)

    def _decode_tokens(self, ids: np.ndarray) -> bytes:
        """The bytes of ids, every one a token (< n_tokens), through the library."""
        if not ids.size:
            return b""
        L = lib()
        cap = 4 * ids.size + 64
        for _ in range(2):
            out = np.empty(cap, dtype=np.uint8)
            got = L.asmbpe_renc_decode(self._handle, ffi.from_buffer("uint32_t[]", ids),
                                       ids.size, ffi.from_buffer("uint8_t[]", out), cap)
            if got >= 0:
                return out[:got].tobytes()
            if got == -1:
                raise ValueError(f"an id is not a token of {self.vocab.name}")
            cap = -(got + 16)               # -(needed) - 16: the exact size
        raise RuntimeError("asmbpe_renc_decode: the size it asked for did not fit")
