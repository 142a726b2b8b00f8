"""Benchmarks (`asmbpe bench ...`).

`bench_pretok`: speed of a pre-tokenizer (`pretokenizer`: seed, SPEC §3, or an exact
one of SPEC §10; default nanochat) on the shared corpora, single thread, text already
in memory, median of `runs` timings (time.perf_counter):

- asm:    libasmbpe's asmbpe_split_offsets with the pre-tokenizer's id, one call per
          document, into one preallocated uint64 array, over all the documents read;
- oracle: its oracle regex (seed: `harness.dev.oracle.compiled()`, the others their
          pattern strings, `oracle.compiled_pattern(name)`; `findall`) over the same
          documents, already decoded to str;
- public: `harness.split_offsets(data, pretokenizer=name)`, the call users make, one
          call per document (split where it lies, unless it ends in the last 64
          bytes of a page, and returned as a fresh array);
- twin:   the naive Python twin (`harness.dev.twin.split_offsets(data, name)`) over
          the first `twin_mb` MB only (it is slow); its row has its own byte count.

Besides the shared corpora, `web-english` is english made to look like web English:
the same documents with typographic punctuation, as web pages have it (' -> U+2019,
"x -> U+201C x, the other " -> U+201D, ` - ` -> ` U+2014 `; about 1.3% non-ASCII
bytes, where english has none). `web_english` makes it.

Each row and each printed table names the pre-tokenizer.

Reading, concatenating and decoding are not timed. MB = 1e6 bytes.
"""
from __future__ import annotations

import gc
import json
import statistics
import time

import numpy as np

from . import twin
from .._lib import ffi, lib
from ..buffers import Padded
from ..corpora import InputError, corpora_dir, corpus_path, read_documents
from ..pretokenizers import DEFAULT, resolve

OUT_CAP = 1 << 22           # chunk end offsets per asmbpe_split_offsets call (32 MiB)
ROW_KEYS = ("impl", "task", "pretokenizer", "corpus", "bytes", "threads", "median_s",
            "mb_per_s")

__all__ = ["bench_pretok", "bench_documents", "cpu_model", "write_json", "ROW_KEYS"]


def cpu_model() -> str:
    """The CPU's model name from /proc/cpuinfo ('unknown CPU' when not found)."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "unknown CPU"


def bench_documents(corpus: str, limit_mb: float, input_path=None,
                    separator=None) -> tuple[list[bytes], str]:
    """The documents a benchmark runs on and the name its rows give them: the user's
    INPUT file (`--input`: any input `asmbpe train` reads, with `separator` for plain
    text) or else the shared corpus `corpus`; about `limit_mb` MB of whole documents
    (0 = all). InputError when the file or the corpus is missing or holds no text."""
    limit = int(limit_mb * 1e6) if limit_mb else None
    if input_path is not None:
        from ..corpora import check_file

        path = check_file(input_path)
        label = path.name
    else:
        path = corpus_path("english" if corpus == WEB_ENGLISH else corpus)
        label = corpus
        if not path.is_file():
            raise InputError(f"{path}: no such file (corpus {corpus!r}; put shared/ next to "
                             "the repository or set ASMBPE_CORPORA, or give --input FILE)")
    docs = read_documents(path, limit, separator=separator)
    if not any(docs):
        raise InputError(f"{path}: no text to benchmark")
    if input_path is None and corpus == WEB_ENGLISH:
        docs = web_english(docs)
    return docs, label


def write_json(rows: list[dict], path) -> None:
    """Write the rows as a JSON list, through a temporary name and a rename."""
    from ..files import write_atomic
    write_atomic(path, json.dumps(rows, indent=1) + "\n")


def _time(fn, runs: int) -> tuple[float, object]:
    """Median wall time of fn() over `runs` runs (gc off while timing), and its last result."""
    times = []
    result = None
    gc.collect()
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        for _ in range(max(1, runs)):
            t0 = time.perf_counter()
            result = fn()
            times.append(time.perf_counter() - t0)
    finally:
        if was_enabled:
            gc.enable()
    return statistics.median(times), result


def _row(impl: str, pretokenizer: str, corpus: str, nbytes: int, median_s: float) -> dict:
    return dict(impl=impl, task="pretok", pretokenizer=pretokenizer, corpus=corpus,
                bytes=nbytes, threads=1,
                median_s=median_s,
                mb_per_s=(nbytes / 1e6 / median_s) if median_s > 0 else float("inf"))


def _twin_prefix(docs: list[bytes], limit: int) -> list[bytes]:
    """The first `limit` bytes of the documents: whole documents, the last one cut."""
    out, total = [], 0
    for d in docs:
        if total >= limit:
            break
        take = d if total + len(d) <= limit else d[:limit - total]
        out.append(take)
        total += len(take)
    return out


def _asm_runner(docs: list[bytes], pretok: int):
    """Concatenate the documents once into one padded buffer; return a function that
    splits every document with one library call each (pre-tokenizer id `pretok`) and
    returns the chunk count."""
    buf = Padded(b"".join(docs))
    L = lib()
    split = L.asmbpe_split_offsets
    out = np.zeros(OUT_CAP, dtype=np.uint64)      # touched once, reused by every call
    out_ptr = ffi.cast("uint64_t *", ffi.from_buffer(out))
    jobs = []
    start = 0
    for d in docs:
        jobs.append((buf.ptr + start, len(d)))
        start += len(d)

    def run() -> int:
        chunks = 0
        for ptr, n in jobs:
            got = split(ptr, n, 0, out_ptr, OUT_CAP, pretok)
            chunks += got
            while got == OUT_CAP:                 # full: continue after the last chunk
                got = split(ptr, n, int(out[OUT_CAP - 1]), out_ptr, OUT_CAP, pretok)
                chunks += got
            if got < 0:
                raise RuntimeError(f"asmbpe_split_offsets failed with status {got}")
        return chunks

    run.keepalive = (buf, out)                    # the pointers point into these
    return run


WEB_ENGLISH = "web-english"


def web_english(docs: list[bytes]) -> list[bytes]:
    """english documents with web pages' typographic punctuation (see the module doc)."""
    import re
    opening = re.compile(r'"(?=\w)')
    out = []
    for d in docs:
        t = d.decode("utf-8", "surrogateescape").replace("'", "\u2019").replace(" - ", " \u2014 ")
        t = opening.sub("\u201c", t).replace('"', "\u201d")
        out.append(t.encode("utf-8", "surrogateescape"))
    return out


