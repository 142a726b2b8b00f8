"""The encoder measurements of docs/OPTIMIZATION_LOG.md (E-rows), one process per run:

    python docs/encode_micro.py MODE [--lib PATH] [--tokenizer tok100.bin] [--threads N]

MODE:
  e100   the first 100 MB of english.parquet, a new encoder per run (no cache has
         seen the text): wall seconds of encode_many, its profile phases (summed
         over the threads) and the time outside the threads (wall minus the slowest
         thread: Python, starting the threads, the gather of two or more)
  wall   the first 100 MB (10^6 bytes, as `asmbpe bench encode` reads them) through
         encode_many without profiling, a new encoder per run after a call on two
         64-byte documents (the bench's first pass): each run's wall and system
         seconds, then the median of the runs after the process's first (what the
         E66-E72 rows of the log alternate between builds with --lib)
  rare   "rare words": the chunks of 2..16 bytes seen once in the first 30 MB that
         are a space plus letters, joined into one document, cache=False: merge
         cycles per chunk
  hot    the first 16 KB of english repeated to 100 MB (every chunk found, branches
         and lines learnable): cycles per chunk of each phase
  words  the " word" chunks of the first 64 KB (about 2,000) in random order, some
         followed by ",", "." or a newline, 100 MB in 16 KB documents (lines hot,
         branches not): cycles per chunk of each phase
  blocks all of english.parquet in blocks of about 8 MB, as `asmbpe encode` hands them
         to encode_many (with <|bos|>), a new encoder per run, nothing read or written:
         the in-memory rate the whole command is compared with (MB/s); --copies N:
         the file N times over, as `asmbpe encode` given it N times (the steady state
         of a long run, where the start-up costs of reading weigh less)
  read   reading alone, as `asmbpe encode` reads (all of english.parquet in 8 MB
         blocks, Arrow's memory kept, one reader thread), once per process (its
         start-up is what this measures: run it several times): seconds to the first
         block and to the end, MB/s, CPU seconds and minor page faults
  cuts   the rank encoder (issue 22, log R29) with and without cutting long chunks:
         --vocab cl100k_base|o200k_base, --corpus, --mb of whole documents, fresh
         encoders (each after a 64-byte call) alternated in this one process, first
         pass, one thread: the medians; --long: only the distinct chunks of 16..128
         bytes of the first --mb, 100 to a document, ns per chunk
  first  the rank encoder's first pass (issue 22, log R38-R51): --vocab, --corpus, --mb
         of whole documents, --runs fresh encoders (each after a 64-byte call), one
         thread: the median first pass and the median "again" (the same encoder)
  misses the rank encoder's chunks met for the first time (log R38-R48): the distinct
         chunks of the first 32 MB of --corpus that are a space plus ASCII letters,
         2..15 bytes and no token of --vocab, each once, 1,000 to a document (with
         --dilute D, each followed by D hits, " the"), fresh encoders, one thread: the
         first pass per miss, and per miss beyond what the same text costs again
--lib runs another build of libasmbpe.so (an A/B: alternate the two, one process
each). Seconds from rdtsc cycles at the TSC rate that harness.dev.profile measures.
"""
from __future__ import annotations

import argparse
import random
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def english(limit: int) -> list[bytes]:
    """Whole documents of english.parquet until `limit` bytes."""
    from harness.corpora import corpus_path, read_documents
    return read_documents(corpus_path("english"), limit)


def phases(tok, docs, threads, cache=True):
    """(wall seconds, {phase: cycles, and "slowest": the slowest thread's total},
    chunks) of one profiled encode_many."""
    from harness.encoder import encode_many, encoder_stats
    s0 = encoder_stats(tok)
    t0 = [encoder_stats(tok, k)["cycles_total"] for k in range(threads)]
    t = time.perf_counter()
    encode_many(tok, docs, threads, cache=cache, profile=True)
    wall = time.perf_counter() - t
    s1 = encoder_stats(tok)
    cyc = {k[7:]: s1[k] - s0[k] for k in s1 if k.startswith("cycles_")}
    cyc["slowest"] = max(encoder_stats(tok, k)["cycles_total"] - c for k, c in enumerate(t0))
    return wall, cyc, s1["chunks"] - s0["chunks"], (s1["chunks"] - s0["chunks"]) - (s1["cache_hits"] - s0["cache_hits"])


