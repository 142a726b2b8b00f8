"""`asmbpe bench ladder`: where the training speed comes from, one rung at a time.

The same training (SPEC §4) climbs seven rungs, from the naive Python loop to the
assembly trainer on every thread. Every rung must learn the merges of `harness.train`
merge for merge: the same (left, right) with the same winning count.

1. naive:        one token tuple per chunk occurrence (every chunk of the text, in
                 order, no dedup); every pair recounted from scratch for every merge;
2. incremental:  the same tuples; the pair counts are kept, and a merge updates them
                 for each tuple it rewrites (its old pairs out, its new pairs in); the
                 tuples holding the best pair are found by scanning them all;
3. words:        as 2, with an index pair -> tuples holding it, so a merge looks only
                 at the tuples it rewrites;
4. dedup:        as 3 on the unique words with their counts (twin.count_words): a word
                 seen 1,000 times is rewritten once and counts 1,000 times;
5. dedup + heap: as 4, the best pair taken from a max-heap of (count, pair) with lazy
                 deletion (SPEC §4.6) instead of a look at every pair count;
6. asmbpe, 1 thread:  harness.train(docs, threads=1);
7. asmbpe, N threads: harness.train(docs, threads=os.cpu_count()).

The Python rungs share the twin's rules (harness.dev.twin.train): chunks longer than
MAX_WORD_BYTES are left out, the highest count wins and ties go to the smaller
(left, right), a merge rewrites left to right (twin._rewrite), no pair spans two
chunks. They cut the documents with the library's pre-tokenizer (harness.split: the
same chunks as the twin's split, which is 20x slower and would hide the merge loop);
each one's clock runs from the documents to its last merge, cutting included, as the
asmbpe rungs' clock runs around harness.train. Each Python rung runs once (the garbage
collector off); the asmbpe rungs take the median of ASM_RUNS runs.

Budget: a Python rung that has not learned all its merges after `budget_s` seconds
stops after the merge it is in, and its time is extrapolated linearly: its set-up time
(cutting, counting, the first pair counts) plus its merge loop time so far divided by
the merges done, times the merges to learn. (The naive rungs' merges get a little
cheaper as the words shrink, so this overestimates them a little.) Its merges are
checked as far as it got: "yes (first N)".
"""
from __future__ import annotations

import gc
import heapq
import io
import os
import statistics
import time
from collections import defaultdict
from itertools import count, repeat
from typing import Callable, Iterator

from .twin import N_BYTES, _rewrite, count_words

MAX_WORD_BYTES = 256        # as harness.train's default
ASM_RUNS = 3                # runs of each asmbpe rung; the median is shown
ROW_KEYS = ("rung", "name", "corpus", "bytes", "pretokenizer", "vocab_size", "threads",
            "merges_done", "merges_target", "seconds", "setup_s", "extrapolated",
            "speedup_prev", "speedup_naive", "merges_equal", "first_difference")

Pair = tuple[int, int]
Merge = tuple[Pair, int]            # (left, right), winning count
RungFn = Callable[[list[bytes], str], Iterator]

__all__ = ["RUNGS", "ROW_KEYS", "naive", "incremental", "indexed", "dedup", "dedup_heap",
           "run_python_rung", "ladder", "plot_ladder", "check_plot", "write_rows"]


# ------------------------------------------------------------------- shared pieces

def _occurrences(docs: list[bytes], pretok: str) -> list[tuple[int, ...]]:
    """Every chunk of every document, in order, as a tuple of byte values; chunks
    longer than MAX_WORD_BYTES left out, and those of one byte (no pairs)."""
    from ..pretok import split

    return [tuple(c) for d in docs for c in split(d, pretok) if 2 <= len(c) <= MAX_WORD_BYTES]


