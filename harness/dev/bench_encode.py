"""`asmbpe bench encode`: encoding speed against the encoders a user could pick instead.

In one run, on the same documents (by default the first 100 MB of whole documents of
english.parquet) and the same vocabulary — trained by asmbpe on those documents at
--vocab-size with --pretokenizer (untimed), or the --tokenizer given — and exported with
harness.export (the exports carry the tokenizer's pre-tokenizer pattern):

- asmbpe:     Tokenizer.encode_many(documents as bytes, threads=N) — no <|bos|>; its
              native output, one flat uint16 array plus per-document counts;
- tiktoken:   the export loaded with harness.export.load_tiktoken,
              Encoding.encode_ordinary_batch(documents as str, num_threads=N)
              (list of lists of ids);
- tokenizers: Hugging Face tokenizers, the exported tokenizer.json loaded with
              harness.export.load_hf (which turns on encode_special_tokens, so that
              special-token text is ordinary text, as in asmbpe),
              encode_batch_fast(documents as str, add_special_tokens=False) — the batch
              call without offsets, the fastest it offers (list of Encoding objects);
              its rayon pool gets N threads through RAYON_NUM_THREADS;
- gigatoken:  gigatoken.Tokenizer.from_tiktoken(the tiktoken export,
              pretokenizer="gpt4"), encode_batch(documents as bytes, parallel=N > 1),
              timed on its native awkward-array output; rayon gets N threads through
              RAYON_NUM_THREADS. It cannot take asmbpe's pre-tokenizer pattern, so it
              splits with GPT-4's: its ids are expected to differ from asmbpe's (row
              "gigatoken (gpt4 pattern)"; the speed is still that of the same merges on
              the same text).

Each implementation runs at 1 thread and at N threads (--threads, default all cores),
each (implementation, threads) pair in a fresh subprocess (`python -m
harness.dev.bench_encode --worker ...`) so that memory, caches and thread pools do not
mix. The worker loads the documents (in the form its encoder takes) untimed, then times
the batch encode over all documents (time.perf_counter around the call only, garbage
collection off) in two ways, `runs` times each, and reports the medians:

- first pass (`first_s`, `first_mb_per_s`): each run loads a new encoder object
  (untimed) and starts it with one call on 64 bytes (its threads, asmbpe's per-thread
  state pages, rayon's pool), then encodes the documents once: no cache has seen the
  text, as when a user encodes new text;
- again (`median_s`, `mb_per_s`): the last of those objects encodes the same documents
  again. An encoder whose cache keeps every word it has seen (gigatoken's does) then
  finds all of them there; asmbpe's per-thread caches hold 65,536 chunks (SPEC §6).

MB/s = source bytes / 1e6 / median seconds.

load (`load_s`): the first run's time to read the vocabulary file and make the encoder
(`_loading()` around those statements only, not the imports), plus its start call on 64
bytes: what a user waits for before the first document (gigatoken builds part of its
tables on the first call; bpe-openai's `get_encoding` keeps what it loaded for the next
runs, so only the first run's load is the load).

With `vocab` ("cl100k_base" or "o200k_base", from ../shared/vocabs; or a path to
one of those .tiktoken[.gz] files) the vocabulary is that published one instead of one
trained here: asmbpe encodes with `harness.rank.RankEncoder` (`encode_many`, u32 ids),
tiktoken with the file and its own pattern and specials (`encode_ordinary_batch`),
gigatoken with `Tokenizer.from_tiktoken` (which knows the file by its name: its own
pattern for it), bpe-openai (PyPI; GitHub rust-gems' linear-time encoder) with
`get_encoding(name)`, its own bundled copy of the encoding (`encode_ordinary_batch`,
documents as str, its thread pool of N), and tokenizers is left out (Oniguruma misreads
cl100k's pattern). The ids are compared with tiktoken's, the truth for these files.

gigatoken is fed the way it is fastest, one `gigatoken.BytesSource` holding all the
documents with a separator byte (0xFF, never in UTF-8), for every vocabulary.

Correctness: after timing, the worker turns the last call's output into one flat
uint32 array of ids plus per-document counts (untimed) and reports their SHA-256 and a
CRC-32 per document; `ids_equal` is whether the digest equals asmbpe's at 1 thread
(tiktoken's with `vocab`)
(asmbpe's own N-thread row included), and `docs_differ` counts the documents whose
ids differ.
"""
from __future__ import annotations

