"""`asmbpe profile train|encode|pretok`: where the time goes, phase by phase.

The library keeps rdtsc cycle counters for its long operations (asm/train.asm,
asm/encode.asm; read through harness.train's stats and harness.encoder.encoder_stats),
and this module turns them into tables: per phase, seconds, cycles, cycles per input
byte and the share of the whole; per thread where the library counts per thread
(encoding), with the load balance between threads. Training also keeps one record
per merge (cycles, words rewritten, positions replaced), summarised here and drawn
by `plot_merges` (`--plot PATH.png`, matplotlib).

Around the same work:

- `--perf`: `perf stat` attached to this process for the duration of the work
  (cycles, instructions, IPC, branch and cache misses, plus the software counters).
  Where the machine has no hardware counters (a VM without a virtual PMU) it says so
  and shows what perf can count;
- `--callgrind`: the work on a small input, in a child process under valgrind's
  callgrind, one thread; instructions executed per assembly routine, attributed with
  the library's own symbol table (`nm`), so hidden helpers and local routines get
  their names too.

"cycles" are TSC ticks (a fixed rate, `tsc_hz`, measured against the wall clock).
"""
from __future__ import annotations

import os
import pickle
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from .._lib import LIB_PATH, ROOT
from ..pretokenizers import DEFAULT, resolve

DEFAULT_INPUT = ROOT / "datasets" / "kjv.txt"
CALLGRIND_BYTES = 256 << 10     # input of the --callgrind run (valgrind is ~50x slower)


# --------------------------------------------------------------------------- inputs

def load_docs(inputs=(), corpus: str | None = None, limit_mb: float = 16,
              separator=None) -> tuple[list[bytes], str]:
    """(documents, description). INPUT files (read by harness.corpora), else the shared
    corpus `corpus`, else the bundled datasets/kjv.txt split at blank lines. limit_mb:
    about this many MB of whole documents (0: all)."""
    from ..corpora import InputError, check_file, corpus_path, read_documents

    limit = int(limit_mb * 1e6) if limit_mb else None
    if inputs:
        paths = [check_file(p) for p in inputs]
        what = ", ".join(p.name for p in paths)
    elif corpus:
        paths = [corpus_path(corpus)]
        if not paths[0].is_file():
            raise InputError(f"corpus {corpus}: {paths[0]} not found (put shared/ next to "
                             "the repository or set ASMBPE_CORPORA)")
        what = f"corpus {corpus}"
    else:
        paths = [DEFAULT_INPUT]
        separator = "" if separator is None else separator
        what = "datasets/kjv.txt"
    docs: list[bytes] = []
    total = 0
    for p in paths:
        left = limit - total if limit else None
        if left is not None and left <= 0:
            break
        got = read_documents(p, left, separator=separator)
        docs += got
        total += sum(len(d) for d in got)
    return docs, f"{what}: {len(docs):,} documents, {total / 1e6:.2f} MB"


# --------------------------------------------------------------------------- timing

def tsc_hz() -> float | None:
    """The TSC rate measured against the wall clock (None without the test library)."""
    try:
        from .checkasm_bench import tsc_hz as measure

        return measure(0.05)
    except Exception:               # libasmbpe_test.so not built: callers fall back
        return None


@dataclass
class Phase:
    name: str
    seconds: float
    cycles: float
    depth: int = 0                  # 1: a part of the phase above


@dataclass
class Report:
    """What a profile measured: phases (top level add up to `total_s`), per-thread rows,
    notes, and the raw figures (`extra`) the tests and the plot read."""

    title: str
    input_bytes: int
    total_s: float
    tsc_hz: float
    phases: list[Phase] = field(default_factory=list)
    thread_cols: list[str] = field(default_factory=list)
    threads: list[list] = field(default_factory=list)     # [thread, cycles per col...]
    notes: list[str] = field(default_factory=list)
    extra: dict = field(default_factory=dict)


def _row(name: str, s: float, cyc: float, total_s: float, nbytes: int, depth: int) -> str:
    share = 100 * s / total_s if total_s > 0 else 0.0
    cpb = f"{cyc / nbytes:10.2f}" if nbytes else f"{'-':>10}"
    label = ("  " * depth + name)
    return f"  {label:<26} {s:9.3f} {cyc:16,.0f} {cpb} {share:6.1f}%"