def _public_runner(docs: list[bytes], name: str):
    """A function that splits every document with harness.split_offsets and returns the
    chunk count."""
    from ..pretok import split_offsets

    def run() -> int:
        return sum(len(split_offsets(d, pretokenizer=name)) for d in docs)
    return run


def bench_pretok(corpora: list[str], limit_mb: float, twin_mb: float, runs: int = 5,
                 out=print, pretokenizer=DEFAULT, input_path=None,
                 separator=None) -> list[dict]:
    """Time asm, oracle and twin of `pretokenizer` (a name or id) on each named corpus
    (or on the file `input_path` alone); print a table per corpus and return the rows
    (impl, task, pretokenizer, corpus, bytes, threads, median_s, mb_per_s)."""
    pretok = resolve(pretokenizer)
    try:
        from .oracle import compiled, compiled_pattern
        rx = compiled() if pretok.name == "seed" else compiled_pattern(pretok.name)
    except ImportError:
        raise InputError("asmbpe bench needs the `regex` module: pip install -e '.[bench]'") from None
    lib()                                          # a missing library fails before reading

    if input_path is None and not corpora_dir().is_dir():
        raise InputError(f"corpora directory not found: {corpora_dir()} "
                         "(put shared/ next to the repository or set ASMBPE_CORPORA, or "
                         "give --input FILE)")

    rows: list[dict] = []
    out(f"pre-tokenizer {pretok} speed, single thread, median of {runs} run(s); "
        f"CPU: {cpu_model()}")
    for corpus in ([None] if input_path is not None else corpora):
        docs, name = bench_documents(corpus, limit_mb, input_path, separator)
        nbytes = sum(len(d) for d in docs)

        run_asm = _asm_runner(docs, pretok.id)
        t_asm, asm_chunks = _time(run_asm, runs)
        rows.append(_row("asm", pretok.name, name, nbytes, t_asm))
        t_public, public_chunks = _time(_public_runner(docs, pretok.name), runs)
        rows.append(_row("public", pretok.name, name, nbytes, t_public))
        if public_chunks != asm_chunks:
            out(f"  WARNING: harness.split_offsets found {public_chunks:,} chunks, the "
                f"library call {asm_chunks:,}")

        texts = [d.decode("utf-8", "surrogateescape") for d in docs]
        findall = rx.findall

        def run_oracle() -> int:
            return sum(len(findall(t)) for t in texts)

        t_oracle, oracle_chunks = _time(run_oracle, runs)
        rows.append(_row("oracle", pretok.name, name, nbytes, t_oracle))

        tdocs = _twin_prefix(docs, int(twin_mb * 1e6))
        tbytes = sum(len(d) for d in tdocs)
        twin_split = twin.split_offsets

        def run_twin() -> int:
            return sum(len(twin_split(d, pretok.name)) for d in tdocs)

        if tbytes:
            t_twin, _ = _time(run_twin, runs)
            rows.append(_row("twin", pretok.name, name, tbytes, t_twin))

        _print_table(out, f"{name}, {pretok.name}", len(docs), nbytes, asm_chunks,
                     rows[-4 if tbytes else -3:])
        if asm_chunks != oracle_chunks:
            out(f"  WARNING: chunk counts differ on {name} ({pretok.name}): asm "
                f"{asm_chunks:,}, oracle {oracle_chunks:,}")
    return rows


def _print_table(out, name: str, ndocs: int, nbytes: int, chunks: int, rows: list[dict]) -> None:
    out("")
    out(f"{name}: {nbytes / 1e6:.2f} MB, {ndocs:,} documents, {chunks:,} chunks")
    out(f"  {'impl':<8}{'bytes':>14}{'median s':>12}{'MB/s':>11}")
    for r in rows:
        out(f"  {r['impl']:<8}{r['bytes']:>14,}{r['median_s']:>12.4f}{r['mb_per_s']:>11.1f}")
    speed = {r["impl"]: r["mb_per_s"] for r in rows}
    ratios = [f"{impl}/{other} {speed[impl] / speed[other]:,.1f}x"
              for impl, other in (("asm", "oracle"), ("public", "oracle"), ("public", "asm"),
                                  ("asm", "twin"))
              if impl in speed and other in speed and speed[other] > 0]
    out("  " + "   ".join(ratios))
