"""`asmbpe bench train`: training speed against the trainers a user could pick instead.

In one run, on the same documents (by default the first 100 MB of whole documents of
english.parquet), at the same vocabulary size and thread count, with the same
pre-tokenizer (`pretokenizer`, default nanochat; PATTERN below is its pattern string,
harness.pretokenizers; seed's is ORACLE_PATTERN_LITERAL):

- asmbpe:    harness.train(documents as bytes, vocab_size, threads=N, pretokenizer=...);
- rustbpe:   rustbpe.Tokenizer().train_from_iterator(iter(texts), vocab_size - 16,
             pattern=PATTERN) (its vocabulary has no specials);
- tokenizers: Hugging Face BPE + BpeTrainer(vocab_size - 16, ByteLevel alphabet, no
             specials), pre-tokenizer Split(Regex(PATTERN), "isolated")
             then ByteLevel(add_prefix_space=False, use_regex=False);
- gigatoken: gigatoken.train_bpe(documents joined by b"\\xff", vocab_size - 16, [],
             separator=b"\\xff") — with ITS OWN pre-tokenizer pattern, so its merges
             are not expected to equal asmbpe's (row "gigatoken (own pattern)").
             0xFF never occurs in UTF-8, so the separator cannot split a document.
- gigabpe:   gigabpe.train_bpe([docs.txt], vocab_size - 16, pretokenizer="bytelevel",
             threads=N): it reads text files line by line, so the documents are written
             one after another, newline-separated, to docs.txt before the clock starts
             (its train call includes reading that file); GPT-2's pattern, so its merges
             are not expected to equal asmbpe's either (row "gigabpe (GPT-2 pattern)").
- asmbpe (command): the whole `asmbpe train docs.parquet -o ... --vocab-size V
             --threads N -q` as a user runs it, on the documents written as one Parquet
             file (a `text` column) before the clock starts; its "train call" is the
             command's own total (reading included). It runs as `python -m
             harness.dev.peak_command PEAK -- train ...`, which imports nothing the
             command does not and writes the process's peak RSS (VmHWM) at exit.

Every run of every implementation is a fresh subprocess (`python -m harness.dev.bench_train
--worker ...`), so memory peaks do not mix. The runs go round by round (every
implementation once, then again), so that each meets the machine in the same minutes:
a shared VM changes speed by a fifth from minute to minute, and all runs of one
implementation before the next's would put that change into the ratios. The worker
imports the implementation (and asmbpe's library) and loads the documents in the form
its trainer takes (untimed), then measures around the training call only:

- wall seconds (time.perf_counter); the table shows the median over --runs;
- CPU seconds (getrusage(RUSAGE_SELF) user + system, all threads of the process);
- peak RSS: the worker resets the kernel's high-water mark after loading
  (/proc/self/clear_refs "5") and reads VmHWM after training, so the peak is that of
  training, with the loaded documents resident (as a trainer needs them); where
  clear_refs is unavailable, ru_maxrss (which then includes loading);
- the merges, as the ordered list of the byte strings they make, compared with
  asmbpe's (merges_equal);
- and around the whole process, from the parent: its wall seconds from spawn to exit
  (interpreter start, imports, loading the documents, training, writing) and its peak
  RSS (wait4's ru_maxrss of that child): "process s" and "process MB".

Rayon-based peers get the thread count through RAYON_NUM_THREADS and
RAYON_RS_NUM_CPUS. MB = 1e6 bytes.
"""
from __future__ import annotations

import argparse
import gc
import importlib.util
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from .peak_command import vm_hwm

ROOT = Path(__file__).resolve().parent.parent.parent
SEP = b"\xff"                               # never in UTF-8 text
TEXT_NAME = "docs.txt"                      # gigabpe's input: one document per line
PARQUET_NAME = "docs.parquet"               # the asmbpe command's input

IMPLS = ("asmbpe", "asmbpe-command", "rustbpe", "tokenizers", "gigatoken", "gigabpe")
LABELS = {"gigatoken": "gigatoken (own pattern)", "gigabpe": "gigabpe (GPT-2 pattern)",
          "asmbpe-command": "asmbpe (command)"}
MODULES = {"asmbpe": None, "asmbpe-command": None, "rustbpe": "rustbpe",
           "tokenizers": "tokenizers", "gigatoken": "gigatoken", "gigabpe": "gigabpe"}