def format_report(r: Report) -> list[str]:
    out = [r.title,
           f"  {'phase':<26} {'seconds':>9} {'cycles':>16} {'cyc/byte':>10} {'share':>7}"]
    for p in r.phases:
        out.append(_row(p.name, p.seconds, p.cycles, r.total_s, r.input_bytes, p.depth))
    out.append(_row("total", r.total_s, r.total_s * r.tsc_hz, r.total_s, r.input_bytes, 0))
    if r.threads:
        out.append("  per thread (cycles):")
        out.append("  " + f"{'thread':>8}" + "".join(f" {c:>14}" for c in r.thread_cols))
        for row in r.threads:
            out.append("  " + f"{row[0]:>8}" + "".join(
                f" {v:14,.0f}" if isinstance(v, (int, float, np.integer)) else f" {v:>14}"
                for v in row[1:]))
    out += ["  " + n for n in r.notes]
    return out


# --------------------------------------------------------------------------- train

def profile_train(docs: list[bytes], vocab_size: int = 8192, threads: int | None = None,
                  per_merge: bool = True, describe: str = "",
                  pretokenizer=DEFAULT) -> Report:
    """Train once with the library's counters and per-merge records on."""
    from ..train import train

    hz_wall = tsc_hz()
    nbytes = sum(len(d) for d in docs)
    res = train(docs, vocab_size=vocab_size, threads=threads, per_merge=per_merge,
                pretokenizer=pretokenizer)
    st = res.stats
    sec, cyc = st["seconds"], st["cycles"]
    hz = hz_wall or st["tsc_hz"] or 1.0
    loop_threads = max(st["threads"], 1)

    def ph(name, key, depth=0, cycles=None):
        c = cycles if cycles is not None else cyc.get(key, sec[key] * hz)
        return Phase(name, sec[key], c, depth)

    phases = [ph("read (Python)", "read", cycles=sec["read"] * hz),
              ph("count", "count", cycles=sec["count"] * hz),
              ph("layout", "layout"), ph("pairs", "pairs"), ph("merge loop", "merge_loop"),
              Phase("scan (mean/thread)", sec["scan"], cyc["scan"] / loop_threads, 1),
              ph("apply", "apply", 1), ph("heap", "heap", 1), ph("compact", "compact", 1),
              ph("verify", "verify")]
    top = sum(p.seconds for p in phases if p.depth == 0)
    phases.append(Phase("other (Python)", max(sec["total"] - top, 0.0),
                        max(sec["total"] - top, 0.0) * hz))
    r = Report(f"profile train: {describe or f'{nbytes:,} bytes'}; vocab {vocab_size}, "
               f"{res.n_merges} merges, count on {st['count_threads']} thread(s), merge loop "
               f"on {loop_threads}", nbytes, sec["total"], hz, phases)
    lib_cycles = sum(cyc[k] for k in ("layout", "pairs", "merge_loop", "verify"))
    r.notes.append(f"asmbpe_train: the library's cycles cover "
                   f"{100 * lib_cycles / (sec['train_call'] * hz):.1f}% of the call's wall "
                   f"time at the measured TSC rate ({hz / 1e9:.3f} GHz)"
                   if hz_wall and sec["train_call"] > 0 else
                   "TSC rate not measured (libasmbpe_test.so missing): the library's "
                   "implied rate is used")
    r.notes.append(f"per thread: the library sums the scan over the {loop_threads} merge-loop "
                   f"thread(s) ({cyc['scan']:,} cycles, {cyc['scan'] / loop_threads:,.0f} "
                   "each on average); thread 0 alone runs apply, heap and compact while the "
                   "others wait at the barrier"
                   + ("" if loop_threads > 1 else " (one thread here)"))
    r.extra = dict(stats=st, merges=res.merges, counts=res.counts, result=res)
    pm = st.get("per_merge")
    if pm is not None and len(pm):
        r.notes += per_merge_summary(pm, res.merges, res.counts, cyc["merge_loop"], hz)
    return r


def _ratio(num: np.ndarray, den: np.ndarray) -> str:
    d = float(den.sum())
    return f"{float(num.sum()) / d:.3f}" if d else "-"


