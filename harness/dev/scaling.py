"""`asmbpe bench scaling`: training and encoding at 1, 2, 4, 8, 16 threads (issue 24).

One process reads the documents once, then for each thread count runs `harness.train`
(the phases from its stats: count, merge loop, the whole call) and encodes the same
documents with the tokenizer it learned (`Tokenizer.encode_batch`, ids checked equal
to the first thread count's), `runs` times each, the median kept. The table gives the
speed-up over the first thread count per phase, so a flattening shows where it is:
counting (the serial merge of the threads' word tables, one document counted by one
thread), the merge loop (two barriers per merge; thread 0 alone once merges touch
little) or encoding.

Thread counts above the machine's cores run oversubscribed (the results must still be
identical; the times then say nothing about scaling): the table marks them.
"""
from __future__ import annotations

import os
import statistics
import time

__all__ = ["scaling", "ROW_KEYS", "DEFAULT_THREADS"]

DEFAULT_THREADS = (1, 2, 4, 8, 16)
ROW_KEYS = ("threads", "cores", "oversubscribed", "bytes", "vocab_size", "runs",
            "count_s", "merge_loop_s", "train_s", "encode_s", "train_speedup",
            "count_speedup", "merge_loop_speedup", "encode_speedup", "encode_mb_s",
            "merges_equal", "ids_equal")


def _median(xs: list[float]) -> float:
    return statistics.median(xs) if xs else float("nan")


def scaling(docs: list[bytes], vocab_size: int = 32768, threads=DEFAULT_THREADS,
            runs: int = 3, encode: bool = True, out=print) -> list[dict]:
    """Rows (ROW_KEYS) for each thread count; prints a table through `out`."""
    import numpy as np

    import harness

    cores = os.cpu_count() or 1
    nbytes = sum(len(d) for d in docs)
    rows: list[dict] = []
    first_merges = first_ids = None
    for t in threads:
        count, loop, call, enc = [], [], [], []
        merges_equal = ids_equal = True
        for _ in range(runs):
            r = harness.train(docs, vocab_size, threads=t)
            s = r.stats["seconds"]
            count.append(s["count"])
            loop.append(s["merge_loop"])
            call.append(s["total"])
            if first_merges is None:
                first_merges = r.merges
            merges_equal &= bool(np.array_equal(r.merges, first_merges))
            if encode:
                tok = r.tokenizer
                t0 = time.perf_counter()
                ids = tok.encode_batch(docs, threads=t)
                enc.append(time.perf_counter() - t0)
                flat = np.concatenate(ids) if ids else np.zeros(0, np.uint16)
                if first_ids is None:
                    first_ids = flat
                ids_equal &= bool(np.array_equal(flat, first_ids))
        rows.append(dict(threads=t, cores=cores, oversubscribed=t > cores, bytes=nbytes,
                         vocab_size=vocab_size, runs=runs, count_s=_median(count),
                         merge_loop_s=_median(loop), train_s=_median(call),
                         encode_s=_median(enc) if enc else None,
                         merges_equal=merges_equal, ids_equal=ids_equal if encode else None))
    base = rows[0] if rows else {}
    for row in rows:
        for key, name in (("train_s", "train_speedup"), ("count_s", "count_speedup"),
                          ("merge_loop_s", "merge_loop_speedup"),
                          ("encode_s", "encode_speedup")):
            a, b = base.get(key), row.get(key)
            row[name] = a / b if a and b else None
        row["encode_mb_s"] = nbytes / 1e6 / row["encode_s"] if row.get("encode_s") else None
    _table(rows, out)
    return rows


def _x(v) -> str:
    return "-" if v is None else f"{v:.2f}x"


def _s(v) -> str:
    return "-" if v is None else f"{v:.3f}"


def _table(rows: list[dict], out) -> None:
    if not rows:
        return
    r0 = rows[0]
    out(f"scaling: {r0['bytes'] / 1e6:.1f} MB, vocab {r0['vocab_size']}, median of "
        f"{r0['runs']} run(s), {r0['cores']} core(s); speed-ups against "
        f"{r0['threads']} thread(s)")
    out(f"  {'threads':>7} {'train s':>8} {'count s':>8} {'loop s':>8} {'encode s':>9} "
        f"{'train':>7} {'count':>7} {'loop':>7} {'encode':>7} {'enc MB/s':>9}  same")
    for r in rows:
        same = "yes" if r["merges_equal"] and r["ids_equal"] is not False else "NO"
        mbs = "-" if r["encode_mb_s"] is None else f"{r['encode_mb_s']:.0f}"
        over = "  (more threads than cores)" if r["oversubscribed"] else ""
        out(f"  {r['threads']:>7} {_s(r['train_s']):>8} {_s(r['count_s']):>8} "
            f"{_s(r['merge_loop_s']):>8} {_s(r['encode_s']):>9} {_x(r['train_speedup']):>7} "
            f"{_x(r['count_speedup']):>7} {_x(r['merge_loop_speedup']):>7} "
            f"{_x(r['encode_speedup']):>7} {mbs:>9}  {same}{over}")
