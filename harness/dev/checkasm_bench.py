"""Cycle benchmarks of the assembly functions: `asmbpe check --bench`.

dav1d/FFmpeg checkasm's bench_new (STYLE.md §1, lesson 9), in asmbpe's terms:

- the timing loop runs inside the test library, in `asmbpe_bench_call`
  (asm/test/bench.asm): `lfence; rdtsc` before a sample's calls, `rdtscp; lfence`
  after, so no Python or cffi cost is timed;
- the calls take their arguments from two (or more) argument sets in turn, i.e. two
  input buffers alternate, so a sample measures throughput on data the previous call
  did not just leave in L1 (dav1d's `alternate()`);
- every function gets >= 1000 samples (after a few discarded warm-up samples); the
  samples above the 90th percentile are dropped (interrupts, page faults, the other
  process on a shared core) and the rest averaged;
- the trampoline's own cost per call, measured by benching `asmbpe_bench_empty` the
  same way, its samples taken in turn with each case's (PAIR_BLOCK at a time, so that
  a slow spell of the shared machine raises both), is subtracted;
- figures are TSC ticks ("cycles" at the TSC's fixed rate, measured against the wall
  clock: `tsc_hz`), per call and per input byte, and MB/s (1e6 bytes) at that rate.

One `@bench("asmbpe_<fn>")` entry per exported function (`BENCHES`); an entry may
return several cases (memeq at 8, 64 and 4096 bytes; encode with and without the
cache). Inputs are fixed: the bundled sample datasets/kjv.txt, or seeded text when it
is absent. The library runs on one thread throughout (threads = 1), pinned to one CPU.

`save(results, path)` writes a baseline JSON; `compare(results, baseline)` gives each
case's ratio new/baseline (below 1: faster). `asmbpe check --bench --save base.json`,
edit, rebuild, `asmbpe check --bench --baseline base.json`.
"""
from __future__ import annotations

import fnmatch
import json
import os
import random
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import numpy as np

from .._lib import ROOT, checkasm_lib, ffi, fn_address, lib
from ..buffers import Padded

SAMPLES = 1000              # timed samples per case (dav1d: 4096, x264: 2000)
WARMUP = 16                 # samples run and discarded first
KEEP_PERCENTILE = 90        # samples above this percentile are dropped
PAIR_BLOCK = 256            # samples per turn when a case and the empty call alternate
NONE64 = (1 << 64) - 1


# --------------------------------------------------------------------------- cases

@dataclass
class Case:
    """One benchmarked call shape.

    name:        shown in the table and the key of the baseline JSON;
    func:        the exported symbol called;
    sets:        argument sets (each up to 8 ints); call k uses sets[k % len(sets)];
    nbytes:      input bytes per call (0: no per-byte figures);
    per_sample:  calls per timed sample (4 as dav1d does, 16 for the shortest
                 functions, 1 for long ones);
    batch:       samples per trampoline call when the calls' return values must be
                 handed to `cleanup` (constructors): bounds what lives at once;
    cleanup:     called with each batch's return values (uint64 array);
    keep:        objects that must stay alive while the case runs (buffers);
    after:       called once when the case is done (frees tables, encoders).
    """

    name: str
    func: str
    sets: list
    nbytes: int = 0
    per_sample: int = 1
    batch: int = 0
    cleanup: Callable | None = None
    keep: list = field(default_factory=list, repr=False)
    after: Callable | None = None


@dataclass
class Result:
    name: str
    func: str
    cycles: float               # per call, trampoline overhead subtracted
    median: float               # per call, median sample, overhead subtracted
    nbytes: int
    samples: int
    kept: int

    def cycles_per_byte(self) -> float | None:
        return self.cycles / self.nbytes if self.nbytes else None

    def mb_per_s(self, tsc_hz: float) -> float | None:
        if not self.nbytes or self.cycles <= 0:
            return None
        return self.nbytes * tsc_hz / self.cycles / 1e6


BENCHES: dict[str, Callable] = {}


def bench(name: str):
    """Register the bench of one exported function: fn(env) -> list[Case]."""
    def deco(fn):
        BENCHES[name] = fn
        return fn
    return deco


def _ptr(x) -> int:
    if isinstance(x, np.ndarray):
        x = ffi.from_buffer(x)
    return int(ffi.cast("uintptr_t", x))


