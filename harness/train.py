"""Training (SPEC §4) from Python: documents in, merges + tokenizer out.

    result = harness.train(inputs, vocab_size=32768, threads=None, naive=False,
                           max_word_bytes=256, min_count=1, verify=False,
                           pretokenizer="nanochat")

Python reads the input and hands it to the library in batches (8 MB by default: as
fast as 16 MB on english and half the reading buffers, faster than 4 MB; T56): each
batch is one
padded buffer plus document end offsets, counted by ONE `asmbpe_count_words` call on
`threads` threads (its chunks cut by the chosen pre-tokenizer, whose id the call
takes) into a persistent word table (which keeps copies of the words, so
each batch is freed after its call). Then ONE `asmbpe_train` call lays the words out,
counts the pairs and runs the whole merge loop on all threads.

Timings (`TrainResult.stats["seconds"]`):

- read:        Python: waiting for the next batch (files are read on a thread one
               batch ahead, so reading overlaps counting and only the wait shows) and
               copying it into the padded buffer, reused for every batch
               (time.perf_counter);
- count:       the asmbpe_count_words calls (perf_counter around them);
- layout, pairs, merge_loop, verify: phases inside asmbpe_train, which the library
               times with rdtsc. They are turned into seconds by sharing out the wall
               time of the asmbpe_train call (perf_counter) in proportion to their
               cycles, so they add up to that call's wall time; `tsc_hz` in the stats
               is the implied rdtsc rate;
- scan, apply, heap, compact: parts of merge_loop, converted at the same rate. The
               library sums scan cycles over the threads; `scan` is that sum divided
               by the number of threads (the mean per thread); apply, heap and compact
               run on one thread;
- train_call:  the asmbpe_train call as a whole; total: the whole of train().
"""
from __future__ import annotations

import functools
import os
import resource
import time
from collections.abc import Iterable
from typing import Callable, Union

from ._lazy import lazy_numpy

from ._lib import MAX_THREADS, ffi, lib
from .buffers import Packer, Padded
from .corpora import (ReadOptions, estimate_bytes, give_back_freed_memory, iter_batches,
                      prefetch)
from .errors import AsmbpeError, OutOfMemory, memory_phase
from .pretokenizers import DEFAULT as DEFAULT_PRETOKENIZER
from .pretokenizers import resolve
from .tokenizer import MAX_VOCAB, N_BYTES, N_SPECIAL, Document, Tokenizer

np = lazy_numpy(globals())    # numpy imported on first use (harness/_lazy.py)

__all__ = ["train", "train_words", "WordTable", "TrainResult", "TrainError", "MAX_THREADS",
           "MIN_VOCAB", "MAX_TRAIN_VOCAB", "MAX_COUNT", "TrainOutOfMemory", "check_min_count"]

BATCH_BYTES = 8 << 20                    # text per asmbpe_count_words call (measured best)
MIN_VOCAB = N_BYTES + N_SPECIAL          # 272: no merges at all
MAX_TRAIN_VOCAB = 1 << 20                # u32 training (asmbpe_train32): ids below 2^20
MAX_COUNT = (1 << 64) - 1                # the library's counts are uint64

# library status codes (asm/asmbpe.h)
EINVAL, ENOMEM, ETHREAD, EVERIFY = -1, -2, -4, -5
STATUS_TEXT = {
    EINVAL: "an argument is out of range (ASMBPE_EINVAL)",
    ENOMEM: "out of memory (ASMBPE_ENOMEM)",
    ETHREAD: "a thread could not be started (ASMBPE_ETHREAD)",
    EVERIFY: "verification failed (ASMBPE_EVERIFY)",
}
NONE = (1 << 64) - 1                     # ~0 in the VERIFY_* stats: no violation

Progress = Callable[[str, int, "int | None"], None]
TrainInput = Union[Document, "os.PathLike[str]", Iterable[Union[Document, "os.PathLike[str]"]]]
"""What `train` learns from: one document (bytes or str), a path, or an iterable of
documents or of paths."""


