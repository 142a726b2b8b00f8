"""Counting and encoding on more than one machine, with Dask (`dask.distributed`).

    client, close = connect("local:2")            # or "tcp://scheduler:8786"
    result = train_distributed(files, 32768, client)       # == harness.train(files, 32768)
    summary = encode_sharded(tokenizer, files, "out/", client=client)

A *shard* is one input file (use `asmbpe data prepare --shard-mb` to cut a corpus into
even ones). Paths must name the same files on every worker (a shared filesystem); the
driver sends absolute paths.

Training: each worker counts the words of its shards with the assembly counter
(`WordTable.count`, batch by batch, bounded by `batch_bytes`) and sends back the
table's `export()` arrays; the tables are merged in a tree (fan-in 4) on the workers
with the library's table merge (`WordTable.add`); the driver adds the root into one
table and runs the merge loop (`train_words`) on its own machine. Word counts do not
depend on how the documents were split up or in which order the tables were merged,
so the merges are those of `harness.train` on the same files, for any number of
workers.

Encoding: each input file becomes one `.tok` file, `OUTDIR/NNNNN-NAME.tok` (NNNNN its
position among the inputs), and `OUTDIR/manifest.json` lists them in order with their
counts and the tokenizer's merges hash. Concatenated in manifest order, the shards'
tokens are the tokens `asmbpe encode INPUT... -o one.tok` writes, and the shard files
are the same bytes whether they were written by one process (`client=None`, `asmbpe
encode --shards`) or by any number of workers.

Failures: workers write into `OUTDIR/.staging-PID-RUNID/` (PID: the driver's; each shard
through harness.files.AtomicFile, an unnamed file where the file system allows, else a
temporary name, renamed when complete). A worker that dies mid-shard is replaced by
Dask and its shard is run again elsewhere (a named temporary it leaves in the staging
directory goes with it). Only when every shard is done does the driver delete an old
manifest, move the shards into OUTDIR, write the new manifest (atomically) and then
remove the shards of an earlier run that the new set does not replace (those its
manifest names or named like shards, `NNNNN-NAME.tok`, that are `.tok` files and not
inputs of this run; nothing else in OUTDIR is touched). After a failure, SIGTERM or
SIGHUP the driver removes the staging directory (after a worker's failure it first
waits for the shards still running) and raises: no partial shard, no stray temporary
file and no manifest is left behind. A staging directory that a killed driver left is
removed by the next run into OUTDIR (harness.files.sweep_stale).
"""
from __future__ import annotations

import json
import os
import re
import stat
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .files import staging_dir, sweep_stale, write_atomic
from .pretokenizers import DEFAULT as DEFAULT_PRETOKENIZER

__all__ = ["connect", "train_distributed", "encode_sharded", "read_manifest",
           "writes_name", "MANIFEST", "ShardSummary", "count_shard", "merge_exports",
           "encode_shard"]

MANIFEST = "manifest.json"
MANIFEST_FORMAT = "asmbpe.tok-shards"
SHARD_RE = re.compile(r"\d{5}-.+\.tok")      # the names shard_name gives
FAN_IN = 4


# --------------------------------------------------------------------------- cluster

def connect(address: str):
    """(client, close): "local:N" starts a LocalCluster of N worker processes (one task
    at a time each) on this machine; anything else is a scheduler address."""
    try:
        from dask.distributed import Client, LocalCluster
    except ImportError:
        from .corpora import InputError

        raise InputError("--cluster needs dask.distributed (pip install "
                         "'dask[distributed]')") from None
    import logging

    m = re.fullmatch(r"local(?::(\d+))?", address.strip())
    if m:
        n = int(m.group(1) or (os.cpu_count() or 1))
        if n < 1:
            raise ValueError("local:N needs N >= 1")
        cluster = LocalCluster(n_workers=n, threads_per_worker=1, processes=True,
                               dashboard_address=":0", silence_logs=logging.ERROR)
        client = Client(cluster)

        def close():
            client.close()
            cluster.close()
        return client, close
    try:
        client = Client(address, timeout=30)
    except (OSError, TimeoutError) as e:
        from .corpora import InputError

        raise InputError(f"cannot reach the Dask scheduler at {address}: {e}") from None
    return client, client.close