def _unique_words(docs: list[bytes], pretok: str) -> tuple[list[tuple[int, ...]], list[int]]:
    """The unique chunks of >= 2 bytes (twin.count_words) and their counts."""
    from ..pretok import split

    counted = count_words(docs, MAX_WORD_BYTES, lambda d: split(d, pretok))
    words = [w for w in counted if len(w) >= 2]
    return [tuple(w) for w in words], [counted[w] for w in words]


def _count_pairs(words, weights) -> dict[Pair, int]:
    """Every pair's count: the sum over words of weight x its occurrences in the word."""
    counts: dict[Pair, int] = {}
    get = counts.get
    for w, c in zip(words, weights):
        for p in zip(w, w[1:]):
            counts[p] = get(p, 0) + c
    return counts


def _holds(w: tuple, a: int, b: int) -> bool:
    """Whether the pair (a, b) occurs in w (`a in w` first: a quick filter)."""
    return a in w and (a, b) in zip(w, w[1:])


def _replace(w: tuple, c: int, a: int, b: int, new: int, counts: dict[Pair, int]) -> tuple:
    """w with (a, b) merged into new; counts updated by weight c: the old word's pairs
    out, the new word's pairs in (a pair at 0 is deleted)."""
    for p in zip(w, w[1:]):
        left = counts[p] - c
        if left:
            counts[p] = left
        else:
            del counts[p]
    w = _rewrite(w, a, b, new)
    for p in zip(w, w[1:]):
        counts[p] = counts.get(p, 0) + c
    return w


def _best(counts: dict[Pair, int]) -> Pair | None:
    """The highest count's pair, ties to the smaller (left, right), by a look at every
    count (None when there is none)."""
    if not counts:
        return None
    top = max(counts.values())
    return min(p for p, c in counts.items() if c == top)


class _LazyHeap:
    """A max-heap of (count, pair) over `counts` with lazy deletion: `rose(pair)` is
    called when a count goes up (it pushes the new count); at the top, an entry the
    table disagrees with is pushed again with the real count when that is lower, and
    dropped when it is higher (a newer entry holds it) or zero."""

    def __init__(self, counts: dict[Pair, int]):
        self.counts = counts
        self.heap = [(-c, p) for p, c in counts.items()]
        heapq.heapify(self.heap)

    def rose(self, pair: Pair) -> None:
        heapq.heappush(self.heap, (-self.counts[pair], pair))

    def best(self) -> Pair | None:
        heap, counts = self.heap, self.counts
        while heap:
            neg, p = heap[0]
            real = counts.get(p, 0)
            if real == -neg:
                return p                    # ties: the smaller pair is the smaller entry
            if 0 < real < -neg:
                heapq.heapreplace(heap, (-real, p))
            else:
                heapq.heappop(heap)
        return None


# ----------------------------------------------------------------------- the rungs
#
# Each rung is a generator over the documents: it sets up, yields None, then yields
# ((left, right), count) after each merge it has made, until no pair is left. The
# caller stops it after the merges it wants (or at the end of its time budget).

def naive(docs: list[bytes], pretok: str) -> Iterator:
    """Rung 1: a tuple per chunk occurrence; every pair recounted for every merge."""
    words = _occurrences(docs, pretok)
    yield None
    for new in count(N_BYTES):
        counts = _count_pairs(words, repeat(1))
        pair = _best(counts)
        if pair is None:
            return
        a, b = pair
        words = [_rewrite(w, a, b, new) if _holds(w, a, b) else w for w in words]
        yield pair, counts[pair]


def incremental(docs: list[bytes], pretok: str) -> Iterator:
    """Rung 2: the same tuples; pair counts kept up to date; every tuple scanned for
    the pair."""
    words = _occurrences(docs, pretok)
    counts = _count_pairs(words, repeat(1))
    yield None
    for new in count(N_BYTES):
        pair = _best(counts)
        if pair is None:
            return
        a, b = pair
        won = counts[pair]
        for i, w in enumerate(words):
            if _holds(w, a, b):
                words[i] = _replace(w, 1, a, b, new, counts)
        yield pair, won