class TrainError(AsmbpeError, RuntimeError):
    """The library could not train (a negative status), or verify found a violation."""

    def __init__(self, message: str, status: int = 0) -> None:
        super().__init__(message)
        self.status = status


class TrainOutOfMemory(TrainError, OutOfMemory):
    """The library ran out of memory (ASMBPE_ENOMEM) while `phase`: a TrainError with
    that status, and an OutOfMemory."""

    def __init__(self, phase: str, detail: str, status: int = -2) -> None:
        OutOfMemory.__init__(self, phase, detail)
        self.status = status


class TrainResult:
    """What `train` learned.

    merges:    (M, 2) uint16, merge i made token 256 + i from (left, right); uint32
               when 256 + M + 16 > 65535;
    counts:    (M,) uint64, the winning pair count of each merge;
    tokenizer: the Tokenizer of these merges (vocab_size = 256 + M + 16; smaller than
               asked when training stopped early), with the pre-tokenizer they were
               learned with (`tokenizer.pretokenizer`); above 65,535 ids a
               harness.loaded.LoadedTokenizer (uint32 ids, the same layout:
               harness.loaded.trained_tokenizer);
    stats:     "seconds" (a dict per phase, see the module doc) and counters:
               bytes_in, documents, chunks (chunks counted, long ones left out),
               unique_words, words (unique words of >= 2 bytes, the ones laid out),
               tokens (their bytes), distinct_pairs (at the start), merges,
               merges_asked, pretokenizer (its name), rewrites (word rewrites),
               compactions, threads (of the merge loop; 1 when naive),
               narrow_merges (above 65,535 ids: the merges learned on u16 tokens
               before the words were widened to u32; 0 otherwise),
               pair_table_slots (the pair table's size at the end),
               pair_table_rehashes (its rehashes in place, at its size or doubled),
               count_threads, naive, verify,
               peak_memory_bytes (max of the library's peak mapped bytes and the
               process's ru_maxrss), library_peak_bytes, max_rss_bytes, tsc_hz,
               cycles (the raw rdtsc counts per phase).

    `merges` and `counts` are made from the trainer's output on first use (numpy is
    imported then: `asmbpe train` never does, harness/_lazy.py); `last_count` needs
    neither.
    """

    def __init__(self, table: bytes, counts: bytes, tokenizer: Tokenizer | None,
                 narrow: bool, stats: dict | None = None) -> None:
        self._table = table             # (M, 2) ids, u16 when narrow else u32, as bytes
        self._counts = counts           # (M,) u64, as bytes
        self._narrow = narrow
        self.tokenizer = tokenizer
        self.stats = {} if stats is None else stats

    @functools.cached_property
    def merges(self) -> np.ndarray:
        """(M, 2) uint16 (uint32 above 65,535 ids): merge i made id 256 + i."""
        dtype = np.uint16 if self._narrow else np.uint32
        return np.frombuffer(self._table, dtype=dtype).reshape(-1, 2).copy()

    @functools.cached_property
    def counts(self) -> np.ndarray:
        """(M,) uint64: the winning pair count of each merge."""
        return np.frombuffer(self._counts, dtype=np.uint64).copy()

    @property
    def last_count(self) -> int | None:
        """The last merge's winning count; None when no merge was learned."""
        return int.from_bytes(self._counts[-8:], "little") if self._counts else None

    @property
    def n_merges(self) -> int:
        """The number of merges learned."""
        return len(self._counts) // 8

    @property
    def merges_asked(self) -> int:
        """The number of merges `vocab_size` asked for (vocab_size - 256 - 16)."""
        return int(self.stats.get("merges_asked", self.n_merges))

    @property
    def stopped_early(self) -> bool:
        """True when training learned fewer merges than asked: no pair was left with
        the count `min_count` asks for (a small corpus). The vocabulary is then smaller
        than asked, `tokenizer.vocab_size` = 256 + n_merges + 16, and the 16 specials
        are its top 16 ids, right after the last merge (`<|bos|>` is
        tokenizer.vocab_size - 16), not where the asked vocab_size would put them."""
        return self.n_merges < self.merges_asked

    def __repr__(self) -> str:
        early = (f", stopped early: {self.n_merges} of {self.merges_asked} merges"
                 if self.stopped_early else "")
        return (f"TrainResult(n_merges={self.n_merges}, "
                f"vocab_size={self.tokenizer.vocab_size}{early})")