def read_alone() -> None:
    import resource

    import pyarrow.parquet  # noqa: F401  (the command's size estimate imports it
    from harness.corpora import arrow_memory_kept, corpus_path, iter_batches  # before
    from harness.pipeline import BLOCK_BYTES                    # its clock starts)
    t0 = time.perf_counter()
    first, total = None, 0
    with arrow_memory_kept(1):
        for b in iter_batches([corpus_path("english")], BLOCK_BYTES):
            if first is None:
                first = time.perf_counter() - t0
            total += b.nbytes
    took = time.perf_counter() - t0
    ru = resource.getrusage(resource.RUSAGE_SELF)
    print(f"{total / 1e6:.1f} MB: first block {first:.3f} s, all {took:.3f} s "
          f"({total / 1e6 / took:.0f} MB/s), CPU {ru.ru_utime + ru.ru_stime:.2f} s, "
          f"{ru.ru_minflt:,} minor faults")


def wall_runs(tokenizer: str, threads: int, runs: int) -> None:
    import gc
    import resource

    from harness import Tokenizer
    from harness.encoder import encode_many
    docs = english(int(100e6))
    walls = []
    for _ in range(runs):
        fresh = None
        gc.collect()
        fresh = Tokenizer.load(tokenizer)
        fresh.encode_many([b"x" * 64] * 2, threads)
        sys0 = resource.getrusage(resource.RUSAGE_SELF).ru_stime
        t = time.perf_counter()
        ids, _ = encode_many(fresh, docs, threads)
        walls.append(time.perf_counter() - t)
        del ids
        print(f"wall {walls[-1]:.4f} s, system "
              f"{resource.getrusage(resource.RUSAGE_SELF).ru_stime - sys0:.4f} s")
    if runs > 1:
        print(f"median of runs 2-{runs}: {statistics.median(walls[1:]):.4f} s")


def cuts(vocab: str, corpus: str, mb: float, runs: int, long_only: bool) -> None:
    """The `cuts` mode (module doc)."""
    from harness.corpora import corpus_path, read_documents
    from harness.rank import RankEncoder
    from harness.vocab import KNOWN_ENCODINGS, from_tiktoken

    docs = read_documents(corpus_path(corpus), int(mb * 1e6))
    v = from_tiktoken(ROOT.parent / "shared" / "vocabs" / f"{vocab}.tiktoken.gz")
    if long_only:
        import regex

        from harness.pretokenizers import EXACT_PATTERNS
        pat = regex.compile(EXACT_PATTERNS[KNOWN_ENCODINGS[vocab].pretokenizer])
        chunks = sorted({c for d in docs for m in pat.findall(d.decode("utf-8", "replace"))
                         if 16 <= len(c := m.encode()) <= 128})
        docs = [b"\n".join(chunks[i:i + 100]) for i in range(0, len(chunks), 100)]
    n = len(chunks) if long_only else sum(map(len, docs))
    times: dict[bool, list[float]] = {True: [], False: []}
    for r in range(runs):
        for split in ((True, False) if r % 2 == 0 else (False, True)):
            enc = RankEncoder(v, split=split)
            enc.encode_many([docs[0][:64]], 1)
            t = time.perf_counter()
            enc.encode_many(docs, 1)
            times[split].append(time.perf_counter() - t)
    for split in (True, False):
        m = statistics.median(times[split])
        rate = (f"{m / n * 1e9:.0f} ns per chunk ({n:,} chunks)" if long_only
                else f"{n / 1e6 / m:.1f} MB/s")
        print(f"{vocab} {corpus} cuts {'on ' if split else 'off'}: median {m:.3f} s, {rate}; "
              f"runs {', '.join(f'{x:.3f}' for x in times[split])}")