def per_merge_summary(pm: np.ndarray, merges: np.ndarray, counts: np.ndarray,
                      loop_cycles: int, hz: float) -> list[str]:
    cyc = pm[:, 0].astype(np.float64)
    total = cyc.sum()
    m = len(pm)
    out = [f"per merge ({m} records): their cycles add up to "
           f"{100 * total / loop_cycles if loop_cycles else 0:.1f}% of the merge loop's; "
           f"{int(pm[:, 1].sum()):,} word rewrites, {int(pm[:, 2].sum()):,} positions replaced, "
           f"{int(pm[:, 3].sum()):,} chunks of 128 positions scanned"]
    for lo, hi in ((0, 100), (100, 1000), (1000, 10000), (10000, m)):
        if lo >= m or hi <= lo:
            continue
        hi = min(hi, m)
        part = cyc[lo:hi]
        out.append(f"  merges {lo:>6}-{hi - 1:<6}: {part.sum() / hz:8.3f} s "
                   f"({100 * part.sum() / total if total else 0:5.1f}%), median "
                   f"{np.median(part) / hz * 1e6:8.1f} us/merge, median "
                   f"{np.median(pm[lo:hi, 2]):,.0f} positions replaced, "
                   f"{np.median(pm[lo:hi, 3]):,.0f} chunks scanned "
                   f"({_ratio(pm[lo:hi, 1], pm[lo:hi, 3])} words rewritten per chunk)")
    worst = np.argsort(cyc)[::-1][:5]
    out.append("  slowest merges: " + ", ".join(
        f"#{int(i)} ({int(merges[i][0])},{int(merges[i][1])}) {cyc[i] / hz * 1e6:.0f} us, "
        f"{int(pm[i, 2]):,} pos" for i in worst))
    return out


# --------------------------------------------------------------------------- encode

def profile_encode(docs: list[bytes], tokenizer, threads: int | None = None,
                   describe: str = "", warm: bool = False) -> Report:
    """Encode the documents once (a fresh encoder: caches start cold) with
    ASMBPE_ENC_PROFILE; per-thread phase cycles from encoder_stats. warm: encode them
    once before, untimed, so that the profiled call finds the caches holding the text
    and its buffers already touched (the steady state of a long run, without the
    first-touch page faults of a fresh process)."""
    from ..encoder import encode_many, encoder_stats
    from ..tokenizer import Tokenizer

    tok = Tokenizer(tokenizer.merges, tokenizer.vocab_size,       # its own, cold encoder
                    pretokenizer=tokenizer.pretokenizer)
    threads = threads or min(os.cpu_count() or 1, 256)
    if warm:
        encode_many(tok, docs, threads=threads, bos=True)
    nbytes = sum(len(d) for d in docs)
    hz = tsc_hz()
    before = [encoder_stats(tok, t) for t in range(threads)]
    t0 = time.perf_counter()
    tokens, _ = encode_many(tok, docs, threads=threads, bos=True, profile=True)
    wall = time.perf_counter() - t0
    after = [encoder_stats(tok, t) for t in range(threads)]
    per = [{k: a[k] - b[k] for k in a} for a, b in zip(after, before)]
    if not hz:
        hz = max(p["cycles_total"] for p in per) / wall if wall > 0 else 1.0
    names = [("pre-tokenize", "cycles_pretok"), ("cache", "cycles_cache"),
             ("merge (misses, uncached)", "cycles_merge"), ("write (reorder)", "cycles_write")]
    busy = [p["cycles_total"] for p in per]
    n_busy = max(sum(1 for b in busy if b), 1)
    phases = []
    for label, key in names:
        c = sum(p[key] for p in per)
        phases.append(Phase(label, c / n_busy / hz, c / n_busy))
    rest = sum(busy) - sum(sum(p[k] for p in per) for _, k in names)
    phases.append(Phase("other (in the library)", rest / n_busy / hz, rest / n_busy))
    lib_s = sum(busy) / n_busy / hz
    phases.append(Phase("outside the library", max(wall - lib_s, 0.0), max(wall - lib_s, 0.0) * hz))
    r = Report(f"profile encode: {describe or f'{nbytes:,} bytes'}; {tok.n_merges} merges, "
               f"{threads} thread(s), {'warm (second call)' if warm else 'cold caches'}, "
               f"{len(tokens):,} tokens, "
               f"{nbytes / 1e6 / wall if wall > 0 else 0:.1f} MB/s",
               nbytes, wall, hz, phases)
    r.thread_cols = ["pretok", "cache", "merge", "write", "total", "chunks", "hits", "long"]
    for t, p in enumerate(per):
        r.threads.append([t, p["cycles_pretok"], p["cycles_cache"], p["cycles_merge"],
                          p["cycles_write"], p["cycles_total"], p["chunks"], p["cache_hits"],
                          p["long_chunks"]])
    mean = sum(busy) / len(busy) if busy else 0
    r.notes.append("phases: each thread's cycles summed over the threads, divided by the "
                   f"{n_busy} busy thread(s) (the mean thread's time)")
    if mean:
        r.notes.append(f"load balance: busiest thread {max(busy) / mean:.2f}x the mean "
                       f"(1.00 = even); {100 * mean / max(busy):.0f}% of the threads' time "
                       "busy on average")
    chunks = sum(p["chunks"] for p in per)
    hits = sum(p["cache_hits"] for p in per)
    r.notes.append(f"chunks {chunks:,}, found (one-id table or cache) {hits:,} "
                   f"({100 * hits / chunks if chunks else 0:.1f}%), encoded {chunks - hits:,}, "
                   f"long chunks (heap path) {sum(p['long_chunks'] for p in per):,}")
    r.extra = dict(per_thread=per, wall=wall, tokens=len(tokens))
    return r