# ------------------------------------------------------------------------- arguments

def _check_int(name: str, value, low: int, high: int | None = None) -> int:
    if isinstance(value, bool) or not hasattr(value, "__index__"):
        raise TypeError(f"{name} must be an integer, got {value!r}")
    value = int(value.__index__())
    if value < low or (high is not None and value > high):
        bound = f"between {low} and {high}" if high is not None else f">= {low}"
        raise ValueError(f"{name} must be {bound}, got {value}")
    return value


def check_min_count(min_count) -> int:
    """min_count as an int, 0..MAX_COUNT (the library's uint64 counts); TypeError or
    ValueError otherwise (before any reading: `asmbpe train` checks it first)."""
    return _check_int("min_count", min_count, 0, MAX_COUNT)


def _is_doc(x) -> bool:
    return isinstance(x, (bytes, bytearray, memoryview, str))


def _as_doc(x, k: int) -> bytes:
    if isinstance(x, str):
        return x.encode("utf-8", "surrogatepass")
    if isinstance(x, (bytes, bytearray, memoryview)):
        return bytes(x)
    raise TypeError(f"input {k}: expected bytes, str or a path, got {type(x).__name__}")


def _classify(inputs) -> tuple[str, list]:
    """("docs", documents) or ("files", paths)."""
    if _is_doc(inputs):
        return "docs", [_as_doc(inputs, 0)]
    if isinstance(inputs, os.PathLike):
        return "files", [inputs]
    try:
        items = list(inputs)
    except TypeError:
        raise TypeError("inputs must be bytes, str, a path, or a list of documents or "
                        f"of paths; got {type(inputs).__name__}") from None
    paths = [isinstance(x, os.PathLike) for x in items]
    if items and all(paths):
        return "files", items
    if any(paths):
        raise TypeError("inputs mix documents and paths; give one kind (str is a "
                        "document: wrap file names in pathlib.Path)")
    return "docs", [_as_doc(x, k) for k, x in enumerate(items)]


def _doc_batches(docs: list[bytes], batch_bytes: int):
    batch, size = [], 0
    for d in docs:
        batch.append(d)
        size += len(d)
        if size >= batch_bytes:
            yield batch
            batch, size = [], 0
    if batch:
        yield batch


# ----------------------------------------------------------------------------- train

SMALL_WORDS_BYTES = 1 << 20     # unique-word bytes under which the merge loop, when
                                # threads are not given, runs on one thread


