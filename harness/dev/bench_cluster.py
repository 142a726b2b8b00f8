"""`asmbpe bench encode --cluster ADDRESS`: the distributed encode against one process on
the same shards.

The documents (the first `limit_mb` of a shared corpus) are dealt into `shards` Parquet
files in a temporary directory. Both paths write the sharded layout
(harness.distributed.encode_sharded): one process encoding the shards one after
another with the library's threads on all cores (`client=None`), and the cluster's
workers each encoding whole shards (library threads: the machine's cores shared out
over the workers). One untimed run each first (encoders built, caches and page cache
warm), then `runs` timed runs; the medians are compared, and the outputs must be the
same bytes. Starting the cluster is timed separately (it is paid once per job, not
per shard).
"""
from __future__ import annotations

import os
import statistics
import tempfile
import time
from pathlib import Path

__all__ = ["bench_cluster"]


def bench_cluster(corpus: str, limit_mb: float, vocab_size: int, runs: int, address: str,
                  tokenizer=None, shards: int = 8, out=print) -> dict:
    import pyarrow as pa
    import pyarrow.parquet as pq

    from ..corpora import corpus_path, read_documents
    from ..distributed import connect, encode_sharded
    from ..train import train

    path = corpus_path(corpus)
    docs = read_documents(path, int(limit_mb * 1e6) if limit_mb else None)
    size = sum(map(len, docs))
    if tokenizer is None:
        out(f"training a {vocab_size} tokenizer on the first 20 MB ...")
        tokenizer = train(docs[:max(1, len(docs) * 20 // max(1, int(size / 1e6)))],
                          vocab_size).tokenizer
    with tempfile.TemporaryDirectory(prefix="asmbpe-bench-") as tmp:
        root = Path(tmp)
        files = []
        for k in range(shards):
            f = root / f"in-{k:03d}.parquet"
            pq.write_table(pa.table({"text": [d.decode("utf-8", "surrogatepass")
                                              for d in docs[k::shards]]}), f,
                           row_group_size=256)
            files.append(f)
        del docs
        t0 = time.perf_counter()
        client, close = connect(address)
        startup = time.perf_counter() - t0
        try:
            workers = len(client.scheduler_info()["workers"])

            def once(label, k, c):
                d = root / f"{label}-{k}"
                t = time.perf_counter()
                encode_sharded(tokenizer, files, d, client=c)
                return time.perf_counter() - t, d

            once("single", "warm", None)
            once("cluster", "warm", client)
            single, cluster = [], []
            for k in range(runs):                   # interleaved: load on the machine
                single.append(once("single", k, None)[0])   # hits both alike
                cluster.append(once("cluster", k, client)[0])
            same = all((root / "single-0" / n).read_bytes() ==
                       (root / "cluster-0" / n).read_bytes()
                       for n in os.listdir(root / "single-0"))
        finally:
            close()
    s, c = statistics.median(single), statistics.median(cluster)
    row = dict(corpus=corpus, bytes=size, shards=shards, workers=workers, address=address,
               cpus=os.cpu_count(), runs=runs, single_s=s, cluster_s=c,
               single_mb_s=size / 1e6 / s, cluster_mb_s=size / 1e6 / c,
               overhead=c / s - 1, startup_s=startup, identical=same,
               single_all=single, cluster_all=cluster)
    out(f"{corpus}: {size / 1e6:.1f} MB in {shards} shards, {os.cpu_count()} cores, "
        f"median of {runs} runs (after one warm-up each)")
    out("| path | wall s | MB/s |")
    out("|---|---:|---:|")
    out(f"| one process (library threads on all cores) | {s:.3f} | {size / 1e6 / s:.1f} |")
    out(f"| {address} ({workers} workers) | {c:.3f} | {size / 1e6 / c:.1f} |")
    out(f"distributed overhead: {100 * (c / s - 1):+.1f}% (target <= +15%); cluster start "
        f"{startup:.2f} s (once per job); outputs identical: {'yes' if same else 'NO'}")
    return row