def _threads_per_worker(client) -> dict:
    """Library threads for a task on each worker: its machine's cores shared out over
    the task slots of every worker on that machine (no oversubscription)."""
    cpus = client.run(os.cpu_count)
    workers = _workers(client)
    slots: dict[str, int] = {}
    for addr, w in workers.items():
        host = w.get("host") or addr.rsplit(":", 1)[0]
        slots[host] = slots.get(host, 0) + int(w.get("nthreads", 1))
    out = {}
    for addr, w in workers.items():
        host = w.get("host") or addr.rsplit(":", 1)[0]
        out[addr] = max(1, int(cpus.get(addr) or 1) // max(1, slots[host]))
    return out


def _workers(client) -> dict:
    try:
        return client.scheduler_info(n_workers=-1)["workers"]   # newer: 5 by default
    except TypeError:
        return client.scheduler_info()["workers"]


def _my_threads(threads, threads_map):
    if threads is not None:
        return threads
    if threads_map:
        try:
            from dask.distributed import get_worker

            return threads_map.get(get_worker().address)
        except (ImportError, ValueError):
            pass
    return None


# -------------------------------------------------------------------------- training

def count_shard(path: str, *, separator=None, max_word_bytes: int = 256,
                batch_bytes: int = 16 << 20, threads=None, threads_map=None,
                pretokenizer=DEFAULT_PRETOKENIZER, read_options=None):
    """Count the words of one file, cut by `pretokenizer`, read as `read_options`
    (harness.corpora.ReadOptions) or `separator` say; (word bytes, ends, counts, text
    bytes, documents)."""
    from .buffers import Packer
    from .corpora import iter_batches, prefetch
    from .train import MAX_THREADS, WordTable

    threads = _my_threads(threads, threads_map) or min(os.cpu_count() or 1, MAX_THREADS)
    table = WordTable(pretokenizer)
    size = docs_n = 0
    # one Packer reused for every batch (as harness.train does): no fresh buffer each
    packer = Packer()
    try:
        for docs in prefetch(iter_batches(path, batch_bytes, separator=separator,
                                          read_options=read_options)):
            ptr, ends, n = packer.pack(docs)
            table._count_packed(ptr, ends, threads, max_word_bytes)
            size += n
            docs_n += len(docs)
            del docs, ptr, ends
        data, ends, counts = table.export()
    finally:
        table.close()
    return data, ends, counts, size, docs_n


def merge_exports(*parts):
    """Merge exported tables with the library's table merge; the same 5-tuple."""
    from .train import WordTable

    table = WordTable()
    try:
        for data, ends, counts, _, _ in parts:
            table.add(data, ends, counts)
        data, ends, counts = table.export()
    finally:
        table.close()
    return data, ends, counts, sum(p[3] for p in parts), sum(p[4] for p in parts)


def train_distributed(inputs, vocab_size: int, client, *, threads=None, naive=False,
                      max_word_bytes: int = 256, min_count: int = 1, verify=False,
                      separator=None, batch_bytes: int = 16 << 20, progress=None,
                      fan_in: int = FAN_IN, pretokenizer=DEFAULT_PRETOKENIZER,
                      read_options=None):
    """harness.train on a Dask cluster: count per file on the workers, merge the tables
    in a tree on the workers, learn the merges here (see the module doc). `threads`:
    library threads per counting task (default: the worker machine's cores shared
    out) and for the local merge loop (default: all cores here). `pretokenizer`,
    `separator`, `read_options`: as for harness.train."""
    from dask.distributed import as_completed

    from .corpora import check_file, estimate_bytes
    from .pretokenizers import resolve
    from .train import WordTable, train_words

    t_start = time.perf_counter()
    pretok = resolve(pretokenizer)
    files = [str(check_file(p).resolve()) for p in inputs]
    report = progress or (lambda phase, done, total: None)
    total_est = estimate_bytes(files)
    threads_map = None if threads is not None else _threads_per_worker(client)
    run = uuid.uuid4().hex[:8]
    report("count", 0, total_est)
    t0 = time.perf_counter()
    level = [client.submit(count_shard, f, separator=separator, read_options=read_options,
                           max_word_bytes=max_word_bytes, batch_bytes=batch_bytes,
                           threads=threads, threads_map=threads_map,
                           pretokenizer=pretok.name, key=f"asmbpe-count-{run}-{k}",
                           pure=False)
             for k, f in enumerate(files)]
    sizes = {fut.key: estimate_bytes([f]) or 0 for fut, f in zip(level, files)}
    tree = level
    depth = 0
    try:
        while len(tree) > 1:                    # the merge tree, submitted up front
            depth += 1
            tree = [client.submit(merge_exports, *tree[i:i + fan_in],
                                  key=f"asmbpe-merge-{run}-{depth}-{i}", pure=False)
                    if len(tree[i:i + fan_in]) > 1 else tree[i]
                    for i in range(0, len(tree), fan_in)]
        done = 0
        for fut in as_completed(level):         # progress as the leaves finish (their
            if fut.status != "finished":        # tables stay on the workers)
                fut.result()                    # raises the worker's exception
            done += sizes[fut.key]
            report("count", done, total_est)
        data, ends, counts, bytes_in, documents = tree[0].result()
    except BaseException:
        client.cancel(list(level) + list(tree))
        raise
    report("count", bytes_in, total_est)
    t1 = time.perf_counter()
    table = WordTable(pretok)
    try:
        table.add(data, ends, counts)
        del data, ends, counts
        seconds = dict(read=0.0, count=time.perf_counter() - t0)
        result = train_words(table, vocab_size, threads, naive=naive, min_count=min_count,
                             verify=verify, progress=progress, _seconds=seconds,
                             _t_start=t_start)
    finally:
        table.close()
    result.stats.update(bytes_in=bytes_in, documents=documents,
                        count_threads=threads or 0, shards=len(files),
                        workers=len(_workers(client)),
                        tree_depth=depth)
    result.stats["seconds"]["gather"] = time.perf_counter() - t1
    return result


# -------------------------------------------------------------------------- encoding

_TOKENIZERS: dict = {}


def _tokenizer(tok_bytes: bytes):
    """The Tokenizer of a tokenizer.bin image, kept per process so the encoder (and its
    chunk caches) is built once per worker."""
    from .tokenizer import Tokenizer

    key = hash(tok_bytes)
    tok = _TOKENIZERS.get(key)
    if tok is None:
        _TOKENIZERS.clear()
        tok = _TOKENIZERS[key] = Tokenizer.from_bytes(tok_bytes)
    return tok


def encode_shard(path: str, tok_bytes: bytes, out: str, *, chat=False, separator=None,
                 batch_bytes: int = 8 << 20, threads=None, threads_map=None,
                 doc_token="default", doc_token_at="start", read_options=None) -> dict:
    """Encode one file into the .tok file `out` (atomic); its counts. tok_bytes:
    tokenizer.bin, version 1 or 2 (a loaded vocabulary)."""
    from .pipeline import encode_to_tok

    tok = _tokenizer(tok_bytes)
    s = encode_to_tok(tok, [path], out, chat=chat, threads=_my_threads(threads, threads_map),
                      separator=separator, batch_bytes=batch_bytes, doc_token=doc_token,
                      doc_token_at=doc_token_at, read_options=read_options)
    return dict(tokens=s.tokens, documents=s.documents, source_bytes=s.source_bytes,
                special_tokens=s.special_tokens)


@dataclass
class ShardSummary:
    """What encode_sharded wrote."""

    outdir: Path
    manifest: Path
    shards: list            # the manifest's shard entries
    tokens: int
    documents: int
    source_bytes: int
    special_tokens: int

    @property
    def bytes_per_token(self) -> float:
        text = self.tokens - self.special_tokens
        return self.source_bytes / text if text else 0.0


def shard_name(index: int, path) -> str:
    name = Path(path).name
    for suffix in (".gz", ".zst", ".zstd", ".parquet", ".jsonl", ".ndjson", ".txt"):
        if name.lower().endswith(suffix):
            name = name[:-len(suffix)]
    name = re.sub(r"[^A-Za-z0-9._-]+", "_", name).strip("._") or "shard"
    return f"{index:05d}-{name[:80]}.tok"


def encode_sharded(tokenizer, inputs, outdir, *, client=None, chat=False, separator=None,
                   threads=None, batch_bytes: int = 8 << 20, progress=None,
                   doc_token="default", doc_token_at="start",
                   read_options=None) -> ShardSummary:
    """Encode each input file into its own .tok shard in `outdir` plus manifest.json
    (see the module doc), on the Dask `client`'s workers, or here one after another
    when client is None. progress(source bytes done) after each shard. separator /
    read_options: how the files are read (as for harness.pipeline.encode_to_tok)."""
    from .corpora import check_file

    paths = [check_file(p) for p in inputs]
    out = Path(outdir)
    if out.exists() and not out.is_dir():
        from .corpora import InputError

        raise InputError(f"{out}: exists and is not a directory (the sharded output is a "
                         "directory)")
    out.mkdir(parents=True, exist_ok=True)
    sweep_stale(out)                        # what killed runs left
    run = uuid.uuid4().hex[:12]
    names = [shard_name(i, p) for i, p in enumerate(paths)]
    tok_bytes = tokenizer.to_bytes()
    kw = dict(chat=chat, separator=separator, batch_bytes=batch_bytes, doc_token=doc_token,
              doc_token_at=doc_token_at, read_options=read_options)
    results: list = [None] * len(paths)
    done_bytes = 0
    with staging_dir(out, run) as staging:      # removed on the way out, whatever happens
        if client is None:
            for i, p in enumerate(paths):
                results[i] = encode_shard(str(p), tok_bytes, str(staging / names[i]),
                                          threads=threads, **kw)
                done_bytes += results[i]["source_bytes"]
                if progress:
                    progress(done_bytes)
        else:
            _encode_on_cluster(client, paths, names, staging, tok_bytes, threads, kw,
                               results, progress, run)
        # everything is done: replace the old manifest, move the shards, write the new
        # one, then remove the old run's shards that the new set does not replace
        manifest = out / MANIFEST
        stale = _old_shards(out, set(names), paths)
        manifest.unlink(missing_ok=True)
        for name in names:
            os.replace(staging / name, out / name)
        entries = [dict(file=names[i], input=str(paths[i]), tokens=r["tokens"],
                        documents=r["documents"], source_bytes=r["source_bytes"])
                   for i, r in enumerate(results)]
        doc = dict(format=MANIFEST_FORMAT, version=1,
                   tokenizer_hash=f"0x{tokenizer.merges_hash:016x}",
                   vocab_size=tokenizer.vocab_size, chat=bool(chat),
                   tokens=sum(e["tokens"] for e in entries),
                   documents=sum(e["documents"] for e in entries),
                   source_bytes=sum(e["source_bytes"] for e in entries), shards=entries)
        write_atomic(manifest, json.dumps(doc, indent=1) + "\n")
        for p in stale:
            try:
                p.unlink()
            except OSError:                 # the new set is complete all the same
                pass
    return ShardSummary(out, manifest, entries, doc["tokens"], doc["documents"],
                        doc["source_bytes"], sum(r["special_tokens"] for r in results))


def writes_name(name: str) -> bool:
    """Whether encode_sharded may write, replace or remove a file of this name in its
    output directory (a shard name or the manifest)."""
    return name == MANIFEST or SHARD_RE.fullmatch(name) is not None


def _old_shards(out: Path, new: set, inputs) -> list[Path]:
    """The shards of an earlier run in `out` that a run writing the shard names `new`
    does not replace: the files its manifest names and those named like shards, where
    they are regular `.tok` files (the magic) and none of `inputs`."""
    from .tokfile import MAGIC

    names = {e.name for e in os.scandir(out) if SHARD_RE.fullmatch(e.name)}
    try:
        doc = json.loads((out / MANIFEST).read_text())
        names |= {e["file"] for e in doc["shards"]
                  if isinstance(e["file"], str) and Path(e["file"]).name == e["file"]}
    except (OSError, ValueError, TypeError, KeyError):
        pass                                # no old manifest, or not one of ours
    keep = set()
    for p in inputs:
        try:
            st = os.stat(p)
            keep.add((st.st_dev, st.st_ino))
        except OSError:
            pass
    old = []
    for name in sorted(names - new):
        p = out / name
        try:
            st = p.lstat()
            if not stat.S_ISREG(st.st_mode) or (st.st_dev, st.st_ino) in keep:
                continue
            with open(p, "rb") as f:
                if f.read(len(MAGIC)) == MAGIC:
                    old.append(p)
        except OSError:
            pass
    return old


def _encode_on_cluster(client, paths, names, staging, tok_bytes, threads, kw, results,
                       progress, run):
    from dask.distributed import as_completed, wait

    threads_map = None if threads is not None else _threads_per_worker(client)
    tok_future = client.scatter(tok_bytes, broadcast=True)
    futures = {client.submit(encode_shard, str(p.resolve()), tok_future,
                             str((staging / names[i]).resolve()), threads=threads,
                             threads_map=threads_map, key=f"asmbpe-encode-{run}-{i}",
                             pure=False, **kw): i
               for i, p in enumerate(paths)}
    done_bytes = 0
    error = None
    for fut in as_completed(list(futures)):
        if fut.status == "error" or fut.status == "cancelled":
            if error is None:
                try:
                    fut.result()
                except BaseException as e:      # the worker's exception, re-raised here
                    error = e
            continue
        i = futures[fut]
        results[i] = fut.result()
        done_bytes += results[i]["source_bytes"]
        if progress:
            progress(done_bytes)
    if error is not None:
        # no shard may still be running when the staging directory goes
        wait(list(futures))
        raise error


# --------------------------------------------------------------------------- reading

def read_manifest(outdir) -> dict:
    """The manifest of a sharded output, checked against the shard files' headers."""
    from .tokfile import read_tok

    out = Path(outdir)
    doc = json.loads((out / MANIFEST).read_text())
    if doc.get("format") != MANIFEST_FORMAT:
        raise ValueError(f"{out / MANIFEST}: not an asmbpe shard manifest")
    for e in doc["shards"]:
        tf = read_tok(out / e["file"])
        if (tf.n_tokens, tf.n_documents, tf.source_bytes) != \
                (e["tokens"], e["documents"], e["source_bytes"]) or \
                f"0x{tf.merges_hash:016x}" != doc["tokenizer_hash"]:
            raise ValueError(f"{out / e['file']}: does not match the manifest")
    return doc


def shard_tokens(outdir) -> np.ndarray:
    """Every shard's tokens concatenated in manifest order (for checks)."""
    from .tokfile import read_tok

    doc = read_manifest(outdir)
    parts = [np.asarray(read_tok(Path(outdir) / e["file"]).tokens) for e in doc["shards"]]
    return np.concatenate(parts) if parts else np.zeros(0, dtype="<u2")