@memory_phase("counting words")     # (reading and training name their own phases)
def train(inputs: TrainInput, vocab_size: int = 32768, threads: int | None = None,
          naive: bool = False, max_word_bytes: int = 256, min_count: int = 1,
          verify: bool = False, progress: Progress | None = None, *,
          pretokenizer: str | int = DEFAULT_PRETOKENIZER, batch_bytes: int = BATCH_BYTES,
          separator: bytes | str | None = None, per_merge: bool = False,
          read_options: ReadOptions | None = None, _wide: bool | None = None) -> TrainResult:
    """Learn byte-level BPE merges (SPEC §4) with the assembly trainer.

    inputs: bytes or str (one document), a list/tuple/iterable of them (one document
        each; str as UTF-8), or a path (os.PathLike, e.g. pathlib.Path) or list of
        paths: files read as a stream by harness.corpora (Parquet `text`, JSONL `text`,
        plain text; .gz/.zst). A plain str is a document, never a file name.
    vocab_size: 256 + merges + 16 specials, 272..1048576 (2^20); vocab_size - 272 merges
        are asked for, fewer are learned when no pair is left with min_count. Up to
        65,535 the ids are u16 (a Tokenizer, tokenizer.bin version 1); above, the merge
        loop runs on u32 tokens (asmbpe_train32: the same merges, wider words) and the
        tokenizer is a LoadedTokenizer of uint32 ids (merge i still makes id 256 + i;
        tokenizer.bin version 2).
    threads: threads for counting and the merge loop (default os.cpu_count(), and one
        for the merge loop when the unique words hold under SMALL_WORDS_BYTES; at most
        256); naive=True runs the merge loop on one thread, recounting every pair for
        every merge (the library's naive twin).
    max_word_bytes: chunks longer than this are left out (0 = no limit).
    min_count: stop when the best pair's count is below this (0 counts as 1; at most
        MAX_COUNT, 2**64 - 1: the library counts in uint64).
    verify: after the run, recount every pair and compare with the table kept up to
        date, and check the winning counts never went up; TrainError on a violation.
    pretokenizer: how documents are cut into chunks (words): a name or id of
        harness.pretokenizers ("nanochat" by default; "seed" for SPEC §3's byte-level
        one). The tokenizer learned records it and encodes with it.
    progress: called as progress("count", bytes_counted, bytes_estimated_or_None)
        after each batch, progress("merge", 0, merges_asked) before the merge loop and
        progress("merge", merges_learned, merges_asked) after it.
    batch_bytes: text bytes per asmbpe_count_words call; separator (plain text
        files) or read_options (harness.corpora.ReadOptions: separator, lines, column,
        field): how files are read, see harness.corpora.iter_documents.
    per_merge: keep stats["per_merge"], an (M, 4) uint64 array: for each merge the
        rdtsc cycles from its choice to the next merge's, the words it rewrote, the
        pairs it replaced and the chunks of 128 positions of the word array its scan
        looked at, all threads together (not kept with naive=True).
    """
    t_start = time.perf_counter()
    vocab_size = _check_int("vocab_size", vocab_size, MIN_VOCAB, MAX_TRAIN_VOCAB)
    auto_threads = threads is None
    if threads is None:
        threads = min(os.cpu_count() or 1, MAX_THREADS)
    threads = _check_int("threads", threads, 1)
    threads = min(threads, MAX_THREADS)
    max_word_bytes = _check_int("max_word_bytes", max_word_bytes, 0)
    min_count = check_min_count(min_count)
    batch_bytes = _check_int("batch_bytes", batch_bytes, 1)
    pretok = resolve(pretokenizer)
    report = progress or (lambda phase, done, total: None)

    kind, items = _classify(inputs)
    if kind == "files":
        total_est = estimate_bytes(items)
        batches = prefetch(iter_batches(items, batch_bytes, separator=separator,
                                        read_options=read_options, packed=True))
    else:
        total_est = sum(len(d) for d in items)
        batches = _doc_batches(items, batch_bytes)

    L = lib()
    L.asmbpe_mapped_peak(1)
    seconds = dict(read=0.0, count=0.0)
    bytes_in = documents = 0
    table = WordTable(pretok)
    try:
        report("count", 0, total_est)
        packer = Packer()
        t0 = time.perf_counter()
        for docs in batches:
            ptr, ends, size = packer.pack(docs)
            del docs
            t1 = time.perf_counter()
            seconds["read"] += t1 - t0
            table._count_packed(ptr, ends, threads, max_word_bytes)
            t0 = time.perf_counter()
            seconds["count"] += t0 - t1
            bytes_in += size
            documents += len(ends)
            report("count", bytes_in, total_est)
        del packer
        seconds["read"] += time.perf_counter() - t0
    finally:
        close = getattr(batches, "close", None)
        if close is not None:                   # stop the reader thread on errors too
            close()
    give_back_freed_memory()                    # the reader's buffers: not in the
                                                # merge loop's peak (T52)
    try:
        result = train_words(table, vocab_size, None if auto_threads else threads,
                             naive=naive, min_count=min_count, verify=verify,
                             progress=progress, per_merge=per_merge, _seconds=seconds,
                             _t_start=t_start, _release=True, _wide=_wide)
    finally:
        table.close()
    result.stats.update(bytes_in=bytes_in, documents=documents, count_threads=threads)
    return result