def _rank_docs(vocab: str, corpus: str, mb: float):
    from harness.corpora import corpus_path, read_documents
    from harness.vocab import from_tiktoken
    docs = read_documents(corpus_path(corpus), int(mb * 1e6))
    return docs, from_tiktoken(ROOT.parent / "shared" / "vocabs" / f"{vocab}.tiktoken.gz")


def _fresh_runs(v, docs, runs: int) -> tuple[float, float]:
    """(median first pass, median again) of `runs` fresh RankEncoders, one thread."""
    from harness.rank import RankEncoder
    first, again = [], []
    for _ in range(runs):
        enc = RankEncoder(v)
        enc.encode_many([docs[0][:64]], 1)
        for out in (first, again):
            t = time.perf_counter()
            enc.encode_many(docs, 1)
            out.append(time.perf_counter() - t)
    return statistics.median(first), statistics.median(again)


def first_pass(vocab: str, corpus: str, mb: float, runs: int) -> None:
    """The `first` mode (module doc)."""
    docs, v = _rank_docs(vocab, corpus, mb)
    n = sum(map(len, docs))
    f, a = _fresh_runs(v, docs, runs)
    print(f"{vocab} {corpus} {n / 1e6:.1f} MB: first pass {f:.4f} s ({n / 1e6 / f:.1f} MB/s), "
          f"again {a:.4f} s, medians of {runs}")