import argparse
import contextlib
import gc
import hashlib
import importlib.util
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import zlib
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent.parent

_LOAD = [0.0]           # seconds spent in _loading() since the worker last reset it


@contextlib.contextmanager
def _loading():
    """Time the statements that load a vocabulary and make an encoder (load_s)."""
    t0 = time.perf_counter()
    try:
        yield
    finally:
        _LOAD[0] += time.perf_counter() - t0

SEP = b"\xff"                               # never in UTF-8 text

IMPLS = ("asmbpe", "tiktoken", "tokenizers", "gigatoken", "bpe-openai")
OWN_VOCAB_IMPLS = IMPLS[:4]                 # (bpe-openai has only its bundled encodings)
LABELS = {"gigatoken": "gigatoken (gpt4 pattern)"}
MODULES = {"asmbpe": None, "tiktoken": "tiktoken", "tokenizers": "tokenizers",
           "gigatoken": "gigatoken", "bpe-openai": "bpe_openai"}
EXPECTED_TO_DIFFER = {"gigatoken"}
ROW_KEYS = ("impl", "task", "corpus", "bytes", "threads", "runs", "load_s", "first_s",
            "first_mb_per_s", "first_vs_asmbpe", "median_s", "mb_per_s", "tokens", "ids_equal",
            "docs_differ", "vs_asmbpe")

# the files the parent writes into the worker's directory
BLOB, TOKENIZER_BIN, TIKTOKEN_FILE, HF_FILE = ("docs.bin", "tokenizer.bin", "asmbpe.tiktoken",
                                               "tokenizer.json")

__all__ = ["bench_encode", "IMPLS", "LABELS", "ROW_KEYS", "installed", "write_rows"]


def installed(impl: str) -> bool:
    mod = MODULES[impl]
    return mod is None or importlib.util.find_spec(mod) is not None


# --------------------------------------------------------------------------- worker

def _vocab_encoder(impl: str, workdir: Path, docs: list[bytes], threads: int, vocab: str):
    """_encoder's triple for a published vocabulary (workdir / f"{vocab}.tiktoken")."""
    path = workdir / f"{vocab}.tiktoken"
    tiny = [docs[0][:64]] if docs else [b"x"]
    if impl == "asmbpe":
        from ..rank import RankEncoder
        from ..vocab import from_tiktoken

        with _loading():
            enc = RankEncoder(from_tiktoken(path))
        return (lambda: enc.encode_many(docs, threads),
                lambda r: (r[0].astype(np.uint32), r[1].astype(np.int64)),
                lambda: enc.encode_many(tiny, threads))
    if impl == "gigatoken":
        return _gigatoken(gigatoken_path=path, pretokenizer=None, workdir=workdir,
                          threads=threads, tiny=tiny)
    if impl == "tiktoken":
        import tiktoken
        from tiktoken.load import load_tiktoken_bpe

        from ..pretokenizers import EXACT_PATTERNS
        from ..vocab import KNOWN_ENCODINGS

        known = KNOWN_ENCODINGS[vocab]
        with _loading():
            enc = tiktoken.Encoding(vocab, pat_str=EXACT_PATTERNS[known.pretokenizer],
                                    mergeable_ranks=load_tiktoken_bpe(str(path)),
                                    special_tokens=known.specials)
        texts = [d.decode("utf-8") for d in docs]
        tiny_texts = [t.decode("utf-8", "replace") for t in tiny]
        return (lambda: enc.encode_ordinary_batch(texts, num_threads=threads), _from_lists,
                lambda: enc.encode_ordinary_batch(tiny_texts, num_threads=threads))
    if impl == "bpe-openai":
        import bpe_openai                       # (its own copy of the encoding, bundled)

        with _loading():
            enc = bpe_openai.get_encoding(vocab)
        texts = [d.decode("utf-8") for d in docs]
        tiny_texts = [t.decode("utf-8", "replace") for t in tiny]
        return (lambda: enc.encode_ordinary_batch(texts, num_threads=threads), _from_lists,
                lambda: enc.encode_ordinary_batch(tiny_texts, num_threads=threads))
    raise ValueError(f"{impl} does not take a published vocabulary here")