class WordTable:
    """The library's persistent word table (count.asm): unique words and their counts.

    `harness.train` counts into one; the distributed path counts shards into one per
    worker, ships `export()` arrays and merges them with `add()` (the library's table
    merge), then learns merges with `train_words`. Counts and merges never depend on
    how the words were split up or in which order tables were merged.

    pretokenizer (a name or id of harness.pretokenizers): what `count` cuts documents
    with, and what the tokenizer `train_words` learns from the table records; words
    added with `add` must have been cut by the same one."""

    def __init__(self, pretokenizer=DEFAULT_PRETOKENIZER):
        self._h = None
        self._pretok = resolve(pretokenizer)
        L = lib()
        handle = L.asmbpe_wordtab_new()
        if handle == ffi.NULL:
            raise TrainOutOfMemory("creating the word table", "asmbpe_wordtab_new: ASMBPE_ENOMEM")
        self._h = handle

    @property
    def pretokenizer(self) -> str:
        """The name of the pre-tokenizer the table's words are cut by."""
        return self._pretok.name

    @property
    def handle(self):
        if self._h is None:
            raise ValueError("the word table is closed")
        return self._h

    def close(self) -> None:
        if self._h is not None:
            lib().asmbpe_wordtab_free(self._h)
            self._h = None

    __del__ = close

    def __len__(self) -> int:
        return int(lib().asmbpe_wordtab_size(self.handle))

    @property
    def total(self) -> int:
        """Chunks counted (the sum of all counts)."""
        return int(lib().asmbpe_wordtab_total(self.handle))

    @property
    def key_bytes(self) -> int:
        return int(lib().asmbpe_wordtab_key_bytes(self.handle))

    def _count_packed(self, ptr, ends: np.ndarray, threads: int, max_word_bytes: int) -> None:
        got = lib().asmbpe_count_words(self.handle, ptr, ffi.from_buffer("uint64_t[]", ends),
                                       len(ends), threads, max_word_bytes, self._pretok.id)
        if got < 0:
            raise _failed("counting words", "asmbpe_count_words", got)

    def count(self, docs: list[bytes], threads: int | None = None,
              max_word_bytes: int = 256) -> None:
        """Count the chunks of documents (bytes) into the table, on `threads` threads,
        cut by the table's pre-tokenizer."""
        threads = _check_int("threads", threads if threads is not None
                             else min(os.cpu_count() or 1, MAX_THREADS), 1, MAX_THREADS)
        max_word_bytes = _check_int("max_word_bytes", max_word_bytes, 0)
        if docs:
            packer = Packer()               # keeps the buffer alive during the call
            ptr, ends, _ = packer.pack(docs)
            self._count_packed(ptr, ends, threads, max_word_bytes)
            del packer

    def export(self) -> tuple[bytes, np.ndarray, np.ndarray]:
        """(word bytes concatenated, end offsets uint64, counts uint64), table order."""
        n = len(self)
        data = np.zeros(max(self.key_bytes, 1), dtype=np.uint8)
        ends = np.zeros(max(n, 1), dtype=np.uint64)
        counts = np.zeros(max(n, 1), dtype=np.uint64)
        got = lib().asmbpe_wordtab_export(self.handle, ffi.from_buffer("uint8_t[]", data),
                                          ffi.from_buffer("uint64_t[]", ends),
                                          ffi.from_buffer("uint64_t[]", counts))
        return data[:self.key_bytes].tobytes(), ends[:got].copy(), counts[:got].copy()

    def add(self, data: bytes, ends: np.ndarray, counts: np.ndarray) -> None:
        """Add words with counts (as `export` gives them) to the table."""
        ends = np.ascontiguousarray(ends, dtype=np.uint64)
        counts = np.ascontiguousarray(counts, dtype=np.uint64)
        if len(ends) != len(counts) or (len(ends) and int(ends[-1]) != len(data)):
            raise ValueError("add: ends and counts must match, and ends[-1] == len(data)")
        if not len(ends):
            return
        buf = Padded(data)
        got = lib().asmbpe_wordtab_add(self.handle, buf.ptr, ffi.from_buffer("uint64_t[]", ends),
                                       ffi.from_buffer("uint64_t[]", counts), len(ends))
        if got < 0:
            raise _failed("merging word tables", "asmbpe_wordtab_add", got)