def misses(vocab: str, corpus: str, runs: int, dilute: int) -> None:
    """The `misses` mode (module doc)."""
    import regex

    from harness.pretokenizers import EXACT_PATTERNS
    from harness.vocab import KNOWN_ENCODINGS
    docs, v = _rank_docs(vocab, corpus, 32)
    pat = regex.compile(EXACT_PATTERNS[KNOWN_ENCODINGS[vocab].pretokenizer])
    tokens, seen, chunks = set(v.tokens), set(), []
    for d in docs:
        for m in pat.findall(d.decode("utf-8", "replace")):
            c = m.encode()
            if c not in seen and c not in tokens and 3 <= len(c) <= 15 and c[0] == 32 \
                    and c[1:].isalpha() and c[1:].isascii():
                chunks.append(c)
            seen.add(c)
    fill = b" the" * dilute
    texts = [b"".join(c + fill for c in chunks[i:i + 1000]) for i in range(0, len(chunks), 1000)]
    f, a = _fresh_runs(v, texts, runs)
    print(f"{len(chunks):,} misses of {sum(map(len, chunks)) / len(chunks):.1f} B, {dilute} hits "
          f"after each: first pass {f * 1e3:.1f} ms ({f / len(chunks) * 1e9:.0f} ns a miss), "
          f"again {a * 1e3:.1f} ms: {(f - a) / len(chunks) * 1e9:.0f} ns per miss beyond the "
          f"hits, medians of {runs}")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("mode", choices=("e100", "wall", "rare", "hot", "words", "blocks", "read",
                                     "cuts", "first", "misses"))
    ap.add_argument("--lib")
    ap.add_argument("--tokenizer", default="tok100.bin")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--copies", type=int, default=1)
    ap.add_argument("--vocab", default="cl100k_base")
    ap.add_argument("--corpus", default="multilingual")
    ap.add_argument("--mb", type=float, default=32)
    ap.add_argument("--long", action="store_true")
    ap.add_argument("--dilute", type=int, default=0)
    a = ap.parse_args()
    if a.mode == "read":
        read_alone()
        return
    import harness._lib as L
    if a.lib:
        L.LIB_PATH = Path(a.lib)
    if a.mode == "cuts":                               # (wall time only: no TSC needed)
        cuts(a.vocab, a.corpus, a.mb, a.runs, a.long)
        return
    if a.mode == "first":
        first_pass(a.vocab, a.corpus, a.mb, a.runs)
        return
    if a.mode == "misses":
        misses(a.vocab, a.corpus, a.runs, a.dilute)
        return
    if a.mode == "wall":                               # (wall time only: no TSC needed)
        wall_runs(a.tokenizer, a.threads, a.runs)
        return
    if a.mode == "blocks":                             # (wall time only: no TSC needed)
        from harness import Tokenizer
        from harness.corpora import corpus_path, iter_batches
        from harness.pipeline import BLOCK_BYTES
        blocks = list(iter_batches([corpus_path("english")] * a.copies,    # as the command
                                   BLOCK_BYTES))
        total = sum(b.nbytes for b in blocks)
        Tokenizer.load(a.tokenizer).encode_many([b"hello world"], a.threads)
        for _ in range(a.runs):
            fresh = Tokenizer.load(a.tokenizer)
            t = time.perf_counter()
            for b in blocks:
                fresh.encode_many(b, a.threads, bos=True)
            print(f"{total / 1e6:.1f} MB in {len(blocks)} blocks: "
                  f"{total / 1e6 / (time.perf_counter() - t):.1f} MB/s")
        return
    from harness import Tokenizer
    from harness.pretok import split
    from harness.dev.profile import tsc_hz
    hz = tsc_hz()
    if not hz:
        sys.exit("no invariant TSC rate here: cycles cannot be turned into seconds")
    tok = Tokenizer.load(a.tokenizer)
    if a.mode == "e100":
        docs = english(100 << 20)
        for _ in range(a.runs):
            fresh = Tokenizer.load(a.tokenizer)
            fresh.encode_many([b"hello world"], a.threads)
            wall, cyc, _, encoded = phases(fresh, docs, a.threads)
            slowest = cyc.pop("slowest")
            print(f"wall {wall:.3f} s; " + ", ".join(f"{k} {v / hz:.3f}" for k, v in cyc.items())
                  + f" s; outside the threads {wall - slowest / hz:.3f} s (wall minus the "
                  f"slowest thread); chunks encoded {encoded:,}")
        return
    if a.mode == "rare":
        seen: dict[bytes, int] = {}
        for d in english(30 << 20):
            for c in split(d):
                if 2 <= len(c) <= 16:
                    seen[c] = seen.get(c, 0) + 1
        ws = [c for c, k in seen.items() if k == 1 and c[:1] == b" " and c[1:].isalpha()]
        doc = b"".join(ws)
        per = [phases(tok, [doc], 1, cache=False)[1]["merge"] / len(ws) for _ in range(9)]
        print(f"{len(ws):,} chunks of {len(doc) / len(ws):.2f} B: merge cycles per chunk, "
              f"median of 9: {statistics.median(per):.0f}")
        return
    text = b"".join(english(1 << 20))
    if a.mode == "hot":
        docs = [text[:16384]] * 6400
    else:
        words = sorted({c for c in split(text[:65536]) if len(c) > 1 and c[:1] == b" "
                        and c[1:].isalpha()})
        rng = random.Random(1)
        punct = [b",", b".", b"\n", b"", b"", b"", b""]
        docs = [b"".join(w + p for w, p in zip(rng.choices(words, k=3000),
                                                rng.choices(punct, k=3000)))[:16384]
                for _ in range(6400)]
    tok.encode_many(docs[:10], a.threads)
    for _ in range(a.runs):
        wall, cyc, n, _ = phases(tok, docs, a.threads)
        del cyc["slowest"]
        print(f"wall {wall:.3f} s; cycles per chunk: "
              + ", ".join(f"{k} {v / n:.1f}" for k, v in cyc.items()))


if __name__ == "__main__":
    main()