def _index_loop(words: list[tuple], weights: list[int], heap: bool) -> Iterator:
    """Rungs 3-5: words with weights, incremental counts and an index pair -> words
    holding it (entries go stale when a word loses the pair: checked on use); the best
    pair by a look at every count, or with heap=True from a _LazyHeap."""
    counts = _count_pairs(words, weights)
    where: dict[Pair, set[int]] = defaultdict(set)
    for i, w in enumerate(words):
        for p in zip(w, w[1:]):
            where[p].add(i)
    queue = _LazyHeap(counts) if heap else None
    yield None
    for new in count(N_BYTES):
        pair = queue.best() if queue else _best(counts)
        if pair is None:
            return
        a, b = pair
        won = counts[pair]
        rose = set()
        for i in where.pop(pair):
            if _holds(words[i], a, b):
                words[i] = w = _replace(words[i], weights[i], a, b, new, counts)
                for p in zip(w, w[1:]):
                    if new in p:            # only pairs with the new token go up
                        where[p].add(i)
                        rose.add(p)
        if queue:
            for p in rose:
                queue.rose(p)
        yield pair, won


def indexed(docs: list[bytes], pretok: str) -> Iterator:
    """Rung 3: the chunk occurrences with a pair -> words index."""
    occ = _occurrences(docs, pretok)
    return _index_loop(occ, [1] * len(occ), heap=False)


def dedup(docs: list[bytes], pretok: str) -> Iterator:
    """Rung 4: the unique words with their counts, indexed."""
    return _index_loop(*_unique_words(docs, pretok), heap=False)


def dedup_heap(docs: list[bytes], pretok: str) -> Iterator:
    """Rung 5: as dedup, the best pair from a lazy max-heap."""
    return _index_loop(*_unique_words(docs, pretok), heap=True)


# `indexed`, `dedup` and `dedup_heap` return their generator at once: the driver's
# first next() runs their set-up, as it does the others'.

RUNGS: tuple[tuple[str, RungFn | int | None], ...] = (
    ("naive", naive),
    ("incremental", incremental),
    ("words", indexed),
    ("dedup", dedup),
    ("dedup + heap", dedup_heap),
    ("asmbpe, 1 thread", 1),
    ("asmbpe, all threads", None),      # os.cpu_count()
)


# ---------------------------------------------------------------------- the driver

def run_python_rung(fn: RungFn, docs: list[bytes], pretok: str, target: int,
                    budget_s: float) -> dict:
    """Run one Python rung for `target` merges or until `budget_s` seconds have gone
    (after at least one merge); gc off. Returns merges (list of ((a, b), count)),
    seconds (measured, or extrapolated: see the module doc), setup_s, extrapolated."""
    gc.collect()
    was_enabled = gc.isenabled()
    gc.disable()
    merges: list[Merge] = []
    stopped = False
    try:
        t0 = time.perf_counter()
        gen = iter(fn(docs, pretok))
        next(gen)                               # the set-up
        setup = elapsed = time.perf_counter() - t0
        while len(merges) < target:
            if merges and elapsed >= budget_s:
                stopped = True
                break
            item = next(gen, None)
            elapsed = time.perf_counter() - t0
            if item is None:
                break                           # no pair left
            merges.append(item)
        gen.close()
    finally:
        if was_enabled:
            gc.enable()
    seconds = (setup + (elapsed - setup) / len(merges) * target) if stopped else elapsed
    return dict(merges=merges, seconds=seconds, setup_s=setup, extrapolated=stopped)


def _asm_merges(result) -> list[Merge]:
    return [((int(a), int(b)), int(c)) for (a, b), c in zip(result.merges, result.counts)]