# --------------------------------------------------------------------------- pretok

def profile_pretok(docs: list[bytes], describe: str = "", pretokenizer=DEFAULT) -> Report:
    """asmbpe_split_offsets with `pretokenizer` over every document, one thread (as the
    counting and encoding threads call it), timed with the TSC."""
    from .._lib import ffi, lib
    from ..buffers import Packer

    pretok = resolve(pretokenizer)
    L = lib()
    packer = Packer()                   # keeps the buffer alive while ptr is used
    ptr, ends, n = packer.pack(docs)
    cap = 1 << 20
    out = np.empty(cap, dtype=np.uint64)
    op = ffi.from_buffer("uint64_t[]", out)
    hz = tsc_hz()
    chunks = 0
    starts = [0] + ends[:-1].tolist()
    t0 = time.perf_counter()
    for s, e in zip(starts, ends.tolist()):
        pos = 0
        while True:
            got = L.asmbpe_split_offsets(ptr + s, e - s, pos, op, cap, pretok.id)
            if got < 0:
                raise RuntimeError(f"asmbpe_split_offsets failed with status {got}")
            chunks += got
            if got < cap:
                break
            pos = int(out[cap - 1])
    wall = time.perf_counter() - t0
    hz = hz or 1.0
    r = Report(f"profile pretok: {describe or f'{n:,} bytes'}; asmbpe_split_offsets "
               f"({pretok}), one call "
               f"per document, 1 thread, {chunks:,} chunks ({n / max(chunks, 1):.2f} bytes/chunk), "
               f"{n / 1e6 / wall if wall > 0 else 0:.0f} MB/s", n, wall, hz,
               [Phase("split_offsets + loop", wall, wall * hz)])
    r.notes.append("per thread: the pre-tokenizer is one thread per call; training's count "
                   "phase and encoding run it on every thread (see profile train / encode)")
    r.extra = dict(chunks=chunks)
    return r


# --------------------------------------------------------------------------- perf

HW_EVENTS = ("cycles", "instructions", "branches", "branch-misses", "cache-references",
             "cache-misses")
SW_EVENTS = ("task-clock", "context-switches", "cpu-migrations", "page-faults")