class Env:
    """Fixed inputs shared by the cases (built once, lazily)."""

    def __init__(self, samples: int = SAMPLES):
        self.L = lib()
        self.samples = samples
        kjv = ROOT / "datasets" / "kjv.txt"
        if kjv.is_file():
            self.text = kjv.read_bytes()
        else:                               # a seeded stand-in of the same kind
            rng = random.Random(1)
            words = [b"the", b"and", b"of", b"LORD", b"unto", b"him", b"said", b"1:1",
                     b"shall", b"thee", b"children", b"Israel", b"\n", b",", b"."]
            self.text = b" ".join(rng.choice(words) for _ in range(250_000))
        self._tables = {}
        self._merges = None

    def slice(self, k: int, n: int) -> bytes:
        """The k-th fixed slice of n bytes (k = 0, 1: the two alternated buffers),
        starting at a line start so that each looks like the rest of the text."""
        start = (k * len(self.text) // 3) % max(len(self.text) - n, 1)
        nl = self.text.find(b"\n", start)
        start = nl + 1 if 0 <= nl < len(self.text) - n else start
        return self.text[start:start + n]

    def docs(self, k: int, n: int, doc: int = 4096) -> tuple[Padded, np.ndarray]:
        data = self.slice(k, n)
        ends = np.array(list(range(doc, len(data), doc)) + [len(data)], dtype=np.uint64)
        return Padded(data), ends

    def table(self, k: int, n: int):
        """A word table that counted slice k of n bytes (freed by close())."""
        key = (k, n)
        if key not in self._tables:
            buf, ends = self.docs(k, n)
            t = self.L.asmbpe_wordtab_new()
            self.L.asmbpe_count_words(t, buf.ptr, ffi.from_buffer("uint64_t[]", ends),
                                      len(ends), 1, 256, 1)
            self._tables[key] = t
        return self._tables[key]

    def merges(self) -> np.ndarray:
        """512 merges learned from 256 KB of the text (uint32 left | right << 16)."""
        if self._merges is None:
            t = self.table(0, 1 << 18)
            m = np.zeros(512, dtype=np.uint32)
            c = np.zeros(512, dtype=np.uint64)
            stats = np.zeros(int(self.L.ASMBPE_TS_COUNT), dtype=np.uint64)
            got = self.L.asmbpe_train(t, 512, 1, 1, 0, ffi.from_buffer("uint32_t[]", m),
                                      ffi.from_buffer("uint64_t[]", c),
                                      ffi.from_buffer("uint64_t[]", stats))
            self._merges = m[:max(got, 0)].copy()
        return self._merges

    def close(self) -> None:
        for t in self._tables.values():
            self.L.asmbpe_wordtab_free(t)
        self._tables.clear()


# --------------------------------------------------------------------------- entries

@bench("asmbpe_cpu_flags")
def bench_cpu_flags(env: Env) -> list[Case]:
    return [Case("asmbpe_cpu_flags", "asmbpe_cpu_flags", [[]], per_sample=4)]


@bench("asmbpe_memeq")
def bench_memeq(env: Env) -> list[Case]:
    cases = []
    for n in (8, 64, 4096):
        bufs = [Padded(env.slice(k, n)) for k in range(2)] + [Padded(env.slice(k, n)) for k in range(2)]
        sets = [[_ptr(bufs[0].ptr), _ptr(bufs[2].ptr), n], [_ptr(bufs[1].ptr), _ptr(bufs[3].ptr), n]]
        cases.append(Case(f"asmbpe_memeq n={n}", "asmbpe_memeq", sets, n, 16 if n < 1024 else 4,
                          keep=bufs))
    return cases


@bench("asmbpe_fnv1a64")
def bench_fnv1a64(env: Env) -> list[Case]:
    """A tokenizer.bin merge table's size (4 bytes a merge: 32,496 merges)."""
    n = 4 * 32496
    bufs = [Padded(env.slice(k, n)) for k in range(2)]
    sets = [[_ptr(b.ptr), n] for b in bufs]
    return [Case(f"asmbpe_fnv1a64 n={n}", "asmbpe_fnv1a64", sets, n, 1, keep=bufs)]


@bench("asmbpe_pretok_next")
def bench_pretok_next(env: Env) -> list[Case]:
    """One chunk per call, walking every chunk start of two 4 KB buffers in turn."""
    from ..pretok import split_offsets

    bufs, sets, total = [], [], 0
    for k in range(2):
        data = env.slice(k, 4096)
        buf = Padded(data)
        bufs.append(buf)
        ends = [int(e) for e in split_offsets(data, pretokenizer="seed")]
        for s in [0] + ends[:-1]:
            sets.append([_ptr(buf.ptr), len(data), s, 1])
        total += len(data)
    return [Case("asmbpe_pretok_next (per chunk)", "asmbpe_pretok_next", sets,
                 round(total / len(sets)), 16, keep=bufs)]


@bench("asmbpe_split_offsets")
def bench_split_offsets(env: Env) -> list[Case]:
    n = 1 << 16
    bufs = [Padded(env.slice(k, n)) for k in range(2)]
    out = np.zeros(n, dtype=np.uint64)
    sets = [[_ptr(b.ptr), n, 0, _ptr(out), n, 1] for b in bufs]
    return [Case(f"asmbpe_split_offsets {n >> 10} KB", "asmbpe_split_offsets", sets, n,
                 keep=[bufs, out])]


@bench("asmbpe_count_words")
def bench_count_words(env: Env) -> list[Case]:
    """Counting into a warm table (its words already there: the steady state of a
    long training's later batches), 1 thread, 4 KB documents."""
    n = 1 << 15
    L = env.L
    t = L.asmbpe_wordtab_new()
    inputs = [env.docs(k, n) for k in range(2)]
    sets = [[_ptr(t), _ptr(b.ptr), _ptr(e), len(e), 1, 256, 1] for b, e in inputs]
    for b, e in inputs:                     # warm: every word already in the table
        L.asmbpe_count_words(t, b.ptr, ffi.from_buffer("uint64_t[]", e), len(e), 1, 256, 1)
    return [Case(f"asmbpe_count_words {n >> 10} KB", "asmbpe_count_words", sets, n,
                 keep=inputs, after=lambda: L.asmbpe_wordtab_free(t))]


def _exported(env: Env, k: int, n: int):
    """(bytes Padded, ends, counts, key bytes) of the table of slice k."""
    t = env.table(k, n)
    L = env.L
    nb = int(L.asmbpe_wordtab_key_bytes(t))
    nw = int(L.asmbpe_wordtab_size(t))
    raw = np.zeros(nb + 64, dtype=np.uint8)
    ends = np.zeros(max(nw, 1), dtype=np.uint64)
    counts = np.zeros(max(nw, 1), dtype=np.uint64)
    L.asmbpe_wordtab_export(t, ffi.from_buffer("uint8_t[]", raw), ffi.from_buffer("uint64_t[]", ends),
                            ffi.from_buffer("uint64_t[]", counts))
    return Padded(raw[:nb].tobytes()), ends[:nw], counts[:nw], nb


@bench("asmbpe_wordtab_export")
def bench_wordtab_export(env: Env) -> list[Case]:
    n = 1 << 16
    sets, keep, nbytes = [], [], 0
    for k in range(2):
        t = env.table(k, n)
        nb = int(env.L.asmbpe_wordtab_key_bytes(t))
        nw = int(env.L.asmbpe_wordtab_size(t))
        arrays = [np.zeros(nb + 64, dtype=np.uint8), np.zeros(nw + 1, dtype=np.uint64),
                  np.zeros(nw + 1, dtype=np.uint64)]
        keep.append(arrays)
        sets.append([_ptr(t)] + [_ptr(a) for a in arrays])
        nbytes += nb
    return [Case(f"asmbpe_wordtab_export ({nbytes // 2} word bytes)", "asmbpe_wordtab_export",
                 sets, nbytes // 2, keep=keep)]


@bench("asmbpe_wordtab_add")
def bench_wordtab_add(env: Env) -> list[Case]:
    """Adding exported words into a warm table (all of them already there)."""
    n = 1 << 16
    L = env.L
    t = L.asmbpe_wordtab_new()
    sets, keep, nbytes = [], [], 0
    for k in range(2):
        buf, ends, counts, nb = _exported(env, k, n)
        keep.append((buf, ends, counts))
        sets.append([_ptr(t), _ptr(buf.ptr), _ptr(ends), _ptr(counts), len(ends)])
        L.asmbpe_wordtab_add(t, buf.ptr, ffi.from_buffer("uint64_t[]", ends),
                             ffi.from_buffer("uint64_t[]", counts), len(ends))
        nbytes += nb
    return [Case(f"asmbpe_wordtab_add ({nbytes // 2} word bytes)", "asmbpe_wordtab_add", sets,
                 nbytes // 2, keep=keep, after=lambda: L.asmbpe_wordtab_free(t))]


def _accessor(name: str):
    def fn(env: Env) -> list[Case]:
        sets = [[_ptr(env.table(k, 1 << 14))] for k in range(2)]
        return [Case(name, name, sets, per_sample=16)]
    return fn


for _name in ("asmbpe_wordtab_size", "asmbpe_wordtab_key_bytes", "asmbpe_wordtab_total"):
    bench(_name)(_accessor(_name))


@bench("asmbpe_wordtab_new")
def bench_wordtab_new(env: Env) -> list[Case]:
    L = env.L

    def free(rets):
        for p in rets.tolist():
            if p:
                L.asmbpe_wordtab_free(ffi.cast("asmbpe_wordtab *", p))
    return [Case("asmbpe_wordtab_new", "asmbpe_wordtab_new", [[]], batch=100, cleanup=free)]


@bench("asmbpe_wordtab_free")
def bench_wordtab_free(env: Env) -> list[Case]:
    """Freeing empty tables: one fresh table per call (as many sets as calls)."""
    L = env.L
    made = [L.asmbpe_wordtab_new() for _ in range(env.samples + WARMUP)]
    return [Case("asmbpe_wordtab_free (empty)", "asmbpe_wordtab_free", [[_ptr(t)] for t in made],
                 keep=made)]


def _train_cases(env: Env, fn: str, merge_type, flags: int, label: str) -> list[Case]:
    """Layout, pair counts and 64 merges of the words of 16 KB, 1 thread."""
    n, m = 1 << 14, 64
    sets, keep = [], []
    for k in range(2):
        arrays = [np.zeros(m, dtype=merge_type), np.zeros(m, dtype=np.uint64),
                  np.zeros(int(env.L.ASMBPE_TS_COUNT), dtype=np.uint64)]
        keep.append(arrays)
        sets.append([_ptr(env.table(k, n)), m, 1, 1, flags] + [_ptr(a) for a in arrays])
    return [Case(f"{fn} {n >> 10} KB, {m} merges{label}", fn, sets, n, keep=keep)]


@bench("asmbpe_train")
def bench_train(env: Env) -> list[Case]:
    return _train_cases(env, "asmbpe_train", np.uint32, 0, "")


@bench("asmbpe_train32")
def bench_train32(env: Env) -> list[Case]:
    """On u32 tokens throughout (ASMBPE_WIDE_ONLY: the default would learn these few
    merges on u16 tokens, as asmbpe_train)."""
    return _train_cases(env, "asmbpe_train32", np.uint64, int(env.L.ASMBPE_WIDE_ONLY),
                        ", u32 tokens")


@bench("asmbpe_enc_new")
def bench_enc_new(env: Env) -> list[Case]:
    L = env.L
    m = env.merges()

    def free(rets):
        for p in rets.tolist():
            if p:
                L.asmbpe_enc_free(ffi.cast("asmbpe_enc *", p))
    return [Case(f"asmbpe_enc_new ({len(m)} merges)", "asmbpe_enc_new", [[_ptr(m), len(m)]],
                 batch=100, cleanup=free, keep=[m])]


@bench("asmbpe_enc_free")
def bench_enc_free(env: Env) -> list[Case]:
    L = env.L
    m = env.merges()
    made = [L.asmbpe_enc_new(ffi.from_buffer("uint32_t[]", m), len(m)) for _ in range(env.samples + WARMUP)]
    return [Case("asmbpe_enc_free (unused encoder)", "asmbpe_enc_free", [[_ptr(e)] for e in made],
                 keep=[made, m])]


@bench("asmbpe_enc_trim")
def bench_enc_trim(env: Env) -> list[Case]:
    return [Case("asmbpe_enc_trim (pool empty)", "asmbpe_enc_trim", [[]], per_sample=16)]


def _encoder(env: Env):
    L = env.L
    m = env.merges()
    e = L.asmbpe_enc_new(ffi.from_buffer("uint32_t[]", m), len(m))
    return e, m


@bench("asmbpe_encode")
def bench_encode(env: Env) -> list[Case]:
    """16 KB in 4 KB documents, 1 thread, 512 merges: through the (warm) chunk cache
    and without it. (The trampoline passes 8 arguments: `front`, the ninth, is not
    read without ASMBPE_ENC_CLAIMS.)"""
    n = 1 << 14
    L = env.L
    cases = []
    for flags, what in ((0, "cached"), (int(L.ASMBPE_ENC_NOCACHE), "no cache")):
        e, m = _encoder(env)
        inputs = [env.docs(k, n) for k in range(2)]
        outs = [(np.zeros(n + 64, dtype=np.uint16), np.zeros(len(ends), dtype=np.uint64))
                for _, ends in inputs]
        sets = [[_ptr(e), _ptr(b.ptr), _ptr(ends), len(ends), 1, flags, _ptr(o), _ptr(c)]
                for (b, ends), (o, c) in zip(inputs, outs)]
        cases.append(Case(f"asmbpe_encode {n >> 10} KB, {what}", "asmbpe_encode", sets, n,
                          keep=[inputs, outs, m], after=lambda e=e: L.asmbpe_enc_free(e)))
    return cases


@bench("asmbpe_encode_docs")
def bench_encode_docs(env: Env) -> list[Case]:
    """asmbpe_encode's cached case with the documents by pointer (each thread copies
    the one it encodes into its padded buffer)."""
    n = 1 << 14
    L = env.L
    e, m = _encoder(env)
    inputs = [env.docs(k, n) for k in range(2)]
    tables = [np.concatenate(([0], ends[:-1])).astype(np.uint64) + np.uint64(_ptr(b.ptr))
              for b, ends in inputs]
    outs = [(np.zeros(n + 64, dtype=np.uint16), np.zeros(len(ends), dtype=np.uint64))
            for _, ends in inputs]
    sets = [[_ptr(e), _ptr(t), _ptr(ends), len(ends), 1, 0, _ptr(o), _ptr(c)]
            for t, (_, ends), (o, c) in zip(tables, inputs, outs)]
    return [Case(f"asmbpe_encode_docs {n >> 10} KB, cached", "asmbpe_encode_docs", sets, n,
                 keep=[inputs, tables, outs, m], after=lambda: L.asmbpe_enc_free(e))]


@bench("asmbpe_decode")
def bench_decode(env: Env) -> list[Case]:
    """The ids of 16 KB of text back to bytes (512 merges; the table built before)."""
    n = 1 << 14
    L = env.L
    e, m = _encoder(env)
    sets, keep = [], [m]
    for k in range(2):
        buf, ends = env.docs(k, n)
        ids = np.zeros(n + 64, dtype=np.uint16)
        counts = np.zeros(len(ends), dtype=np.uint64)
        got = L.asmbpe_encode(e, buf.ptr, ffi.from_buffer("uint64_t[]", ends), len(ends), 1, 0,
                              ffi.from_buffer("uint16_t[]", ids),
                              ffi.from_buffer("uint64_t[]", counts), ffi.NULL)
        out = np.zeros(n + 64, dtype=np.uint8)
        sets.append([_ptr(e), _ptr(ids), got, _ptr(out), len(out)])
        keep += [buf, ends, ids, counts, out]
    L.asmbpe_decode(e, ffi.from_buffer("uint16_t[]", keep[3]), 0,
                    ffi.from_buffer("uint8_t[]", keep[-1]), 0)     # builds the table
    return [Case(f"asmbpe_decode {n >> 10} KB", "asmbpe_decode", sets, n, keep=keep,
                 after=lambda: L.asmbpe_enc_free(e))]


@bench("asmbpe_enc_stats")
def bench_enc_stats(env: Env) -> list[Case]:
    L = env.L
    e, m = _encoder(env)
    out = np.zeros(int(L.ASMBPE_ES_COUNT) + 8, dtype=np.uint64)
    sets = [[_ptr(e), NONE64, _ptr(out)]]        # all threads summed
    return [Case("asmbpe_enc_stats", "asmbpe_enc_stats", sets, per_sample=4, keep=[out, m],
                 after=lambda: L.asmbpe_enc_free(e))]


# the rank encoder (asm/encode_rank_*.asm): a vocabulary of the 512 merges as ranks
def _rank_tables(env: Env):
    """(pairs rows, byte ids, token bytes, token offsets) of env.merges() as a rank
    vocabulary (harness.vocab.Vocab; whole chunks on)."""
    from ..vocab import Vocab, byte_ids, pair_table
    m = env.merges()
    tokens = [bytes([b]) for b in range(256)]
    for x in m.tolist():
        tokens.append(tokens[x & 0xFFFF] + tokens[x >> 16])
    v = Vocab("bench", tokens, "nanochat", {}, None, True)
    rows = np.ascontiguousarray(np.stack(pair_table(v), axis=1), dtype=np.uint32)
    offsets = np.zeros(len(tokens) + 1, dtype=np.uint64)
    np.cumsum([len(t) for t in tokens], out=offsets[1:])
    blob = np.frombuffer(b"".join(tokens), dtype=np.uint8).copy()
    return rows, byte_ids(v), blob, offsets


def _renc_args(tables) -> list[int]:
    rows, ids, blob, offsets = tables
    from ..rank import RENC_RANKS, RENC_WHOLE      # a rank file's flags
    return [_ptr(rows), len(rows), _ptr(ids), _ptr(blob), _ptr(offsets), len(offsets) - 1,
            RENC_WHOLE | RENC_RANKS]


def _rank_encoder(env: Env):
    t = _rank_tables(env)
    return env.L.asmbpe_renc_new(*[ffi.cast("void *", a) if i in (0, 2, 3, 4) else a
                                   for i, a in enumerate(_renc_args(t))]), t


@bench("asmbpe_renc_new")
def bench_renc_new(env: Env) -> list[Case]:
    L = env.L
    t = _rank_tables(env)

    def free(rets):
        for p in rets.tolist():
            if p:
                L.asmbpe_renc_free(ffi.cast("asmbpe_renc *", p))
    return [Case(f"asmbpe_renc_new ({len(t[0])} pairs)", "asmbpe_renc_new", [_renc_args(t)],
                 batch=100, cleanup=free, keep=[t])]


@bench("asmbpe_rank_pairs")
def bench_rank_pairs(env: Env) -> list[Case]:
    """The pair table of the 768-token rank vocabulary (every split of every token)."""
    rows, _, blob, offsets = _rank_tables(env)
    from ..rank import pair_rows_room
    n = len(offsets) - 1
    out = np.zeros((pair_rows_room(offsets), 4), dtype=np.uint32)
    return [Case(f"asmbpe_rank_pairs ({n} tokens, {len(rows)} pairs)", "asmbpe_rank_pairs",
                 [[_ptr(blob), _ptr(offsets), n, _ptr(out)]], keep=[blob, offsets, out])]


@bench("asmbpe_renc_free")
def bench_renc_free(env: Env) -> list[Case]:
    made = [_rank_encoder(env) for _ in range(env.samples + WARMUP)]
    return [Case("asmbpe_renc_free (unused encoder)", "asmbpe_renc_free",
                 [[_ptr(e)] for e, _ in made], keep=[made])]


@bench("asmbpe_renc_chunk")
def bench_renc_chunk(env: Env) -> list[Case]:
    """Chunks of the text: a word through the cache, and 200 bytes (merged each time:
    longer than the cache's 32)."""
    L = env.L
    e, t = _rank_encoder(env)
    cases = []
    for what, chunk in (("cached word", b" children"), ("200 bytes", env.slice(0, 200))):
        buf = Padded(chunk)
        out = np.zeros(len(chunk) + 8, dtype=np.uint32)
        L.asmbpe_renc_chunk(e, buf.ptr, len(chunk), ffi.from_buffer("uint32_t[]", out))
        cases.append(Case(f"asmbpe_renc_chunk {what}", "asmbpe_renc_chunk",
                          [[_ptr(e), _ptr(buf.ptr), len(chunk), _ptr(out)]], len(chunk),
                          per_sample=4, keep=[buf, out, t]))
    cases[-1].after = lambda: L.asmbpe_renc_free(e)
    return cases


@bench("asmbpe_renc_text")
def bench_renc_text(env: Env) -> list[Case]:
    n = 1 << 14
    L = env.L
    e, t = _rank_encoder(env)
    bufs = [Padded(env.slice(k, n)) for k in range(2)]
    outs = [np.zeros(n, dtype=np.uint32) for _ in bufs]
    sets = [[_ptr(e), _ptr(b.ptr), n, 2, _ptr(o), n] for b, o in zip(bufs, outs)]
    return [Case(f"asmbpe_renc_text {n >> 10} KB (nanochat)", "asmbpe_renc_text", sets, n,
                 keep=[bufs, outs, t], after=lambda: L.asmbpe_renc_free(e))]


@bench("asmbpe_renc_encode")
def bench_renc_encode(env: Env) -> list[Case]:
    n = 1 << 14
    L = env.L
    e, t = _rank_encoder(env)
    inputs = [env.docs(k, n) for k in range(2)]
    outs = [(np.zeros(n, dtype=np.uint32), np.zeros(len(ends), dtype=np.uint64))
            for _, ends in inputs]
    sets = [[_ptr(e), _ptr(b.ptr), _ptr(ends), len(ends), 1, 2, _ptr(o), _ptr(c)]
            for (b, ends), (o, c) in zip(inputs, outs)]
    return [Case(f"asmbpe_renc_encode {n >> 10} KB in 4 KB documents, 1 thread",
                 "asmbpe_renc_encode", sets, n, keep=[inputs, outs, t],
                 after=lambda: L.asmbpe_renc_free(e))]


@bench("asmbpe_renc_encode_docs")
def bench_renc_encode_docs(env: Env) -> list[Case]:
    n = 1 << 14
    L = env.L
    e, t = _rank_encoder(env)
    inputs = [env.docs(k, n) for k in range(2)]
    tables = [np.concatenate(([0], ends[:-1])).astype(np.uint64) + np.uint64(_ptr(b.ptr))
              for b, ends in inputs]
    outs = [(np.zeros(n, dtype=np.uint32), np.zeros(len(ends), dtype=np.uint64))
            for _, ends in inputs]
    sets = [[_ptr(e), _ptr(tab), _ptr(ends), len(ends), 1, 2, _ptr(o), _ptr(c)]
            for tab, (_, ends), (o, c) in zip(tables, inputs, outs)]
    return [Case(f"asmbpe_renc_encode_docs {n >> 10} KB in 4 KB documents by pointer, 1 thread",
                 "asmbpe_renc_encode_docs", sets, n, keep=[inputs, tables, outs, t],
                 after=lambda: L.asmbpe_renc_free(e))]


@bench("asmbpe_renc_decode")
def bench_renc_decode(env: Env) -> list[Case]:
    """The ids of 16 KB of text back to bytes."""
    n = 1 << 14
    L = env.L
    e, t = _rank_encoder(env)
    sets, keep = [], [t]
    for k in range(2):
        buf = Padded(env.slice(k, n))
        ids = np.zeros(n, dtype=np.uint32)
        got = L.asmbpe_renc_text(e, buf.ptr, n, 2, ffi.from_buffer("uint32_t[]", ids), n)
        out = np.zeros(n + 64, dtype=np.uint8)
        sets.append([_ptr(e), _ptr(ids), got, _ptr(out), len(out)])
        keep += [buf, ids, out]
    return [Case(f"asmbpe_renc_decode {n >> 10} KB", "asmbpe_renc_decode", sets, n, keep=keep,
                 after=lambda: L.asmbpe_renc_free(e))]


@bench("asmbpe_mapped_peak")
def bench_mapped_peak(env: Env) -> list[Case]:
    return [Case("asmbpe_mapped_peak", "asmbpe_mapped_peak", [[0]], per_sample=16)]


# --------------------------------------------------------------------------- timing

def tsc_hz(seconds: float = 0.05) -> float:
    """The TSC's rate, measured against time.perf_counter over `seconds`."""
    T = checkasm_lib()
    t0, c0 = time.perf_counter(), T.asmbpe_bench_rdtsc()
    time.sleep(seconds)
    c1, t1 = T.asmbpe_bench_rdtsc(), time.perf_counter()
    return (c1 - c0) / (t1 - t0)


def _sample(fn_ptr, sets: list, samples: int, per_sample: int, want_rets: bool):
    """Run the trampoline: (cycles per sample, return values or None)."""
    T = checkasm_lib()
    args = np.zeros((len(sets), 8), dtype=np.uint64)
    for i, s in enumerate(sets):
        args[i, :len(s)] = [int(x) & NONE64 for x in s]
    cycles = np.zeros(samples, dtype=np.uint64)
    rets = np.zeros(samples * per_sample, dtype=np.uint64) if want_rets else None
    T.asmbpe_bench_call(fn_ptr, ffi.from_buffer("uint64_t[]", args), len(sets), samples,
                        per_sample, ffi.from_buffer("uint64_t[]", cycles),
                        ffi.from_buffer("uint64_t[]", rets) if want_rets else ffi.NULL)
    return cycles, rets


def _symbol(name: str):
    for handle in (lib(), checkasm_lib()):
        try:
            return fn_address(handle, name)
        except (AttributeError, KeyError):
            continue
    raise KeyError(name)


def measure(case: Case, samples: int = SAMPLES) -> tuple[np.ndarray, int]:
    """Per-call cycles of every timed sample (warm-up dropped), and the samples taken."""
    per_call, _, n = _measure(case, samples, paired=False)
    return per_call, n


def measure_paired(case: Case, samples: int = SAMPLES) -> tuple[np.ndarray, np.ndarray, int]:
    """measure, and the trampoline's own cost per call beside it: asmbpe_bench_empty
    at the case's calls per sample, its samples taken in turn with the case's,
    PAIR_BLOCK at a time, so that both see the same conditions (a slow spell of the
    VM raises both, and their difference stays). (case per call, empty per call,
    samples)."""
    return _measure(case, samples, paired=True)


def _measure(case: Case, samples: int, paired: bool):
    fn = _symbol(case.func)
    empty = _symbol("asmbpe_bench_empty") if paired else None
    per = case.per_sample
    block = case.batch or (PAIR_BLOCK if paired else samples + WARMUP)
    got, idle = [], []
    left, calls = samples + WARMUP, 0
    while left > 0:
        k = min(block, left)
        at = calls % len(case.sets)             # call j uses sets[j % len], across
        sets = case.sets[at:] + case.sets[:at]  # blocks (one table per call: freed once)
        cyc, rets = _sample(fn, sets, k, per, bool(case.batch))
        calls += k * per
        if case.batch:
            case.cleanup(rets)
        got.append(cyc)
        if paired:
            idle.append(_sample(empty, [[0] * 8, [0] * 8], k, per, False)[0])
        left -= k
    cyc = np.concatenate(got)[WARMUP:].astype(np.float64) / per
    empty_cyc = np.concatenate(idle)[WARMUP:].astype(np.float64) / per if paired else None
    return cyc, empty_cyc, samples


def summarize(per_call: np.ndarray) -> tuple[float, float, int]:
    """(mean of the samples up to the KEEP_PERCENTILE-th percentile, median, kept)."""
    cut = np.percentile(per_call, KEEP_PERCENTILE)
    kept = per_call[per_call <= cut]
    return float(kept.mean()), float(np.median(per_call)), int(len(kept))


def overhead(samples: int = SAMPLES, per_sample: int = 1) -> float:
    """The trampoline's own cost per call: asmbpe_bench_empty benched the same way."""
    case = Case("empty", "asmbpe_bench_empty", [[0] * 8, [0] * 8], per_sample=per_sample)
    return summarize(measure(case, samples)[0])[0]


def _pin() -> set | None:
    """Pin this thread to the CPU it is on (restored by _unpin)."""
    try:
        old = os.sched_getaffinity(0)
        cpu = min(old)
        try:
            with open("/proc/self/stat") as f:
                here = int(f.read().rsplit(")", 1)[1].split()[37])
            if here in old:
                cpu = here
        except (OSError, ValueError, IndexError):
            pass
        os.sched_setaffinity(0, {cpu})
        return old
    except (AttributeError, OSError):
        return None


def run(pattern: str = "*", samples: int = SAMPLES) -> tuple[list[Result], dict]:
    """Bench every registered function whose name matches pattern. Returns the
    results and the run's info (tsc_hz, overhead per call, cpu, samples)."""
    from .bench import cpu_model

    names = [n for n in BENCHES if fnmatch.fnmatch(n, pattern)]
    env = Env(samples)
    old = _pin()
    results = []
    try:
        hz = tsc_hz()
        paired: dict[int, list[float]] = {}     # calls per sample -> each case's overhead
        for name in names:
            for case in BENCHES[name](env):
                try:
                    per_call, empty, n = measure_paired(case, samples)
                finally:
                    if case.after is not None:
                        case.after()
                mean, med, kept = summarize(per_call)
                o = summarize(empty)[0]
                paired.setdefault(case.per_sample, []).append(o)
                results.append(Result(case.name, case.func, max(mean - o, 0.0),
                                      max(med - o, 0.0), case.nbytes, n, kept))
        if 1 not in paired:                     # (the JSON's overhead_cycles)
            paired[1] = [overhead(samples, 1)]
    finally:
        env.close()
        if old is not None:
            os.sched_setaffinity(0, old)
    over = {k: float(np.median(v)) for k, v in paired.items()}
    info = dict(tsc_hz=hz, overhead_cycles=over[1],
                overhead_by_calls_per_sample={str(k): round(v, 2) for k, v in sorted(over.items())},
                samples=samples, cpu=cpu_model(), keep_percentile=KEEP_PERCENTILE)
    return results, info


# --------------------------------------------------------------------------- output

def _git_commit() -> str | None:
    try:
        r = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT,
                           capture_output=True, text=True, timeout=5)
        return r.stdout.strip() or None
    except (OSError, subprocess.SubprocessError):
        return None


def to_json(results: list[Result], info: dict) -> dict:
    hz = info["tsc_hz"]
    return dict(
        version=1, date=time.strftime("%Y-%m-%dT%H:%M:%S"), commit=_git_commit(), **info,
        results={r.name: dict(func=r.func, cycles_per_call=round(r.cycles, 2),
                              median_cycles_per_call=round(r.median, 2), bytes_per_call=r.nbytes,
                              cycles_per_byte=(round(r.cycles_per_byte(), 4)
                                               if r.nbytes else None),
                              mb_per_s=(round(r.mb_per_s(hz), 1) if r.mb_per_s(hz) else None),
                              samples=r.samples, kept=r.kept)
                 for r in results})


def save(results: list[Result], info: dict, path) -> None:
    """Write the baseline JSON (through a temporary name and a rename)."""
    from ..files import write_atomic
    write_atomic(path, json.dumps(to_json(results, info), indent=1) + "\n")


class BaselineError(ValueError):
    pass


def load_baseline(path) -> dict:
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except OSError as e:
        raise BaselineError(f"{path}: cannot read: {e.strerror or e}") from None
    except ValueError as e:
        raise BaselineError(f"{path}: not a bench JSON: {e}") from None
    if not isinstance(data, dict) or not isinstance(data.get("results"), dict):
        raise BaselineError(f"{path}: not a bench JSON (no \"results\")")
    return data


def compare(results: list[Result], baseline: dict) -> dict[str, float | None]:
    """name -> cycles / baseline cycles (None: not in the baseline)."""
    out = {}
    for r in results:
        b = baseline["results"].get(r.name)
        base = b.get("cycles_per_call") if isinstance(b, dict) else None
        out[r.name] = r.cycles / base if base else None
    return out


def _overheads(info: dict) -> str:
    by = info.get("overhead_by_calls_per_sample") or {"1": info["overhead_cycles"]}
    return ", ".join(f"{v:.1f} at {k} call{'s' if k != '1' else ''}/sample" for k, v in by.items())


def lines(results: list[Result], info: dict, baseline: dict | None = None,
          baseline_name: str = "") -> list[str]:
    hz = info["tsc_hz"]
    ratios = compare(results, baseline) if baseline else {}
    out = [f"bench: cycles = TSC ticks at {hz / 1e9:.3f} GHz (measured), {info['cpu']}; "
           f"{info['samples']} samples per function, slowest {100 - info['keep_percentile']}% "
           f"dropped, the trampoline's cost per call subtracted ({_overheads(info)})"]
    if baseline:
        out.append(f"baseline: {baseline_name} (commit {baseline.get('commit') or '?'}, "
                   f"{baseline.get('date', '?')}); ratio = cycles now / cycles then, < 1 is faster")
    head = f"  {'function':<44} {'cycles/call':>12} {'cycles/byte':>11} {'MB/s':>9}"
    out.append(head + ("   vs baseline" if baseline else ""))
    for r in results:
        cpb = r.cycles_per_byte()
        mbs = r.mb_per_s(hz)
        row = (f"  {r.name:<44} {r.cycles:12.1f} "
               f"{(f'{cpb:.3f}' if cpb is not None else '-'):>11} "
               f"{(f'{mbs:.0f}' if mbs is not None else '-'):>9}")
        if baseline:
            q = ratios.get(r.name)
            row += (f"   {q:5.2f}x ({(q - 1) * 100:+.0f}%)" if q is not None else "   new")
        out.append(row)
    if baseline:
        gone = sorted(set(baseline["results"]) - {r.name for r in results})
        if gone:
            out.append(f"  (in the baseline, not run now: {', '.join(gone)})")
    return out