def _gigatoken(gigatoken_path: Path, pretokenizer, workdir: Path, threads: int, tiny):
    """gigatoken fed one BytesSource (the blob with its separators), its fastest input."""
    import awkward as ak
    import gigatoken

    kw = {} if pretokenizer is None else dict(pretokenizer=pretokenizer)
    with _loading():
        g = gigatoken.Tokenizer.from_tiktoken(gigatoken_path, **kw)
    blob = (workdir / BLOB).read_bytes()
    return (lambda: g.encode_batch(gigatoken.BytesSource([blob], separator=SEP),
                                   parallel=threads > 1),
            lambda r: (np.asarray(ak.flatten(r), dtype=np.uint32),
                       np.asarray(ak.num(r), dtype=np.int64)),
            lambda: g.encode_batch(tiny, parallel=threads > 1))


def _encoder(impl: str, workdir: Path, docs: list[bytes], threads: int, vocab: str | None = None):
    """(encode(): the timed call, to_ids(result) -> (flat uint32 ids, counts),
    start(): one untimed call on 64 bytes, which starts the encoder's threads and
    lazily built state: asmbpe's per-thread state pages, rayon's pool)."""
    from ..tokenizer import Tokenizer

    if vocab:
        return _vocab_encoder(impl, workdir, docs, threads, vocab)
    tiny = [docs[0][:64]] if docs else [b""]
    if impl == "asmbpe":
        with _loading():
            tok = Tokenizer.load(workdir / TOKENIZER_BIN)
        return (lambda: tok.encode_many(docs, threads),
                lambda r: (r[0].astype(np.uint32), r[1].astype(np.int64)),
                lambda: tok.encode_many(tiny, threads))
    if impl == "gigatoken":
        return _gigatoken(workdir / TIKTOKEN_FILE, "gpt4", workdir, threads, tiny)
    texts = [d.decode("utf-8") for d in docs]
    tiny_texts = [t.decode("utf-8", "replace") for t in tiny]
    if impl == "tiktoken":
        from ..export import load_tiktoken

        with _loading():
            enc = load_tiktoken(workdir / TIKTOKEN_FILE, Tokenizer.load(workdir / TOKENIZER_BIN))
        return (lambda: enc.encode_ordinary_batch(texts, num_threads=threads), _from_lists,
                lambda: enc.encode_ordinary_batch(tiny_texts, num_threads=threads))
    if impl == "tokenizers":
        from ..export import load_hf

        with _loading():
            hf = load_hf(workdir / HF_FILE)
        return (lambda: hf.encode_batch_fast(texts, add_special_tokens=False),
                lambda r: _from_lists([e.ids for e in r]),
                lambda: hf.encode_batch_fast(tiny_texts, add_special_tokens=False))
    raise ValueError(f"unknown implementation {impl!r}")


def _from_lists(lists) -> tuple[np.ndarray, np.ndarray]:
    counts = np.fromiter((len(x) for x in lists), dtype=np.int64, count=len(lists))
    flat = np.fromiter((i for x in lists for i in x), dtype=np.uint32, count=int(counts.sum()))
    return flat, counts


def _digests(flat: np.ndarray, counts: np.ndarray) -> tuple[str, list[int]]:
    """SHA-256 of (counts, ids), and the CRC-32 of each document's ids."""
    flat = np.ascontiguousarray(flat, dtype="<u4")
    counts = np.ascontiguousarray(counts, dtype="<u8")
    digest = hashlib.sha256(counts.tobytes() + flat.tobytes()).hexdigest()
    view = memoryview(flat.view(np.uint8))
    crcs, pos = [], 0
    for n in counts.tolist():
        crcs.append(zlib.crc32(view[4 * pos:4 * (pos + n)]))
        pos += n
    return digest, crcs