def perf_probe() -> tuple[bool, str]:
    """(hardware counters usable, why not)."""
    perf = shutil.which("perf")
    if not perf:
        return False, "perf is not installed (linux-perf / linux-tools)"
    try:
        r = subprocess.run([perf, "stat", "-x", ",", "-e", "cycles,instructions", "true"],
                           capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError) as e:
        return False, f"perf stat could not run: {e}"
    text = r.stderr + r.stdout
    if "<not supported>" in text:
        return False, ("this machine does not expose hardware performance counters to perf "
                       "(`perf stat -e cycles` reports <not supported>: typically a VM "
                       "without a virtual PMU)")
    if r.returncode != 0 or "<not counted>" in text:
        first = next((ln for ln in text.splitlines() if ln.strip()), "no output")
        return False, f"perf stat failed here ({first.strip()}; see /proc/sys/kernel/perf_event_paranoid)"
    return True, ""


class PerfStat:
    """`perf stat` attached to this process while the `with` block runs."""

    def __init__(self, hardware: bool):
        self.events = (HW_EVENTS if hardware else ()) + SW_EVENTS
        self.proc = None
        self.out = None
        self.values: dict[str, float | None] = {}

    def __enter__(self):
        self.out = tempfile.NamedTemporaryFile("w+", suffix=".perf", delete=False)
        self.proc = subprocess.Popen(
            ["perf", "stat", "-x", ",", "-e", ",".join(self.events), "-p", str(os.getpid()),
             "-o", self.out.name], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(0.3)                 # let it attach
        return self

    def __exit__(self, *exc):
        if self.proc is not None:
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.values = parse_perf_csv(Path(self.out.name).read_text())
        os.unlink(self.out.name)
        return False


def parse_perf_csv(text: str) -> dict[str, float | None]:
    """perf stat -x , output -> event -> value (None: not supported/counted)."""
    vals: dict[str, float | None] = {}
    for line in text.splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        parts = line.split(",")
        if len(parts) < 3:
            continue
        value, event = parts[0], parts[2]
        event = re.sub(r":u$|:k$", "", event)
        try:
            vals[event] = float(value)
        except ValueError:
            vals[event] = None
    return vals


def perf_lines(values: dict, hardware: bool, why: str) -> list[str]:
    v = values.get
    out = ["perf stat (this process, during the work):"]
    if hardware and v("cycles") and v("instructions"):
        out.append(f"  cycles {v('cycles'):,.0f}, instructions {v('instructions'):,.0f}, "
                   f"IPC {v('instructions') / v('cycles'):.2f}")
        if v("branches") and v("branch-misses") is not None:
            out.append(f"  branches {v('branches'):,.0f}, misses {v('branch-misses'):,.0f} "
                       f"({100 * v('branch-misses') / v('branches'):.2f}%)")
        if v("cache-references") and v("cache-misses") is not None:
            out.append(f"  cache references {v('cache-references'):,.0f}, misses "
                       f"{v('cache-misses'):,.0f} ({100 * v('cache-misses') / v('cache-references'):.1f}%)")
    else:
        out.append(f"  hardware counters: not available: {why or 'not counted'}; "
                   "cycles, instructions, IPC, branch and cache misses cannot be shown here")
    sw = [(e, v(e)) for e in SW_EVENTS if v(e) is not None]
    if sw:
        out.append("  " + ", ".join(f"{e} {x:,.1f}" if e == "task-clock" else f"{e} {x:,.0f}"
                                    for e, x in sw) + " (task-clock in ms)")
    elif not values:
        out.append("  perf produced no counts")
    return out


# --------------------------------------------------------------------------- callgrind

def parse_callgrind(path) -> tuple[dict[tuple[str, str], int], int]:
    """Self cost (first event, Ir) per (object, function) of a callgrind.out file, and
    the program total. Cost lines right after `calls=` are the callee's inclusive cost
    and are left out."""
    names = {"ob": {}, "fl": {}, "fn": {}}
    kind_of = {"ob": "ob", "cob": "ob", "fl": "fl", "fi": "fl", "fe": "fl", "cfi": "fl",
               "cfl": "fl", "fn": "fn", "cfn": "fn"}
    costs: dict[tuple[str, str], int] = {}
    ob = fn = ""
    skip_next = False
    total = 0
    cost_re = re.compile(r"^[0-9+\-*]")
    with open(path, encoding="utf-8", errors="replace") as f:
        for line in f:
            line = line.rstrip("\n")
            if not line:
                continue
            if cost_re.match(line):
                if skip_next:
                    skip_next = False
                    continue
                parts = line.split()
                if len(parts) >= 2:
                    c = int(parts[1])
                    costs[(ob, fn)] = costs.get((ob, fn), 0) + c
                    total += c
                continue
            key, _, val = line.partition("=")
            if key in kind_of:
                space = names[kind_of[key]]
                m = re.match(r"\((\d+)\)(?: (.*))?$", val)
                if m:
                    if m.group(2) is not None:
                        space[m.group(1)] = m.group(2)
                    name = space.get(m.group(1), val)
                else:
                    name = val
                if key == "ob":
                    ob = name
                elif key == "fn":
                    fn = name
            elif key == "calls":
                skip_next = True
    return costs, total


def library_symbols(lib_path=LIB_PATH) -> list[tuple[int, str]]:
    """(address, name) of the routines of the library, sorted: every text symbol that
    is not a local label (`name.label`, `..@n`), from `nm -n`."""
    try:
        r = subprocess.run(["nm", "-n", str(lib_path)], capture_output=True, text=True,
                           timeout=30)
    except (OSError, subprocess.SubprocessError):
        return []
    syms = []
    for line in r.stdout.splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[1] in "tT" and "." not in parts[2]:
            syms.append((int(parts[0], 16), parts[2]))
    return syms


def attribute(costs: dict[tuple[str, str], int], lib_name: str = "libasmbpe.so",
              syms: list[tuple[int, str]] | None = None) -> dict[str, int]:
    """Ir per library routine: named functions as they are, bare addresses (routines
    valgrind has no sized symbol for) given to the routine symbol at or before them."""
    import bisect

    syms = library_symbols() if syms is None else syms
    addrs = [a for a, _ in syms]
    out: dict[str, int] = {}
    for (ob, fn), c in costs.items():
        if not ob.endswith(lib_name):
            continue
        name = fn
        m = re.match(r"^0x([0-9a-fA-F]+)$", fn)
        if m and syms:
            i = bisect.bisect_right(addrs, int(m.group(1), 16)) - 1
            name = syms[i][1] if i >= 0 else fn
        name = name.split("'")[0]                   # callgrind's recursion suffix
        out[name] = out.get(name, 0) + c
    return out


def run_callgrind(kind: str, docs: list[bytes], *, vocab_size: int = 8192, tokenizer=None,
                  max_bytes: int = CALLGRIND_BYTES, timeout: int = 600,
                  pretokenizer=DEFAULT) -> tuple[list[str], dict]:
    """Run `kind` (train, encode, pretok) on the first max_bytes of docs under
    valgrind --tool=callgrind, one thread (train and pretok with `pretokenizer`, encode
    with the tokenizer's). Returns (lines, Ir per routine)."""
    valgrind = shutil.which("valgrind")
    if not valgrind:
        return ["callgrind: valgrind is not installed (apt-get install valgrind); skipped"], {}
    small, n = [], 0
    for d in docs:
        if n >= max_bytes:
            break
        small.append(d[:max_bytes - n])
        n += len(small[-1])
    with tempfile.TemporaryDirectory(prefix="asmbpe-cg-") as tmp:
        data = Path(tmp) / "work.pkl"
        job = dict(kind=kind, docs=small, vocab_size=vocab_size,
                   merges=None if tokenizer is None else np.asarray(tokenizer.merges),
                   pretokenizer=resolve(pretokenizer if tokenizer is None
                                        else tokenizer.pretokenizer).name)
        data.write_bytes(pickle.dumps(job))
        out = Path(tmp) / "callgrind.out"
        env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
        cmd = [valgrind, "--tool=callgrind", f"--callgrind-out-file={out}",
               sys.executable, "-m", "harness.dev.profile", "--callgrind-worker", str(data)]
        t0 = time.perf_counter()
        try:
            r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env,
                               cwd=ROOT)
        except subprocess.TimeoutExpired:
            return [f"callgrind: gave up after {timeout} s"], {}
        took = time.perf_counter() - t0
        if r.returncode != 0 or not out.exists():
            tail = (r.stderr or r.stdout).strip().splitlines()[-3:]
            return [f"callgrind: valgrind failed (exit {r.returncode}): " + " / ".join(tail)], {}
        costs, total = parse_callgrind(out)
    per = attribute(costs)
    lib_total = sum(per.values())
    lines = [f"callgrind: {kind} on {n:,} bytes, 1 thread, under valgrind ({took:.1f} s); "
             f"instructions executed (Ir, self) per assembly routine; the library ran "
             f"{lib_total:,} of the process's {total:,} ({100 * lib_total / total if total else 0:.1f}%)",
             f"  {'routine':<32} {'Ir':>15} {'share':>7} {'Ir/byte':>9}"]
    for name, c in sorted(per.items(), key=lambda kv: -kv[1]):
        if c < lib_total * 0.0005:
            continue
        lines.append(f"  {name:<32} {c:15,} {100 * c / lib_total:6.1f}% {c / max(n, 1):9.2f}")
    entry = sum(c for (_, fn), c in costs.items()
                if fn.split("'")[0] in ("ffi_call_int", "ffi_call_unix64"))
    if kind != "pretok":
        lines.append(f"  {'[libffi: ffi_call_*]':<32} {entry:15,}   (includes the own body of each "
                     "exported function Python calls directly: callgrind loses libffi's call, "
                     "so those bodies count here; the routines they call are named above)")
    return lines, per