@memory_phase("training merges")
def train_words(table: WordTable, vocab_size: int = 32768, threads: int | None = None,
                naive: bool = False, min_count: int = 1, verify: bool = False,
                progress: Progress | None = None, *, per_merge: bool = False,
                _seconds: dict | None = None, _t_start: float | None = None,
                _release: bool = False, _wide: bool | None = None) -> TrainResult:
    """Learn merges from the words of a WordTable (what `train` does after counting):
    lay them out, count pairs, run the merge loop on `threads` threads (default all
    CPUs, one for word arrays under SMALL_WORDS_BYTES). Same results as `train` on the
    documents the table counted; the tokenizer has the table's pre-tokenizer. (`_release`, for `train`: the library gives the
    table's memory back once the words are laid out; the table is closed then.
    `_wide`, for tests: False runs the u16 trainer, True the u32 one on u32 tokens
    throughout (ASMBPE_WIDE_ONLY), an int k the u32 one with its first k merges on u16
    tokens (stats[ASMBPE_TS_NARROW]); None picks by vocab_size: above 65,535 ids the
    u32 trainer, its first 65,279 merges on u16 tokens.)"""
    t_start = _t_start if _t_start is not None else time.perf_counter()
    vocab_size = _check_int("vocab_size", vocab_size, MIN_VOCAB, MAX_TRAIN_VOCAB)
    wide = vocab_size > MAX_VOCAB if _wide is None else _wide is not False
    if not wide and vocab_size > MAX_VOCAB:
        raise ValueError(f"vocab_size {vocab_size}: the u16 trainer stops at {MAX_VOCAB}")
    auto_threads = threads is None
    threads = min(_check_int("threads", threads if threads is not None
                             else min(os.cpu_count() or 1, MAX_THREADS), 1), MAX_THREADS)
    min_count = check_min_count(min_count)
    n_merges = vocab_size - MIN_VOCAB
    report = progress or (lambda phase, done, total: None)
    L = lib()
    if _seconds is None:
        L.asmbpe_mapped_peak(1)
    seconds = dict(_seconds or dict(read=0.0, count=0.0))
    pretok = table._pretok
    tab = table.handle
    unique_words = len(table)
    chunks = table.total
    flags = ((L.ASMBPE_NAIVE if naive else 0) | (L.ASMBPE_VERIFY if verify else 0)
             | (L.ASMBPE_RELEASE_WORDS if _release else 0)
             | (L.ASMBPE_WIDE_ONLY if _wide is True else 0))
    # the u16 trainer writes u32 left | right << 16 per merge, the u32 one u64
    # left | right << 32: both (M, 2) ids of their width, row-major. cffi arrays, not
    # numpy: `asmbpe train` never imports it (harness/_lazy.py)
    merge_c, width = ("uint64_t", 4) if wide else ("uint32_t", 2)
    merges_out = ffi.new(f"{merge_c}[]", max(n_merges, 1))
    counts_out = ffi.new("uint64_t[]", max(n_merges, 1))
    raw = ffi.new("uint64_t[]", int(L.ASMBPE_TS_COUNT))
    if wide and _wide is not True and _wide is not None:
        raw[L.ASMBPE_TS_NARROW] = _check_int("_wide", _wide, 1)
    records = None
    if per_merge and not naive:
        records = np.zeros((max(n_merges, 1), 4), dtype=np.uint64)
        raw[L.ASMBPE_TS_PER_MERGE] = int(ffi.cast("uintptr_t", ffi.from_buffer("uint64_t[]", records)))
    set_live = getattr(progress, "set_live", None)
    if set_live is not None:
        # the library writes each merge's count and the merge counter as it
        # goes, and cffi releases the GIL during the call: a progress thread
        # can read them (aligned u64 stores: never torn on x86-64)
        i_merges = int(L.ASMBPE_TS_MERGES)

        def live() -> tuple[int, int]:
            m = int(raw[i_merges])
            return m, int(counts_out[m - 1]) if m else 0
        set_live(live)
    report("merge", 0, n_merges)
    t1 = time.perf_counter()
    loop_threads = threads
    if auto_threads and table.key_bytes < SMALL_WORDS_BYTES:
        loop_threads = 1                # tiny word arrays: two barriers a merge cost
                                        # more than a second scanner saves
    train_fn = L.asmbpe_train32 if wide else L.asmbpe_train
    status = train_fn(tab, n_merges, min_count, loop_threads, flags, merges_out, counts_out, raw)
    train_call = time.perf_counter() - t1
    if _release:
        table.close()                   # empty now: nothing else may use it

    learned = max(int(raw[L.ASMBPE_TS_MERGES]) if status == EVERIFY else int(status), 0)
    table = ffi.buffer(merges_out, 2 * width * learned)[:]      # (M, 2) ids, as bytes
    narrow = N_BYTES + learned + N_SPECIAL <= MAX_VOCAB     # every id fits in u16
    if narrow and wide:
        table = _narrow_table(table)
    counts = ffi.buffer(counts_out, 8 * learned)[:]   # (live() keeps reading
                                                    # counts_out: not rebound)
    if status == EVERIFY:
        failed = TrainResult(table, counts, None, narrow)
        raise TrainError(_verify_message(L, raw, failed.merges, failed.counts), EVERIFY)
    if status < 0:
        raise _failed("training merges", "asmbpe_train", status)
    report("merge", learned, n_merges)

    stats = _stats(L, raw, seconds, train_call)
    result = TrainResult(table, counts, None, narrow, stats)
    if narrow:              # asmbpe's own u16 tokenizer, from the table as written
        result.tokenizer = Tokenizer._trained(table, pretok)
    else:                   # above 65,535 ids (harness.loaded and harness.vocab are
        from .loaded import trained_tokenizer   # imported for these only)
        result.tokenizer = trained_tokenizer(result.merges, pretok.name)
    stats.update(
        bytes_in=0, documents=0, chunks=chunks, unique_words=unique_words,
        merges=learned, merges_asked=n_merges, pretokenizer=pretok.name, count_threads=0,
        naive=bool(naive), verify=bool(verify),
    )
    if records is not None:
        stats["per_merge"] = records[:learned].copy()
    stats["seconds"]["total"] = time.perf_counter() - t_start
    return result