def worker(impl: str, workdir: str, threads: int, runs: int, out_path: str,
           vocab: str | None = None) -> None:
    workdir = Path(workdir)
    docs = (workdir / BLOB).read_bytes().split(SEP)

    def timed(encode):
        gc.collect()
        gc.disable()
        t0 = time.perf_counter()
        result = encode()
        elapsed = time.perf_counter() - t0
        gc.enable()
        return elapsed, result

    # first passes: a new encoder object each time (loaded untimed, thread pools
    # started by a call on 64 bytes), so no cache remembers the text
    first, load = [], []
    for _ in range(runs):
        result = None                           # free the last output and encoder
        encode = None
        _LOAD[0] = 0.0
        encode, to_ids, start = _encoder(impl, workdir, docs, threads, vocab)
        with _loading():
            start()
        load.append(_LOAD[0])
        elapsed, result = timed(encode)
        first.append(elapsed)
    # the same text again through the last encoder: its caches hold the text now
    times = []
    for _ in range(runs):
        result = None
        elapsed, result = timed(encode)
        times.append(elapsed)
    flat, counts = to_ids(result)
    digest, crcs = _digests(flat, counts)
    Path(out_path).write_text(json.dumps(dict(first=first, load=load, times=times, tokens=int(flat.size),
                                              digest=digest, doc_crcs=crcs)))


# ----------------------------------------------------------------------------- parent