def _callgrind_worker(path: str) -> None:
    """The child under valgrind: one job, one thread."""
    job = pickle.loads(Path(path).read_bytes())
    docs = job["docs"]
    if job["kind"] == "train":
        from ..train import train

        train(docs, vocab_size=job["vocab_size"], threads=1, pretokenizer=job["pretokenizer"])
    elif job["kind"] == "encode":
        from ..encoder import encode_many
        from ..tokenizer import Tokenizer

        encode_many(Tokenizer(job["merges"], pretokenizer=job["pretokenizer"]), docs,
                    threads=1, bos=True)
    else:
        # through the test library's trampoline: callgrind loses the call libffi makes
        # (its stack switch), so a function Python calls directly has its own body
        # counted under ffi_call_int; one real `call` further in, it gets its name
        from .._lib import checkasm_lib, ffi, fn_address, lib
        from ..buffers import Padded

        L, T = lib(), checkasm_lib()
        fn = fn_address(L, "asmbpe_split_offsets")
        cap = 1 << 16
        out = np.empty(cap, dtype=np.uint64)
        args = np.zeros(8, dtype=np.uint64)
        cyc = np.zeros(1, dtype=np.uint64)
        for d in docs:
            buf = Padded(d)
            pos = 0
            while True:
                args[:6] = [int(ffi.cast("uintptr_t", buf.ptr)), len(d), pos,
                            int(ffi.cast("uintptr_t", ffi.from_buffer(out))), cap,
                            resolve(job["pretokenizer"]).id]
                got = T.asmbpe_bench_call(fn, ffi.from_buffer("uint64_t[]", args), 1, 1, 1,
                                          ffi.from_buffer("uint64_t[]", cyc), ffi.NULL)
                if got < cap:
                    break
                pos = int(out[cap - 1])