def _narrow_table(table: bytes) -> bytes:
    """(M, 2) u32 ids as bytes -> (M, 2) u16 (every id below 65,536)."""
    import array

    ids = array.array("I", table)
    return array.array("H", ids).tobytes()


def _status(status: int) -> str:
    return STATUS_TEXT.get(int(status), f"unknown status {int(status)}")


def _failed(phase: str, call: str, status: int) -> TrainError:
    """The error of the library's `call` that returned `status` (< 0) while `phase`:
    a TrainOutOfMemory for ENOMEM."""
    if status == ENOMEM:
        return TrainOutOfMemory(phase, f"{call}: ASMBPE_ENOMEM")
    return TrainError(f"{phase} failed: {_status(status)}", int(status))


def _stats(L, raw: np.ndarray, seconds: dict, train_call: float) -> dict:
    ts = {name: int(raw[getattr(L, "ASMBPE_TS_" + name)]) for name in (
        "CYC_LAYOUT", "CYC_PAIRS", "CYC_LOOP", "CYC_SCAN", "CYC_APPLY", "CYC_HEAP",
        "CYC_VERIFY", "CYC_COMPACT", "WORDS", "TOKENS", "PAIRS", "MERGES", "REWRITTEN",
        "COMPACTIONS", "THREADS", "PEAK_BYTES", "SOLO_MERGE", "NARROW", "PT_SLOTS",
        "PT_REHASHES")}
    cycles = dict(layout=ts["CYC_LAYOUT"], pairs=ts["CYC_PAIRS"], merge_loop=ts["CYC_LOOP"],
                  verify=ts["CYC_VERIFY"], scan=ts["CYC_SCAN"], apply=ts["CYC_APPLY"],
                  heap=ts["CYC_HEAP"], compact=ts["CYC_COMPACT"])
    top = cycles["layout"] + cycles["pairs"] + cycles["merge_loop"] + cycles["verify"]
    hz = top / train_call if train_call > 0 and top > 0 else 0.0
    threads = max(ts["THREADS"], 1)

    def sec(name: str, divide: int = 1) -> float:
        return cycles[name] / divide / hz if hz else 0.0

    seconds = dict(seconds)
    seconds.update(layout=sec("layout"), pairs=sec("pairs"), merge_loop=sec("merge_loop"),
                   scan=sec("scan", threads), apply=sec("apply"), heap=sec("heap"),
                   compact=sec("compact"), verify=sec("verify"), train_call=train_call)
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024   # KiB on Linux
    return dict(
        seconds=seconds, cycles=cycles, tsc_hz=hz,
        words=ts["WORDS"], tokens=ts["TOKENS"], distinct_pairs=ts["PAIRS"],
        rewrites=ts["REWRITTEN"], compactions=ts["COMPACTIONS"], threads=ts["THREADS"],
        solo_from_merge=None if ts["SOLO_MERGE"] == NONE else ts["SOLO_MERGE"],
        narrow_merges=ts["NARROW"],
        pair_table_slots=ts["PT_SLOTS"], pair_table_rehashes=ts["PT_REHASHES"],
        library_peak_bytes=ts["PEAK_BYTES"], max_rss_bytes=rss,
        peak_memory_bytes=max(ts["PEAK_BYTES"], rss),
    )


