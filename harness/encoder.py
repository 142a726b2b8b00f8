"""Encoding many documents (SPEC §6): the one entry point every production encode goes
through (`Tokenizer.encode`, `.encode_batch`, `.encode_many`, `.render_chat`, the CLI).

The work is one `asmbpe_encode_docs` call per group of about GROUP_BYTES of documents
(asm/encode.asm; so the output room the library needs, two bytes per source byte,
stays bounded however large the batch): the library takes the documents where they
lie (`buffers.doc_pointers`: no packing), each thread copies the document it works on
into a padded buffer of its own, splits it into chunks (with the tokenizer's
pre-tokenizer, whose id goes in the flags), turns each chunk into ids
(lowest-numbered merge first; a shared table of the chunks that are one id, and a
65,536-entry cache per thread for chunks of up to 48 bytes) on its own threads,
blocks of 256 documents at a time (ASMBPE_ENC_CLAIMS): thread 0 takes blocks from
the front and writes their ids in order into the result itself (the `front`
argument; with one thread that is every id, and nothing is copied: E57, E67); the
other threads take blocks from the back and leave each block's ids in its room of a
second buffer, which the process's calls reuse (`_ROOMS`), and `_gather_claims`
copies them after thread 0's. Results are written to memory that earlier results
used (`_RESULTS`, E66). The encoder object (the tables and the threads' caches) is built
once per Tokenizer and kept on it, so the caches stay warm from call to call; a lock
keeps one call at a time per encoder.
"""
from __future__ import annotations

import os
import threading

import numpy as np

from ._lib import MAX_THREADS, ffi, lib
from .buffers import Pool, doc_pointers
from .pretokenizers import resolve

__all__ = ["encode_many", "decode_ids", "encoder_stats", "MAX_THREADS"]

SMALL_BYTES = 1 << 16                    # below this, one thread (starting one costs more)
GROUP_BYTES = 256 << 20                  # source bytes per library call: the output room
                                         # (2 bytes per source byte) stays near 512 MB

STATUS_TEXT = {-1: "an argument is out of range (ASMBPE_EINVAL)",
               -2: "out of memory (ASMBPE_ENOMEM)",
               -4: "a thread could not be started (ASMBPE_ETHREAD)"}


# Memory for ids that the process's calls use again instead of fresh pages (here,
# memory a process touches for the first time costs more than the encoding that writes
# it: the kernel clears each new page; several threads touching new pages at once cost
# most of all: docs/OPTIMIZATION_LOG.md, E64, E66; buffers.Pool, E53):
#
# - `_ROOMS`, the output rooms of calls on two or more threads, shared by every encoder
#   of the process (a new Tokenizer, or the bench's new encoder per run, takes the room
#   an earlier call used). A room is in use during one call only: its ids are gathered
#   out of it before the call returns (`give_back`).
# - `_RESULTS`, the arrays `encode_many` returns: `lend` hands out a view of a block
#   that comes back here once that array and every view of it are gone, so the next
#   result (the next block of `asmbpe encode`, the next batch) is written to pages
#   already touched.
#
# (The threads' states, caches included, are pooled the same way inside the library:
# asm/encode.inc, E74.)
_ROOMS = Pool(np.uint16)
_RESULTS = Pool(np.uint16)


class _Encoder:
    """The library's encoder for one tokenizer, its lock, and the id of the tokenizer's
    pre-tokenizer (every call passes it in the flags, bits 24-31)."""

    def __init__(self, tokenizer):
        L = lib()
        self.pretok = resolve(tokenizer.pretokenizer).id
        merges = np.ascontiguousarray(tokenizer.merges, dtype="<u2").view("<u4").ravel()
        handle = L.asmbpe_enc_new(ffi.from_buffer("uint32_t[]", merges), len(merges))
        if handle == ffi.NULL:
            raise MemoryError("asmbpe_enc_new: out of memory")
        self.handle = ffi.gc(handle, L.asmbpe_enc_free)
        self.lock = threading.Lock()


def _encoder(tokenizer) -> _Encoder:
    enc = tokenizer.__dict__.get("_asm_encoder")
    if enc is None:
        enc = tokenizer.__dict__.setdefault("_asm_encoder", _Encoder(tokenizer))
    return enc