# --------------------------------------------------------------------------- plot

def plot_merges(per_merge: np.ndarray, counts: np.ndarray, path, hz: float,
                title: str = "") -> Path:
    """Three panels over the merge index, log scales: time per merge, positions
    replaced (and words rewritten) per merge, winning count. Writes a PNG."""
    try:
        import matplotlib
    except ImportError:
        raise RuntimeError("--plot needs matplotlib: pip install 'asmbpe[plot]' "
                           "(or pip install matplotlib)") from None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    m = len(per_merge)
    x = np.arange(1, m + 1)

    def pos(v):
        v = np.asarray(v, dtype=np.float64)
        return np.where(v > 0, v, np.nan)

    def binned(v, nbins=48):
        """Medians over log-spaced bins of merges (a line readable on a log x axis)."""
        edges = np.unique(np.geomspace(1, m + 1, nbins + 1).astype(np.int64))
        xs, ys = [], []
        for lo, hi in zip(edges[:-1], edges[1:]):
            part = v[lo - 1:hi - 1]
            part = part[~np.isnan(part)]
            if len(part):
                xs.append(np.sqrt(lo * max(hi - 1, lo)))
                ys.append(np.median(part))
        return xs, ys

    us = pos(per_merge[:, 0] / hz * 1e6)
    fig, axes = plt.subplots(3, 1, figsize=(9, 9.5), sharex=True)
    dot = dict(marker=".", ms=2, ls="none", alpha=0.4)
    axes[0].plot(x, us, color="tab:blue", **dot)
    axes[0].plot(*binned(us), color="tab:red", lw=1.5, label="median (log bins)")
    axes[0].legend(loc="upper right")
    axes[0].set_ylabel("time per merge (µs)")
    axes[1].plot(x, pos(per_merge[:, 2]), color="tab:green", label="positions replaced", **dot)
    axes[1].plot(*binned(pos(per_merge[:, 2])), color="tab:green", lw=1.5)
    axes[1].plot(*binned(pos(per_merge[:, 1])), color="tab:orange", lw=1.5,
                 label="words rewritten (median)")
    axes[1].legend(loc="upper right", markerscale=4)
    axes[1].set_ylabel("per merge")
    axes[2].plot(x, pos(counts[:m]), color="tab:purple", lw=1)
    axes[2].set_ylabel("winning count")
    axes[2].set_xlabel("merge (1 = first)")
    for ax in axes:
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.grid(True, which="major", alpha=0.3)
    fig.suptitle(title or f"asmbpe merge loop, {m} merges")
    fig.tight_layout()
    path = Path(path)
    fig.savefig(path, dpi=100, format="png")
    plt.close(fig)
    return path