def _run_worker(impl: str, workdir: Path, threads: int, runs: int,
                timeout: float | None, vocab: str | None = None) -> dict:
    out = workdir / f"{impl}-{threads}.json"
    out.unlink(missing_ok=True)
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT)] + (
        [env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))
    env["RAYON_NUM_THREADS"] = env["RAYON_RS_NUM_CPUS"] = str(threads)
    env["TOKENIZERS_PARALLELISM"] = "true" if threads > 1 else "false"
    cmd = [sys.executable, "-m", "harness.dev.bench_encode", "--worker", impl, "--dir",
           str(workdir), "--threads", str(threads), "--runs", str(runs), "--out", str(out)]
    if vocab:
        cmd += ["--vocab", vocab]
    try:
        p = subprocess.run(cmd, env=env, cwd=ROOT, capture_output=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return dict(error=f"timed out after {timeout:.0f} s")
    if p.returncode != 0 or not out.is_file():
        tail = (p.stderr or p.stdout).decode("utf-8", "replace").strip().splitlines()
        return dict(error=f"exit status {p.returncode}: {tail[-1] if tail else 'no output'}")
    return json.loads(out.read_text())


def _prepare(workdir: Path, docs: list[bytes], tokenizer, impls) -> dict[str, str]:
    """Write the documents, tokenizer.bin and the exports the workers need; returns
    {impl: error} for the implementations whose export failed."""
    from .. import export

    (workdir / BLOB).write_bytes(SEP.join(docs))
    tokenizer.save(workdir / TOKENIZER_BIN)
    failed = {}
    if {"tiktoken", "gigatoken"} & set(impls):
        try:
            export.export_tiktoken(tokenizer, workdir / TIKTOKEN_FILE)
        except Exception as e:              # reported in the table, the rest still runs
            failed.update({i: f"tiktoken export failed: {e}" for i in ("tiktoken", "gigatoken")})
    if "tokenizers" in impls:
        try:
            export.export_hf(tokenizer, workdir / HF_FILE)
        except Exception as e:
            failed["tokenizers"] = f"tokenizer.json export failed: {e}"
    return failed


VOCAB_IMPLS = ("tiktoken", "asmbpe", "gigatoken", "bpe-openai")  # tiktoken first: the reference


def _vocab_file(vocab: str) -> tuple[str, bytes]:
    """(the encoding's name, the decompressed ranks file) of a published vocabulary,
    by name (../shared/vocabs) or path."""
    import gzip

    from ..corpora import InputError, corpora_dir
    from ..vocab import _KNOWN_BY_SHA
    import hashlib as _h

    path = Path(vocab)
    if not path.is_file():
        path = corpora_dir().parent / "vocabs" / f"{vocab}.tiktoken.gz"
    if not path.is_file():
        raise InputError(f"--vocab {vocab}: no such file (nor {path})")
    data = path.read_bytes()
    if data[:2] == b"\x1f\x8b":
        data = gzip.decompress(data)
    known = _KNOWN_BY_SHA.get(_h.sha256(data).hexdigest())
    if known is None:
        raise InputError(f"--vocab {vocab}: not cl100k_base or o200k_base (by its sha256)")
    return known.name, data


def bench_encode(corpus: str, limit_mb: float, vocab_size: int, runs: int, threads: int,
                 impls=IMPLS, tokenizer=None, out=print, timeout: float | None = None,
                 pretokenizer: str = "nanochat", vocab: str | None = None,
                 input_path=None, separator=None) -> list[dict]:
    """Time every installed implementation at 1 and `threads` threads on the same
    documents and vocabulary (trained here with `pretokenizer` unless `tokenizer` is
    given, or the published `vocab`); print a table and return the rows (ROW_KEYS, plus
    label / error details)."""
    from .bench import cpu_model
    from ..corpora import InputError
    from ..train import MAX_TRAIN_VOCAB as MAX_VOCAB
    from ..train import MIN_VOCAB

    vocab_data = None
    if vocab:
        vocab, vocab_data = _vocab_file(vocab)
    if tokenizer is None and vocab is None and not MIN_VOCAB < vocab_size <= MAX_VOCAB:
        raise InputError(f"--vocab-size must be between {MIN_VOCAB + 1} and {MAX_VOCAB}, "
                         f"got {vocab_size}")
    if threads < 1:
        raise InputError(f"--threads must be >= 1, got {threads}")
    from .._lib import lib
    from .bench import bench_documents

    lib()                                           # a missing library fails first
    docs, corpus = bench_documents(corpus, limit_mb, input_path, separator)
    nbytes = sum(len(d) for d in docs)
    impls = [i for i in (VOCAB_IMPLS if vocab else OWN_VOCAB_IMPLS) if i in impls]
    skipped = [i for i in impls if not installed(i)]
    impls = [i for i in impls if i not in skipped]
    if vocab:
        pass
    elif tokenizer is None:
        import harness

        t0 = time.perf_counter()
        tokenizer = harness.train(docs, vocab_size, pretokenizer=pretokenizer).tokenizer
        out(f"trained the vocabulary with asmbpe in {time.perf_counter() - t0:.1f} s "
            f"(untimed): {tokenizer!r}")
    thread_counts = sorted({1, threads})

    vocab_name = vocab if vocab else tokenizer.vocab_size
    out(f"encode: {corpus}, {nbytes / 1e6:.1f} MB, {len(docs)} documents, vocab "
        f"{vocab_name}, threads {' and '.join(map(str, thread_counts))}, median "
        f"of {runs} run(s) in one fresh process per implementation and thread count; "
        f"CPU: {cpu_model()} ({os.cpu_count()} logical)")
    for i in skipped:
        out(f"  {LABELS.get(i, i)}: not installed (pip install {MODULES[i]}), skipped")

    rows: list[dict] = []
    with tempfile.TemporaryDirectory(prefix="asmbpe-bench-") as tmpdir:
        workdir = Path(tmpdir)
        if vocab:
            (workdir / BLOB).write_bytes(SEP.join(docs))
            (workdir / f"{vocab}.tiktoken").write_bytes(vocab_data)
            failed = {}
        else:
            failed = _prepare(workdir, docs, tokenizer, impls)
        del docs
        reference = None
        ref_impl = "tiktoken" if vocab else "asmbpe"
        for impl in impls:
            for t in thread_counts:
                res = dict(error=failed[impl]) if impl in failed else \
                    _run_worker(impl, workdir, t, runs, timeout, vocab)
                row = dict(impl=impl if vocab else LABELS.get(impl, impl), task="encode",
                           corpus=corpus,
                           bytes=nbytes, threads=t, runs=runs, load_s=None, first_s=None,
                           first_mb_per_s=None, first_vs_asmbpe=None, median_s=None,
                           mb_per_s=None, tokens=None, ids_equal=None, docs_differ=None,
                           vs_asmbpe=None)
                if "error" in res:
                    out(f"  {row['impl']} at {t} thread(s): failed: {res['error']}")
                    row["error"] = res["error"]
                    rows.append(row)
                    continue
                if impl == ref_impl and reference is None:
                    reference = res
                median = statistics.median(res["times"])
                first = statistics.median(res["first"])
                row.update(load_s=res["load"][0], first_s=first,
                           first_mb_per_s=nbytes / 1e6 / first if first > 0 else None,
                           median_s=median,
                           mb_per_s=nbytes / 1e6 / median if median > 0 else None,
                           tokens=res["tokens"])
                if reference is not None:
                    row["ids_equal"] = res["digest"] == reference["digest"]
                    row["docs_differ"] = sum(a != b for a, b in zip(res["doc_crcs"],
                                                                    reference["doc_crcs"]))
                if impl in EXPECTED_TO_DIFFER and not vocab:
                    row["note"] = ("it splits text with GPT-4's pattern, not asmbpe's "
                                       "pre-tokenizer: its ids are expected to differ")
                rows.append(row)
    _ratios(rows)
    _table(rows, out, "= tiktoken" if vocab else "= asmbpe")
    return rows


def _ratios(rows: list[dict]) -> None:
    """vs_asmbpe / first_vs_asmbpe: MB/s over asmbpe's MB/s at the same thread count."""
    for key, ratio in (("mb_per_s", "vs_asmbpe"), ("first_mb_per_s", "first_vs_asmbpe")):
        base = {r["threads"]: r[key] for r in rows if r["impl"] == "asmbpe"}
        for r in rows:
            b = base.get(r["threads"])
            if r[key] and b:
                r[ratio] = r[key] / b


def _table(rows: list[dict], out, equal_to: str = "= asmbpe") -> None:
    head = (f"  {'impl':<26} {'threads':>7} {'load s':>7} {'first s':>8} {'MB/s':>7} {'speed/asm':>9} "
            f"{'again s':>8} {'MB/s':>7} {'speed/asm':>9} {'tokens':>11} {equal_to:>13}")
    out(head)
    out("  " + "-" * (len(head) - 2))
    for r in rows:
        if r["median_s"] is None:
            out(f"  {r['impl']:<26} {r['threads']:>7} {'failed':>8}")
            continue
        eq = {True: "yes", False: "no", None: "-"}[r["ids_equal"]]
        if r["ids_equal"] is False:
            eq = f"no ({r['docs_differ']} doc)" if r["docs_differ"] == 1 else \
                f"no ({r['docs_differ']} docs)"
        ratio = "-" if r["vs_asmbpe"] is None else f"{r['vs_asmbpe']:.2f}x"
        first_ratio = "-" if r["first_vs_asmbpe"] is None else f"{r['first_vs_asmbpe']:.2f}x"
        out(f"  {r['impl']:<26} {r['threads']:>7} {r['load_s']:>7.3f} {r['first_s']:>8.3f} "
            f"{r['first_mb_per_s']:>7.1f} {first_ratio:>9} {r['median_s']:>8.3f} "
            f"{r['mb_per_s']:>7.1f} {ratio:>9} {r['tokens']:>11,} {eq:>13}")
    out("  load: the vocabulary read and the encoder made and started (the first run's);")
    out("  first: a new encoder object per run (its caches empty), the text encoded once, "
        "as when encoding new text; again: the same object on the same text again, "
        "so caches that keep every word seen hold all of it")
    notes = sorted({r["note"] for r in rows if r.get("note")})
    for r in rows:
        if r.get("note") in notes:
            out(f"  note: {r['impl']}: {r['note']}")
            notes.remove(r["note"])


def write_rows(rows: list[dict], path) -> None:
    """The rows as JSON (ROW_KEYS only), written atomically."""
    from .bench import write_json

    write_json([{k: r[k] for k in ROW_KEYS} for r in rows], path)


def _main(argv=None) -> None:
    ap = argparse.ArgumentParser(description="bench encode worker (internal)")
    ap.add_argument("--worker", required=True, choices=IMPLS)
    ap.add_argument("--dir", required=True)
    ap.add_argument("--threads", type=int, required=True)
    ap.add_argument("--runs", type=int, required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--vocab", default=None)
    a = ap.parse_args(argv)
    worker(a.worker, a.dir, a.threads, a.runs, a.out, a.vocab)


if __name__ == "__main__":
    _main()