def run_asm_rung(docs: list[bytes], pretok: str, vocab_size: int, threads: int) -> dict:
    """harness.train on the documents, ASM_RUNS times: the median time, the merges."""
    from ..train import train

    times, result = [], None
    for _ in range(ASM_RUNS):
        t0 = time.perf_counter()
        result = train(docs, vocab_size, threads=threads, max_word_bytes=MAX_WORD_BYTES,
                       pretokenizer=pretok)
        times.append(time.perf_counter() - t0)
    return dict(merges=_asm_merges(result), seconds=statistics.median(times), setup_s=None,
                extrapolated=False)


def _compare(reference: list[Merge], merges: list[Merge],
             partial: bool = False) -> tuple[str, int | None]:
    """('yes' | 'yes (first N)' | 'no@k', the first merge that differs or None).
    partial: the rung was stopped by its budget, so fewer merges are no difference."""
    for k, (want, got) in enumerate(zip(reference, merges)):
        if want != got:
            return f"no@{k}", k
    if len(merges) == len(reference):
        return "yes", None
    if partial and len(merges) < len(reference):
        return f"yes (first {len(merges)})", None
    k = min(len(merges), len(reference))
    return f"no@{k}", k


def _ratio(x: float | None) -> str:
    return "-" if x is None else f"{x:,.1f}x"


def _secs(x: float) -> str:
    return f"{x:.3f}" if x < 10 else f"{x:.1f}"


def _format_row(r: dict) -> str:
    secs = _secs(r["seconds"]) + (" (extrapolated)" if r["extrapolated"] else "")
    merges = f"{r['merges_done']}/{r['merges_target']}"
    setup = "-" if r["setup_s"] is None else _secs(r["setup_s"])
    return (f"  {r['rung']:>4}  {r['name']:<20} {merges:>9} {setup:>9} "
            f"{secs:>22} {_ratio(r['speedup_prev']):>9} {_ratio(r['speedup_naive']):>10}  "
            f"{r['merges_equal']}")


def ladder(corpus: str = "english", limit_mb: float = 1, vocab_size: int = 512,
           budget_s: float = 20, pretokenizer: str | None = None, input_path=None,
           separator=None, out=print) -> list[dict]:
    """Climb the ladder on the documents `bench_documents` reads (the shared corpus
    `corpus` or `input_path`, about `limit_mb` MB): the asmbpe rungs first (rung 6 is
    the reference every rung is checked against), then the Python rungs; print the
    table row by row and return the rows (ROW_KEYS)."""
    from ..corpora import InputError
    from ..pretokenizers import DEFAULT, resolve
    from ..tokenizer import MAX_VOCAB
    from ..train import MIN_VOCAB
    from .bench import bench_documents, cpu_model

    if not MIN_VOCAB < vocab_size <= MAX_VOCAB:
        raise InputError(f"--vocab-size must be between {MIN_VOCAB + 1} and {MAX_VOCAB}, "
                         f"got {vocab_size}")
    if not budget_s > 0:
        raise InputError(f"--budget-s must be > 0, got {budget_s}")
    pretok = resolve(pretokenizer if pretokenizer is not None else DEFAULT).name
    docs, label = bench_documents(corpus, limit_mb, input_path, separator)
    nbytes = sum(len(d) for d in docs)
    n_threads = os.cpu_count() or 1

    measured = {}
    for number, (name, fn) in enumerate(RUNGS, 1):
        if not callable(fn):
            measured[number] = run_asm_rung(docs, pretok, vocab_size, fn or n_threads)
    # rung 6 (1 thread) is the reference: harness.train's merges, which every rung must learn
    reference = measured[6]["merges"]
    target = len(reference)
    out(f"ladder: {label}, {nbytes / 1e6:.2f} MB, {len(docs)} documents, vocab {vocab_size} "
        f"({vocab_size - MIN_VOCAB} merges asked, {target} learned by asmbpe), pre-tokenizer "
        f"{pretok}, budget {budget_s:g} s per Python rung, {n_threads} threads; "
        f"CPU: {cpu_model()}")
    out("  Python rungs: one run, cut by the library's pre-tokenizer, clock from the "
        "documents to the last merge; asmbpe rungs: harness.train, median of "
        f"{ASM_RUNS} runs.")
    out("  set-up: cutting, counting, first pair counts; extrapolated = set-up + (merge "
        "loop so far / merges done) x merges learned by asmbpe")
    out(f"  {'rung':>4}  {'name':<20} {'merges':>9} {'set-up s':>9} {'time s':>22} {'vs prev':>9} "
        f"{'vs naive':>10}  merges equal")
    rows: list[dict] = []
    for number, (name, fn) in enumerate(RUNGS, 1):
        res = measured.get(number) or run_python_rung(fn, docs, pretok, target, budget_s)
        equal, first_diff = _compare(reference, res["merges"], res["extrapolated"])
        if number == 6:
            equal = "(reference)"
        prev = rows[-1]["seconds"] if rows else None
        naive_s = rows[0]["seconds"] if rows else res["seconds"]
        secs = res["seconds"]
        threads = 1 if callable(fn) else fn or n_threads
        row = dict(rung=number, name=name if fn is not None else f"asmbpe, {n_threads} threads",
                   corpus=label, bytes=nbytes, pretokenizer=pretok, vocab_size=vocab_size,
                   threads=threads,
                   merges_done=len(res["merges"]), merges_target=target, seconds=secs,
                   setup_s=res["setup_s"], extrapolated=res["extrapolated"],
                   speedup_prev=(prev / secs if prev and secs > 0 else None),
                   speedup_naive=(naive_s / secs if secs > 0 else None),
                   merges_equal=equal, first_difference=first_diff)
        rows.append(row)
        out(_format_row(row))
    return rows