def _threads(threads, n_docs: int, n_bytes: int) -> int:
    if threads is None:
        if n_bytes < SMALL_BYTES:
            return 1
        threads = min(os.cpu_count() or 1, MAX_THREADS)
        return max(1, min(threads, -(-n_docs // 256)))      # a block of 256 docs each
    if isinstance(threads, bool) or not 1 <= int(threads) <= MAX_THREADS:
        raise ValueError(f"threads must be between 1 and {MAX_THREADS}, got {threads!r}")
    return int(threads)


def encode_many(tokenizer, docs: list[bytes], threads: int | None = None, bos: bool = False,
                cache: bool = True, profile: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """Encode documents.

    tokenizer: a harness.Tokenizer; docs: a list of bytes-like documents (any bytes,
    valid UTF-8 or not); threads: encoding threads (None: all CPUs for large batches,
    one for small ones); bos: prefix each document with <|bos|>; cache: use the
    per-thread chunk cache (results never depend on it); profile: the library keeps
    per-phase cycle counters (see encoder_stats).

    Returns (tokens, counts): every document's tokens concatenated in document order,
    uint16, and the number of tokens of each document (the <|bos|> included), uint64.
    Special-token text inside a document is ordinary text.
    """
    if threads is not None:
        _threads(threads, 0, 0)                  # validate before any work
    counts = np.zeros(len(docs), dtype=np.uint64)
    if not docs:
        return np.zeros(0, dtype=np.uint16), counts
    L = lib()
    enc = _encoder(tokenizer)
    flags = ((L.ASMBPE_ENC_BOS if bos else 0) | (0 if cache else L.ASMBPE_ENC_NOCACHE)
             | (L.ASMBPE_ENC_PROFILE if profile else 0) | L.ASMBPE_ENC_CLAIMS
             | enc.pretok << L.ASMBPE_ENC_PRETOK_SHIFT)
    with enc.lock:
        ptrs, ends, n, keep = doc_pointers(docs)
        n_threads = _threads(threads, len(docs), n)
        parts = []
        for a, b in _groups(ends):
            base = int(ends[a - 1]) if a else 0
            group_ends = ends[a:b] - np.uint64(base)
            room = int(group_ends[-1]) + (b - a)
            # thread 0 writes the ids of the documents it takes from the front in
            # order into the result (its unused end never touched); the others'
            # go to a room, out of which they are gathered after thread 0's
            result = _RESULTS.take(room)
            out = _ROOMS.take(room) if n_threads > 1 else result
            try:
                got = L.asmbpe_encode_docs(enc.handle, ptrs + a,
                                           ffi.from_buffer("uint64_t[]", group_ends), b - a,
                                           n_threads, flags,
                                           ffi.from_buffer("uint16_t[]", out),
                                           ffi.from_buffer("uint64_t[]", counts[a:b]),
                                           ffi.from_buffer("uint16_t[]", result))
                if got < 0:
                    raise MemoryError(f"asmbpe_encode failed: {STATUS_TEXT.get(got, got)}")
                if n_threads > 1:
                    _gather_claims(out, group_ends, counts[a:b], result)
                parts.append(_RESULTS.lend(result, got))
                result = None
            finally:
                if n_threads > 1:
                    _ROOMS.give_back(out)
                if result is not None:              # (a failed call's)
                    _RESULTS.give_back(result)
        del keep
    return (parts[0] if len(parts) == 1 else np.concatenate(parts)), counts


_MARK = np.uint64(1 << 63)


def _gather_claims(out: np.ndarray, ends: np.ndarray, counts: np.ndarray,
                   result: np.ndarray) -> None:
    """The ids of an ASMBPE_ENC_CLAIMS call into document order in `result`, where
    thread 0 wrote the ids of the documents it took from the front (those before
    the first marked one). Each run of documents another thread claimed starts at
    out[start(d) + d] (d its first document, marked by bit 63 of counts[d], cleared
    here) and holds its documents' ids one after another: copied to follow the ids
    of the documents before d."""
    firsts = np.flatnonzero(counts & _MARK)
    if not len(firsts):
        return
    counts &= ~_MARK
    csum = np.concatenate(([0], np.cumsum(counts, dtype=np.uint64))).astype(np.int64)
    starts = np.concatenate(([0], ends[:-1])).astype(np.int64)
    bounds = np.append(firsts, len(counts))
    for d0, d1 in zip(bounds[:-1].tolist(), bounds[1:].tolist()):
        src = int(starts[d0]) + d0
        n = int(csum[d1] - csum[d0])
        result[int(csum[d0]):int(csum[d0]) + n] = out[src:src + n]


def _groups(ends: np.ndarray):
    """[a, b) ranges of the documents, about GROUP_BYTES source bytes each (a longer
    document alone), in order."""
    a, n = 0, len(ends)
    while a < n:
        base = int(ends[a - 1]) if a else 0
        b = max(a + 1, int(np.searchsorted(ends, base + GROUP_BYTES, side="right")))
        yield a, b
        a = b


def decode_ids(tokenizer, ids: np.ndarray) -> bytes:
    """The bytes of ids (uint16, each < 256 + n_merges: no MASKBIT, no specials), by
    the library's id -> bytes table (asmbpe_decode)."""
    ids = np.ascontiguousarray(ids, dtype=np.uint16)
    L = lib()
    enc = _encoder(tokenizer)
    cap = 4 * len(ids) + 64
    with enc.lock:
        while True:
            out = np.empty(cap, dtype=np.uint8)
            n = L.asmbpe_decode(enc.handle, ffi.from_buffer("uint16_t[]", ids), len(ids),
                                ffi.from_buffer("uint8_t[]", out), cap)
            if n < 0:
                raise (MemoryError if n == -2 else ValueError)(
                    f"asmbpe_decode failed: {STATUS_TEXT.get(n, n)}")
            if n <= cap:
                return out[:n].tobytes()
            cap = n


STAT_NAMES = ("chunks", "cache_hits", "long_chunks", "cycles_pretok", "cycles_cache",
              "cycles_merge", "cycles_write", "cycles_total")


def encoder_stats(tokenizer, thread: int | None = None) -> dict:
    """Counters of the tokenizer's encoder over all calls so far, for one thread index
    or (None) all threads summed: chunks, cache_hits (chunks not encoded: found in
    the table of one-id chunks or in the thread's cache; chunks - cache_hits were
    encoded), chunks that took the heap path (longer than 128 bytes, uncached), and,
    from calls with profile=True, rdtsc cycles spent in the pre-tokenizer (with
    copying a document given by pointer into the thread's padded buffer), the cache
    (hashing, probing, copying hits), merging (encoding the chunks not found),
    writing (moving ids into document order, thread 0; none for encode_many, which
    gathers them itself) and in all (each thread's whole run)."""
    L = lib()
    raw = np.zeros(int(L.ASMBPE_ES_COUNT), dtype=np.uint64)
    tid = (1 << 64) - 1 if thread is None else int(thread)
    L.asmbpe_enc_stats(_encoder(tokenizer).handle, tid, ffi.from_buffer("uint64_t[]", raw))
    return dict(zip(STAT_NAMES, (int(x) for x in raw)))