ROW_KEYS = ("impl", "task", "corpus", "bytes", "threads", "median_s", "cpu_s",
            "peak_rss_mb", "process_s", "process_rss_mb", "merges_equal")

__all__ = ["bench_train", "IMPLS", "ROW_KEYS", "installed"]


def installed(impl: str) -> bool:
    mod = MODULES[impl]
    return mod is None or importlib.util.find_spec(mod) is not None


# --------------------------------------------------------------------------- worker

def _bytes_to_unicode() -> dict[int, str]:
    """GPT-2's byte -> printable character map (the ByteLevel alphabet)."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + \
        list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return dict(zip(bs, map(chr, cs)))


def _reset_peak() -> bool:
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def _peak_rss(reset_ok: bool) -> int:
    hwm = vm_hwm() if reset_ok else None
    return hwm if hwm is not None else resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def _process_peak(before_reset: int | None = None) -> int:
    """The whole process's peak RSS in bytes: VmHWM (new at exec, so it is this
    process's own, unlike wait4's ru_maxrss, which starts from the forking parent's
    peak), with the peak before a reset of it; ru_maxrss where /proc is missing."""
    now = vm_hwm()
    if now is None:
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    return max(now, before_reset or 0)


def _cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def _load(impl: str, blob_path: str):
    if impl == "gigabpe":                           # it reads its text file itself
        return str(Path(blob_path).with_name(TEXT_NAME))
    blob = Path(blob_path).read_bytes()
    if impl == "gigatoken":
        return blob
    docs = blob.split(SEP)
    del blob
    if impl == "asmbpe":
        return docs
    return [d.decode("utf-8") for d in docs]


def _train(impl: str, data, vocab_size: int, threads: int, pretokenizer: str) -> list[bytes]:
    """Train; return the merged byte strings in merge order."""
    from ..pretokenizers import resolve

    n_plain = vocab_size - 16                       # 256 + merges: no specials
    pattern = resolve(pretokenizer).pattern
    if impl == "asmbpe":
        import harness

        r = harness.train(data, vocab_size, threads=threads, pretokenizer=pretokenizer)
        table = r.tokenizer.id_to_bytes()
        return [table[256 + i] for i in range(r.n_merges)]
    if impl == "rustbpe":
        import rustbpe

        tok = rustbpe.Tokenizer()
        tok.train_from_iterator(iter(data), vocab_size=n_plain, pattern=pattern)
        ranks = tok.get_mergeable_ranks()
        items = ranks.items() if isinstance(ranks, dict) else ranks
        return [bytes(k) for k, r in sorted(items, key=lambda kv: kv[1]) if r >= 256]
    if impl == "tokenizers":
        from tokenizers import Regex, Tokenizer, models, pre_tokenizers, trainers

        tok = Tokenizer(models.BPE())
        tok.pre_tokenizer = pre_tokenizers.Sequence([
            pre_tokenizers.Split(Regex(pattern), "isolated"),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ])
        trainer = trainers.BpeTrainer(vocab_size=n_plain, show_progress=False,
                                      initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                      special_tokens=[])
        tok.train_from_iterator(data, trainer=trainer)
        return _from_byte_level(json.loads(tok.to_str())["model"]["merges"])
    if impl == "gigatoken":
        import gigatoken

        _, merges = gigatoken.train_bpe(data, n_plain, [], separator=SEP)
        return [bytes(a) + bytes(b) for a, b in merges]
    if impl == "gigabpe":
        import gigabpe

        _, merges = gigabpe.train_bpe([data], n_plain, special_tokens=[],
                                      pretokenizer="bytelevel", threads=threads)
        return _from_byte_level(merges)
    raise ValueError(f"unknown implementation {impl!r}")


def _from_byte_level(merges) -> list[bytes]:
    """Hugging Face merges ("a b" strings or (a, b) pairs of ByteLevel characters) as
    the byte strings they make."""
    back = {c: b for b, c in _bytes_to_unicode().items()}
    out = []
    for m in merges:
        a, b = m.split(" ", 1) if isinstance(m, str) else m
        out.append(bytes(back[c] for c in a) + bytes(back[c] for c in b))
    return out


def _import(impl: str) -> None:
    """Import the implementation's modules (and load asmbpe's library) before the clock
    starts: the timed run is the training alone, for every implementation."""
    if impl == "asmbpe":
        import harness
        from .._lib import lib

        harness.train, harness.Tokenizer        # load the lazy names (numpy, the modules)
        lib()
    else:
        importlib.import_module(impl)


def worker(impl: str, blob_path: str, vocab_size: int, threads: int, out_path: str,
           pretokenizer: str) -> None:
    _import(impl)
    data = _load(impl, blob_path)
    gc.collect()
    loaded_peak = vm_hwm()
    reset_ok = _reset_peak()
    cpu0, t0 = _cpu(), time.perf_counter()
    merged = _train(impl, data, vocab_size, threads, pretokenizer)
    wall, cpu = time.perf_counter() - t0, _cpu() - cpu0
    peak = _peak_rss(reset_ok)
    Path(out_path).write_text(json.dumps(dict(
        wall_s=wall, cpu_s=cpu, peak_rss_bytes=peak, peak_from_reset=reset_ok,
        process_rss_bytes=_process_peak(loaded_peak),
        merges=[m.hex() for m in merged])))


# ----------------------------------------------------------------------------- parent

def _spawn(cmd: list[str], env: dict, timeout: float | None) -> tuple[int, str, float]:
    """Run cmd to its end: (exit status, its stderr + stdout, wall seconds from spawn to
    exit)."""
    t0 = time.perf_counter()
    p = subprocess.run(cmd, env=env, cwd=ROOT, capture_output=True, timeout=timeout)
    wall = time.perf_counter() - t0
    return p.returncode, (p.stderr + p.stdout).decode("utf-8", "replace"), wall


def _env(threads: int) -> dict:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT)] + (
        [env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))
    env["RAYON_NUM_THREADS"] = env["RAYON_RS_NUM_CPUS"] = str(threads)
    env["TOKENIZERS_PARALLELISM"] = "true"
    return env


def _run_worker(impl: str, blob: Path, vocab_size: int, threads: int, tmp: Path,
                timeout: float | None, pretokenizer: str) -> dict:
    if impl == "asmbpe-command":
        return _run_command(blob, vocab_size, threads, tmp, timeout, pretokenizer)
    out = tmp / f"{impl}.json"
    out.unlink(missing_ok=True)
    cmd = [sys.executable, "-m", "harness.dev.bench_train", "--worker", impl,
           "--blob", str(blob), "--vocab-size", str(vocab_size), "--threads", str(threads),
           "--out", str(out), "--pretokenizer", pretokenizer]
    try:
        rc, log, wall = _spawn(cmd, _env(threads), timeout)
    except subprocess.TimeoutExpired:
        return dict(error=f"timed out after {timeout:.0f} s")
    if rc != 0 or not out.is_file():
        tail = log.strip().splitlines()
        return dict(error=f"exit status {rc}: {tail[-1] if tail else 'no output'}")
    res = json.loads(out.read_text())
    res.update(process_s=wall)
    return res


def _run_command(blob: Path, vocab_size: int, threads: int, tmp: Path,
                 timeout: float | None, pretokenizer: str) -> dict:
    """`asmbpe train docs.parquet -o OUT ...`, the whole command; its merges from OUT."""
    out, peak = tmp / "command.bin", tmp / "command.peak"
    out.unlink(missing_ok=True)
    peak.unlink(missing_ok=True)
    cmd = [sys.executable, "-m", "harness.dev.peak_command", str(peak), "--",
           "train", str(blob.with_name(PARQUET_NAME)), "-o", str(out), "--vocab-size",
           str(vocab_size), "--threads", str(threads), "--pretokenizer", pretokenizer, "-q"]
    try:
        rc, text, wall = _spawn(cmd, _env(threads), timeout)
    except subprocess.TimeoutExpired:
        return dict(error=f"timed out after {timeout:.0f} s")
    if rc != 0 or not out.is_file() or not peak.is_file():
        tail = text.strip().splitlines()
        return dict(error=f"exit status {rc}: {tail[-1] if tail else 'no output'}")
    import re

    from ..tokenizer import Tokenizer

    m = re.search(r"merges learned, ([0-9.]+) s,", text)
    tok = Tokenizer.load(out)
    table = tok.id_to_bytes()
    rss = int(peak.read_text())
    return dict(wall_s=float(m.group(1)) if m else wall, cpu_s=None, peak_rss_bytes=rss,
                process_s=wall, process_rss_bytes=rss,
                merges=[table[256 + i].hex() for i in range(tok.n_merges)])


def _write_inputs(tmp: Path, docs: list[bytes], impls) -> Path:
    """The documents as each implementation reads them, written before any clock:
    docs.bin (joined by SEP, for the workers), docs.txt (newline-separated, gigabpe)
    and docs.parquet (a `text` column, the asmbpe command)."""
    blob = tmp / "docs.bin"
    blob.write_bytes(SEP.join(docs))
    if "gigabpe" in impls:
        with open(tmp / TEXT_NAME, "wb") as f:
            for d in docs:
                f.write(d)
                f.write(b"\n")
    if "asmbpe-command" in impls:
        import pyarrow as pa
        import pyarrow.parquet as pq

        texts = pa.array([d.decode("utf-8", "replace") for d in docs], type=pa.large_string())
        # laid out as the shared corpora are: row groups of 2,000 documents, plain
        # (not dictionary) encoded, zstd (the layout the page streamer reads, E62)
        pq.write_table(pa.table({"text": texts}), tmp / PARQUET_NAME, row_group_size=2000,
                       use_dictionary=False, compression="zstd")
    return blob


def _fmt_ratio(x: float | None) -> str:
    return "-" if x is None else f"{x:.2f}x"


def bench_train(corpus: str, limit_mb: float, vocab_size: int, runs: int, threads: int,
                impls=IMPLS, out=print, timeout: float | None = None,
                pretokenizer: str = "nanochat", input_path=None,
                separator=None) -> list[dict]:
    """Run every installed implementation `runs` times on the same documents, with the
    same pre-tokenizer; print a table and return the rows (ROW_KEYS, plus merges /
    error / label details)."""
    from .bench import cpu_model
    from ..corpora import InputError
    from ..pretokenizers import resolve
    from ..train import MAX_TRAIN_VOCAB as MAX_VOCAB
    from ..train import MIN_VOCAB

    if not MIN_VOCAB < vocab_size <= MAX_VOCAB:
        raise InputError(f"--vocab-size must be between {MIN_VOCAB + 1} and {MAX_VOCAB}, "
                         f"got {vocab_size}")
    if threads < 1:
        raise InputError(f"--threads must be >= 1, got {threads}")
    pretok = resolve(pretokenizer)
    from .._lib import lib
    from .bench import bench_documents

    lib()                                           # a missing library fails first
    docs, corpus = bench_documents(corpus, limit_mb, input_path, separator)
    nbytes = sum(len(d) for d in docs)
    impls = [i for i in IMPLS if i in impls]
    skipped = [i for i in impls if not installed(i)]
    impls = [i for i in impls if i not in skipped]

    out(f"train: {corpus}, {nbytes / 1e6:.1f} MB, {len(docs)} documents, vocab {vocab_size} "
        f"({vocab_size - MIN_VOCAB} merges), pre-tokenizer {pretok}, {threads} thread(s), "
        f"median of {runs} run(s), each run a fresh process; CPU: {cpu_model()}")
    for i in skipped:
        out(f"  {LABELS.get(i, i)}: not installed (pip install {MODULES[i]}), skipped")

    if "asmbpe-command" in impls:
        _compile_package()
    rows: list[dict] = []
    with tempfile.TemporaryDirectory(prefix="asmbpe-bench-") as tmpdir:
        tmp = Path(tmpdir)
        blob = _write_inputs(tmp, docs, impls)
        del docs
        runs_of: dict[str, list] = {impl: [] for impl in impls}
        failed: set[str] = set()
        for k in range(runs):                   # round by round (the docstring)
            for impl in impls:
                if impl in failed:
                    continue
                res = _run_worker(impl, blob, vocab_size, threads, tmp, timeout, pretok.name)
                if "error" in res:
                    out(f"  {LABELS.get(impl, impl)}: run {k + 1} failed: {res['error']}")
                    failed.add(impl)
                    continue
                runs_of[impl].append(res)
        reference = None
        for impl in impls:
            results = runs_of[impl]
            row = dict(impl=LABELS.get(impl, impl), task="train", corpus=corpus, bytes=nbytes,
                       threads=threads, median_s=None, cpu_s=None, peak_rss_mb=None,
                       process_s=None, process_rss_mb=None, merges_equal=None)
            if results:
                merges = results[-1]["merges"]
                if impl == "asmbpe":
                    reference = merges
                row.update(
                    median_s=statistics.median(r["wall_s"] for r in results),
                    cpu_s=(statistics.median(r["cpu_s"] for r in results)
                           if results[0]["cpu_s"] is not None else None),
                    peak_rss_mb=max(r["peak_rss_bytes"] for r in results) / 1e6,
                    process_s=statistics.median(r["process_s"] for r in results),
                    process_rss_mb=max(r["process_rss_bytes"] for r in results) / 1e6,
                    merges_equal=(merges == reference) if reference is not None else None,
                    merges=len(merges),
                    first_difference=_first_difference(reference, merges),
                )
            else:
                row["error"] = "failed"
            rows.append(row)
    _table(rows, out)
    return rows


def _compile_package() -> None:
    """The package's bytecode written once, as `pip install` writes it for an installed
    package (and as every peer's is): a source tree run with PYTHONDONTWRITEBYTECODE
    set (an editable install in a sandbox) would compile every module in every run of
    the whole command, 0.05-0.1 s here. A no-op where it cannot write."""
    import compileall

    try:
        compileall.compile_dir(str(Path(__file__).resolve().parents[1]), quiet=2)
    except OSError:
        pass


def _first_difference(ref, merges):
    if ref is None or merges == ref:
        return None
    return next((i for i, (a, b) in enumerate(zip(ref, merges)) if a != b),
                min(len(ref), len(merges)))


def _table(rows: list[dict], out) -> None:
    """call s / cpu s / peak MB: around the training call (the command: its own total and
    its whole peak); process s / process MB: the whole process; the ratios are to the
    asmbpe row's (time: call and process; memory: process peak)."""
    base = next((r for r in rows if r["impl"] == "asmbpe" and r["median_s"]), None)
    head = (f"  {'impl':<24} {'call s':>8} {'cpu s':>8} {'peak MB':>8} {'process s':>10} "
            f"{'process MB':>10} {'merges':>7} {'= asmbpe':>9} {'call/asm':>9} "
            f"{'proc/asm':>9} {'mem/asm':>8}")
    out(head)
    out("  " + "-" * (len(head) - 2))

    def ratio(r, key):
        return r[key] / base[key] if base and base[key] else None

    for r in rows:
        if r["median_s"] is None:
            out(f"  {r['impl']:<24} {'failed':>8}")
            continue
        eq = {True: "yes", False: "no", None: "-"}[r["merges_equal"]]
        if r["merges_equal"] is False and r.get("first_difference") is not None:
            eq = f"no@{r['first_difference']}"
        cpu = "-" if r["cpu_s"] is None else f"{r['cpu_s']:.2f}"
        out(f"  {r['impl']:<24} {r['median_s']:>8.2f} {cpu:>8} {r['peak_rss_mb']:>8.0f} "
            f"{r['process_s']:>10.2f} {r['process_rss_mb']:>10.0f} {r['merges']:>7} "
            f"{eq:>9} {_fmt_ratio(ratio(r, 'median_s')):>9} "
            f"{_fmt_ratio(ratio(r, 'process_s')):>9} "
            f"{_fmt_ratio(ratio(r, 'process_rss_mb')):>8}")


def write_rows(rows: list[dict], path) -> None:
    """The rows as JSON (ROW_KEYS only), written atomically."""
    from .bench import write_json

    write_json([{k: r[k] for k in ROW_KEYS} for r in rows], path)


def _main(argv=None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    ap = argparse.ArgumentParser(description="bench train worker (internal)")
    ap.add_argument("--worker", required=True, choices=IMPLS)
    ap.add_argument("--blob", required=True)
    ap.add_argument("--vocab-size", type=int, required=True)
    ap.add_argument("--threads", type=int, required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--pretokenizer", required=True)
    a = ap.parse_args(argv)
    worker(a.worker, a.blob, a.vocab_size, a.threads, a.out, a.pretokenizer)


if __name__ == "__main__":
    _main()