# -------------------------------------------------------------------- plot, JSON

PLOT_HINT = "--plot needs matplotlib: pip install 'asmbpe[plot]' (or pip install matplotlib)"


def check_plot() -> None:
    """Fail (AsmbpeError, one line) when matplotlib cannot be imported."""
    from ..errors import AsmbpeError

    try:
        import matplotlib  # noqa: F401
    except ImportError:
        raise AsmbpeError(PLOT_HINT) from None


def plot_ladder(rows: list[dict], path, title: str = "") -> None:
    """A bar per rung, its time on a log scale (extrapolated ones hatched), labelled
    with the speed-up over the naive rung; written to `path` as PNG, atomically."""
    check_plot()
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from ..files import write_atomic

    names = [f"{r['rung']}. {r['name']}" for r in rows][::-1]
    secs = [r["seconds"] for r in rows][::-1]
    fig, ax = plt.subplots(figsize=(9, 0.55 * len(rows) + 1.6))
    bars = ax.barh(names, secs, color=["tab:blue" if "asmbpe" in n else "tab:orange"
                                        for n in names])
    for bar, r in zip(bars, rows[::-1]):
        if r["extrapolated"]:
            bar.set_hatch("//")
            bar.set_alpha(0.6)
        note = f" {r['seconds']:.3g} s" + (" (extrapolated)" if r["extrapolated"] else "")
        if r["speedup_naive"]:
            note += f", {r['speedup_naive']:,.0f}x naive" if r["rung"] > 1 else ""
        ax.text(bar.get_width(), bar.get_y() + bar.get_height() / 2, note, va="center",
                fontsize=8)
    ax.set_xscale("log")
    ax.set_xlim(min(secs) / 2, max(secs) * 15)
    ax.set_xlabel("seconds (log scale)")
    ax.grid(True, axis="x", which="major", alpha=0.3)
    ax.set_title(title or "the optimization ladder")
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, dpi=100, format="png")
    plt.close(fig)
    write_atomic(path, buf.getvalue())


def write_rows(rows: list[dict], path) -> None:
    """The rows as JSON (ROW_KEYS), written atomically."""
    from .bench import write_json

    write_json([{k: r[k] for k in ROW_KEYS} for r in rows], path)