# --------------------------------------------------------------------------- command

def run_profile(kind: str, docs: list[bytes], describe: str, *, vocab_size: int = 8192,
                threads: int | None = None, tokenizer=None, perf: bool = False,
                callgrind: bool = False, plot=None, warm: bool = False,
                pretokenizer=DEFAULT, out=print) -> Report:
    """What `asmbpe profile KIND` does: the profile (under perf stat with perf), its
    table, then the callgrind run and the plot when asked. pretokenizer: for train and
    pretok (encode uses the tokenizer's; one trained here gets this one)."""
    hardware, why = perf_probe() if perf else (False, "")
    if perf and not hardware:
        out(f"perf: {why}; counting what it can (software counters) and going on")
    if kind == "encode" and tokenizer is None:
        from ..train import train

        out(f"(training a vocab-{vocab_size} tokenizer on the same documents to encode with)")
        tokenizer = train(docs, vocab_size=vocab_size, threads=threads,
                          pretokenizer=pretokenizer).tokenizer
    ps = PerfStat(hardware) if perf and shutil.which("perf") else None
    if ps is not None:
        ps.__enter__()
    try:
        if kind == "train":
            rep = profile_train(docs, vocab_size, threads, per_merge=True, describe=describe,
                                pretokenizer=pretokenizer)
        elif kind == "encode":
            rep = profile_encode(docs, tokenizer, threads, describe=describe, warm=warm)
        elif kind == "pretok":
            rep = profile_pretok(docs, describe=describe, pretokenizer=pretokenizer)
        else:
            raise ValueError(f"unknown profile {kind!r}")
    finally:
        if ps is not None:
            ps.__exit__(None, None, None)
    for line in format_report(rep):
        out(line)
    if ps is not None:
        if warm:
            out("perf stat: the counts below include the untimed warm-up call")
        for line in perf_lines(ps.values, hardware, why):
            out(line)
    if callgrind:
        lines, _ = run_callgrind(kind, docs, vocab_size=min(vocab_size, 4096),
                                 tokenizer=tokenizer if kind == "encode" else None,
                                 pretokenizer=pretokenizer)
        for line in lines:
            out(line)
    if plot and kind == "train":
        pm = rep.extra["stats"].get("per_merge")
        if pm is None or not len(pm):
            out("plot: no merges were learned; nothing to draw")
        else:
            plot_merges(pm, rep.extra["counts"], plot, rep.tsc_hz,
                        title=f"asmbpe merge loop: {describe}, {len(pm)} merges")
            out(f"plot: wrote {plot}")
    return rep


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--callgrind-worker":
        _callgrind_worker(sys.argv[2])
    else:
        sys.exit("usage: python -m harness.dev.profile --callgrind-worker JOB "
                 "(internal; use `asmbpe profile`)")