def _id_bytes(merges: np.ndarray) -> list[bytes]:
    table = [bytes([b]) for b in range(N_BYTES)]
    for a, b in merges.tolist():
        table.append(table[a] + table[b])
    return table


def _describe(ident: int, table: list[bytes]) -> str:
    return f"{ident} {table[ident]!r}" if ident < len(table) else f"{ident} (undefined)"


def _verify_message(L, raw: np.ndarray, merges: np.ndarray, counts: np.ndarray) -> str:
    """The first violation verify found, in words."""
    table = _id_bytes(merges)
    merge = int(raw[L.ASMBPE_TS_VERIFY_MERGE])
    pair = int(raw[L.ASMBPE_TS_VERIFY_PAIR])
    parts = []
    if merge != NONE and 0 < merge < len(counts):
        a, b = merges[merge].tolist()
        parts.append(f"merge {merge} ({_describe(a, table)}, {_describe(b, table)}) won with "
                     f"count {int(counts[merge])}, more than merge {merge - 1}'s "
                     f"{int(counts[merge - 1])} (winning counts must never go up)")
    elif merge != NONE:
        parts.append(f"merge {merge}: the winning count went up")
    if pair != NONE:
        a, b = pair & 0xFFFFFFFF, pair >> 32
        kept = int(raw[L.ASMBPE_TS_VERIFY_KEPT])
        true = int(raw[L.ASMBPE_TS_VERIFY_TRUE])
        parts.append(f"pair ({_describe(a, table)}, {_describe(b, table)}): the kept table "
                     f"says {kept}, a full recount gives {true}")
    return "verify failed after {} merges: {}".format(
        len(counts), "; ".join(parts) if parts else "no detail reported")
