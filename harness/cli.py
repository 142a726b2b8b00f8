"""The `asmbpe` command line (click).

    asmbpe split FILE            chunks of FILE joined by |
    asmbpe train INPUT... -o tokenizer.bin   learn merges (SPEC §4), write tokenizer.bin
    asmbpe encode INPUT... -t tokenizer.bin -o out.tok [--chat]   encode into a .tok file
    asmbpe decode FILE.tok -t tokenizer.bin     the text of a .tok file, on stdout
    asmbpe show -t tokenizer.bin TEXT_OR_FILE   each token on its own colour
    asmbpe stats FILE.tok|INPUT... -t tokenizer.bin   documents, bytes/token, top tokens
    asmbpe export -t tokenizer.bin --format tiktoken|hf -o PATH
    asmbpe check                 checkasm: the assembly against the twin
    asmbpe bench pretok          pre-tokenizer speed on the shared corpora
    asmbpe bench train           training speed against rustbpe, tokenizers, gigatoken
    asmbpe bench encode          encoding speed against tiktoken, tokenizers, gigatoken
    asmbpe profile train|encode|pretok   cycles per phase and thread [--perf --callgrind --plot]
                                 (--cluster: the distributed path against one process)
    asmbpe data fetch fineweb-edu|smoltalk --shards 0-3   download shards into the cache
    asmbpe data prepare INPUT... -o DIR                   local files -> Parquet shards

Errors about the input or the environment are one line on stderr,
`asmbpe: error: ...`, and exit status 1; never a traceback.
"""
from __future__ import annotations

import contextlib
import os
import sys
import threading
import time
from pathlib import Path

import click

from .corpora import InputError, available, check_file, corpora_dir
from .errors import AsmbpeError

CONTEXT = dict(help_option_names=["-h", "--help"])


def _fail(message: str) -> None:
    click.echo(f"asmbpe: error: {message}", err=True)
    sys.exit(1)


class _Group(click.Group):
    """Turns the harness's expected errors into one line on stderr and exit 1."""

    def invoke(self, ctx):
        try:
            return super().invoke(ctx)
        except AsmbpeError as e:
            _fail(str(e).splitlines()[0] if str(e) else type(e).__name__)
        except OSError as e:
            name = f"{e.filename}: " if getattr(e, "filename", None) else ""
            _fail(f"{name}{e.strerror or e}")


@click.group(cls=_Group, context_settings=CONTEXT)
def asmbpe():
    """asmbpe: a byte-level BPE tokenizer whose hot paths are hand-written x86-64
    assembly (libasmbpe.so, built with `python build.py`)."""


@asmbpe.command(context_settings=CONTEXT)
@click.argument("file", type=click.Path(dir_okay=True, path_type=str))
def split(file):
    """Print the pre-tokenizer chunks of FILE (raw bytes) joined by |."""
    from .pretok import split as asm_split

    path = check_file(file)
    try:
        data = path.read_bytes()
    except OSError as e:
        raise InputError(f"{file}: cannot read: {e.strerror or e}") from None
    if not data:
        raise InputError(f"{file}: is empty")
    chunks = asm_split(data)
    stdout = sys.stdout.buffer
    try:
        stdout.write(b"|".join(chunks) + b"\n")
        stdout.flush()
    except BrokenPipeError:                 # `asmbpe split FILE | head`
        _quiet_broken_pipe()


def _quiet_broken_pipe() -> None:
    import os

    # stdout is gone; point it at /dev/null so the exit-time flush does not complain
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    sys.exit(0)


# --------------------------------------------------------------------------- train

class _TrainProgress:
    """harness.train's progress callback for the terminal (stderr): a bar while counting
    (by text bytes, MB/s), then, while the merge loop runs inside one library call
    (cffi releases the GIL, so a thread can draw it), merges done, merges/s and the
    current winning count, read live from the library's output arrays."""

    SPIN = "|/-\\"

    def __init__(self, enabled: bool = True):
        self.enabled = enabled
        self.err = sys.stderr
        self.tty = self.err.isatty()
        self.bar = None
        self.t_count = None
        self.counted = 0
        self.t_merge = None
        self.stop = threading.Event()
        self.thread = None
        self.live = None

    def set_live(self, live) -> None:
        """live() -> (merges done, winning count of the latest merge)."""
        self.live = live

    def __call__(self, phase: str, done: int, total):
        if not self.enabled:
            return
        now = time.perf_counter()
        if phase == "count":
            if self.t_count is None:
                self.t_count = now
                if total:
                    self.bar = click.progressbar(length=total, label="counting", file=self.err,
                                                 show_eta=True, item_show_func=lambda x: x)
                    self.bar.__enter__()
            rate = done / 1e6 / (now - self.t_count) if now > self.t_count else 0.0
            if self.bar is not None:
                self.bar.update(done - self.counted, f"{done / 1e6:.1f} MB, {rate:.1f} MB/s")
            elif self.tty:
                self.err.write(f"\rcounting: {done / 1e6:.1f} MB, {rate:.1f} MB/s")
                self.err.flush()
            self.counted = done
        elif phase == "merge" and done == 0 and self.t_merge is None:
            self._end_count(now)
            self.t_merge = now
            if self.tty:
                self.thread = threading.Thread(target=self._spin, args=(total,), daemon=True)
                self.thread.start()
            else:
                click.echo(f"merging: up to {total} merges ...", err=True)
        elif phase == "merge":
            self.close()

    def _end_count(self, now: float) -> None:
        if self.bar is not None:
            self.bar.__exit__(None, None, None)
            self.bar = None
        elif self.tty and self.t_count is not None:
            self.err.write("\n")
        if self.t_count is not None:
            took = now - self.t_count
            rate = self.counted / 1e6 / took if took > 0 else 0.0
            click.echo(f"counted {self.counted / 1e6:.1f} MB in {took:.2f} s ({rate:.1f} MB/s)",
                       err=True)

    def _spin(self, total: int) -> None:
        k = 0
        while not self.stop.wait(0.1):
            took = time.perf_counter() - self.t_merge
            if self.live is not None:
                m, count = self.live()
                rate = m / took if took > 0 else 0.0
                self.err.write(f"\rmerging: {m}/{total} merges, {rate:,.0f} merges/s, "
                               f"winning count {count:,} {self.SPIN[k % 4]} {took:.1f} s ")
            else:
                self.err.write(f"\rmerging: up to {total} merges {self.SPIN[k % 4]} {took:.1f} s")
            self.err.flush()
            k += 1

    def close(self) -> None:
        if self.thread is not None:
            self.stop.set()
            self.thread.join()
            self.thread = None
            self.err.write("\r\x1b[K")
            self.err.flush()
        if self.bar is not None:
            self.bar.__exit__(None, None, None)
            self.bar = None


def _check_output(path: str) -> Path:
    """Fail before any work when tokenizer.bin could not be written at `path`."""
    out = Path(path)
    if out.is_dir():
        raise InputError(f"{out}: is a directory (give a file name with -o)")
    parent = out.parent if str(out.parent) else Path(".")
    if not parent.is_dir():
        raise InputError(f"{out}: directory {parent} does not exist")
    if not os.access(parent, os.W_OK):
        raise InputError(f"{out}: cannot write in {parent}: permission denied")
    return out


def _mb(n: int) -> str:
    return f"{n / 1e6:.1f} MB"


def _memory(value):
    """--memory SIZE -> bytes (None when not given)."""
    from .corpora import parse_size

    if value is None:
        return None
    try:
        n = parse_size(value)
    except ValueError as e:
        raise InputError(f"--memory: {e}") from None
    if n < 8 << 20:
        raise InputError(f"--memory: {value} is too small (at least 8M)")
    return n


_MEMORY = click.option(
    "--memory", default=None, metavar="SIZE",
    help="Bound the data in flight (input batches, buffers, ids) to about SIZE (e.g. "
         "512M, 4G), whatever the input size: the batch size follows from it. The "
         "interpreter and libraries (about 70 MB) and, for train, the word table come "
         "on top. Parquet row groups are the unit of reading (about 12x their text is set aside). Default: fixed batches (16 MB train, 8 MB encode).")
_CLUSTER = click.option(
    "--cluster", default=None, metavar="ADDRESS",
    help="Run on a Dask cluster: a scheduler address (tcp://host:8786) or local:N for "
         "N worker processes on this machine. Every input file is one shard; paths must "
         "be visible to every worker.")


def _open_cluster(address):
    from .distributed import connect

    try:
        return connect(address)
    except ValueError as e:
        raise InputError(f"--cluster: {e}") from None


@asmbpe.command(context_settings=CONTEXT)
@click.argument("inputs", nargs=-1, required=True, metavar="INPUT...",
                type=click.Path(dir_okay=True, path_type=str))
@click.option("-o", "--output", required=True, metavar="FILE",
              help="Where to write tokenizer.bin (written to FILE.tmp, then renamed).")
@click.option("--vocab-size", type=int, default=32768, show_default=True,
              help="256 bytes + merges + 16 specials (272..65535).")
@click.option("--threads", type=int, default=None,
              help="Threads for counting and merging (default: all cores).")
@click.option("--max-word-bytes", type=int, default=256, show_default=True,
              help="Leave out chunks longer than this (0 = no limit).")
@click.option("--min-count", type=int, default=1, show_default=True,
              help="Stop when no pair occurs at least this often.")
@click.option("--separator", default=None, metavar="LINE",
              help="Plain text files: documents are separated by lines equal to LINE "
                   "('' = a blank line); default: one document per file.")
@click.option("--naive", is_flag=True,
              help="The library's naive twin: recount every pair for every merge (slow).")
@click.option("--verify", is_flag=True,
              help="Recount all pairs at the end and check the kept table and the "
                   "winning counts.")
@_MEMORY
@_CLUSTER
@click.option("-q", "--quiet", is_flag=True, help="No progress output.")
def train(inputs, output, vocab_size, threads, max_word_bytes, min_count, separator, naive,
          verify, memory, cluster, quiet):
    """Learn byte-level BPE merges from INPUT files and write tokenizer.bin.

    INPUT: Parquet (`text` column), JSONL (`text` field) or plain text, JSONL and
    text optionally .gz / .zst. Progress goes to stderr, the summary to stdout.
    """
    from .train import TrainError
    from .train import train as run_train

    from .corpora import arrow_memory_kept, budget_batch_bytes, check_streamable
    from .train import BATCH_BYTES

    out = _check_output(output)
    files = [check_file(p) for p in inputs]
    budget = _memory(memory)
    batch_bytes = BATCH_BYTES
    if budget is not None:
        batch_bytes = budget_batch_bytes(budget, "train", files)
        check_streamable(files, batch_bytes, separator)
    progress = _TrainProgress(enabled=not quiet)
    close = None
    try:
        if cluster:
            from .distributed import train_distributed

            client, close = _open_cluster(cluster)
            result = train_distributed(files, vocab_size, client, threads=threads,
                                       naive=naive, max_word_bytes=max_word_bytes,
                                       min_count=min_count, verify=verify,
                                       separator=separator, batch_bytes=batch_bytes,
                                       progress=progress)
        else:
            with (arrow_memory_kept(_readers(threads)) if budget is None
                  else contextlib.nullcontext()):
                result = run_train(files, vocab_size=vocab_size, threads=threads,
                                   naive=naive, max_word_bytes=max_word_bytes,
                                   min_count=min_count, verify=verify, progress=progress,
                                   separator=separator, batch_bytes=batch_bytes)
    except (ValueError, TypeError, TrainError) as e:
        progress.close()
        _fail(str(e).splitlines()[0] if str(e) else type(e).__name__)
    finally:
        progress.close()
        if close is not None:
            close()
    s = result.stats
    sec = s["seconds"]
    if s["bytes_in"] == 0:
        raise InputError(f"no text in the input ({s['documents']} empty document(s)); "
                         f"nothing written to {out}")
    m = result.n_merges
    if not quiet:
        loop = sec["merge_loop"]
        rate = f"{m / loop:.0f} merges/s" if loop > 0 else "-"
        last = f", last winning count {int(result.counts[-1])}" if m else ""
        click.echo(f"merged {m} merges in {loop:.2f} s ({rate}){last}", err=True)
    result.tokenizer.save(out)
    if m == 0:
        click.echo(f"asmbpe: warning: no pair to merge (every chunk is a single byte, or "
                   f"longer than --max-word-bytes): wrote a tokenizer with 0 merges "
                   f"(vocab_size 272) to {out}", err=True)
    elif m < s["merges_asked"]:
        click.echo(f"asmbpe: note: stopped early after {m} of {s['merges_asked']} merges "
                   f"(no pair left with count >= {max(min_count, 1)}); vocab_size is "
                   f"{result.tokenizer.vocab_size}, not {vocab_size}", err=True)
    total = sec["total"]
    click.echo(f"trained {_mb(s['bytes_in'])}, {s['documents']} docs, "
               f"{s['unique_words']} unique words, {m} merges learned, {total:.2f} s, "
               f"{s['bytes_in'] / 1e6 / total:.1f} MB/s -> {out} "
               f"(vocab_size {result.tokenizer.vocab_size})")
    click.echo(f"phases: read {sec['read']:.2f} s, count {sec['count']:.2f} s, layout "
               f"{sec['layout']:.2f} s, pairs {sec['pairs']:.2f} s, merge loop "
               f"{sec['merge_loop']:.2f} s (scan {sec['scan']:.2f}, apply {sec['apply']:.2f}, "
               f"heap {sec['heap']:.2f}, compact {sec['compact']:.2f}), verify "
               f"{sec['verify']:.2f} s; {s['threads']} thread(s), peak memory "
               f"{s['peak_memory_bytes'] / 1e6:.0f} MB"
               + (", verified" if verify else "") + (", naive" if naive else "")
               + (f"; counted {s['shards']} shard(s) on {s['workers']} worker(s), "
                  f"tree depth {s['tree_depth']}" if cluster else ""))


@asmbpe.command(context_settings=CONTEXT)
@click.option("--seed", type=int, default=None, help="Random seed (default: a new one, printed).")
@click.option("--function", "pattern", default="*", show_default=True, metavar="GLOB",
              help="Check only the functions whose name matches GLOB.")
@click.option("--bench", is_flag=True,
              help="Then time each function in cycles per call (inside the library: "
                   "lfence+rdtsc, two inputs alternated, 1000 samples, overhead "
                   "subtracted).")
@click.option("--bench-only", is_flag=True, help="Time the functions, skip the checks.")
@click.option("--save", metavar="PATH", default=None,
              help="Write the bench figures to PATH as a baseline JSON (implies --bench).")
@click.option("--baseline", metavar="PATH", default=None,
              help="Print each function's ratio against a baseline saved with --save "
                   "(implies --bench).")
@click.option("--samples", type=click.IntRange(min=1000), default=None,
              help="Timed samples per function (default 1000).")
def check(seed, pattern, bench, bench_only, save, baseline, samples):
    """Check the assembly functions against their Python twins (checkasm); with --bench,
    time them in cycles, and compare with a saved baseline."""
    from .dev.checkasm import run_checks

    extra = {k: v for k, v in dict(save=save, baseline=baseline, bench_only=bench_only,
                                   samples=samples).items() if v}
    if baseline or save:
        from .dev.checkasm_bench import BaselineError, load_baseline

        try:
            if baseline:
                load_baseline(baseline)
            if save and Path(save).is_dir():
                raise BaselineError(f"{save}: is a directory")
        except BaselineError as e:
            _fail(str(e))
    if not run_checks(seed=seed, pattern=pattern, bench=bench, **extra):
        sys.exit(1)


@asmbpe.group(context_settings=CONTEXT)
def bench():
    """Benchmarks (text in memory, median of several runs)."""


@bench.command(context_settings=CONTEXT)
@click.option("--corpus", "corpora", multiple=True, metavar="NAME",
              type=click.Choice(["english", "multilingual", "code"]),
              help="english, multilingual or code (repeatable; default: every one available).")
@click.option("--limit-mb", type=click.FloatRange(min=0), default=32, show_default=True,
              help="Read about this many MB of whole documents per corpus (0 = all).")
@click.option("--twin-mb", type=click.FloatRange(min=0), default=1, show_default=True,
              help="MB given to the (slow) Python twin.")
@click.option("--runs", type=click.IntRange(min=1), default=5, show_default=True,
              help="Timed runs; the median is reported.")
@click.option("--json", "json_path", type=click.Path(dir_okay=False), default=None,
              metavar="PATH", help="Also write the rows as JSON to PATH.")
def pretok(corpora, limit_mb, twin_mb, runs, json_path):
    """Pre-tokenizer speed: asm vs the oracle regex vs the Python twin."""
    from .dev.bench import bench_pretok, write_json

    if not corpora_dir().is_dir():
        raise InputError(f"corpora directory not found: {corpora_dir()} "
                         "(put shared/ next to the repository or set ASMBPE_CORPORA)")
    names = list(corpora) or available()
    if not names:
        raise InputError(f"no corpus (english|multilingual|code).parquet in {corpora_dir()}")
    rows = bench_pretok(names, limit_mb, twin_mb, runs=runs, out=click.echo)
    if json_path:
        write_json(rows, json_path)
        click.echo(f"wrote {len(rows)} rows to {json_path}")


@bench.command("train", context_settings=CONTEXT)
@click.option("--corpus", default="english", show_default=True,
              type=click.Choice(["english", "multilingual", "code"]),
              help="The shared corpus to train on.")
@click.option("--limit-mb", type=click.FloatRange(min=0), default=100, show_default=True,
              help="Read about this many MB of whole documents (0 = all).")
@click.option("--vocab-size", type=int, default=32768, show_default=True,
              help="256 + merges + 16 (peers without specials get vocab_size - 16).")
@click.option("--runs", type=click.IntRange(min=1), default=3, show_default=True,
              help="Runs per implementation (each a fresh process); the median is shown.")
@click.option("--threads", type=int, default=None,
              help="Threads for every implementation (default: all cores).")
@click.option("--impl", "impls", multiple=True, metavar="NAME",
              type=click.Choice(["asmbpe", "rustbpe", "tokenizers", "gigatoken"]),
              help="Run only these (repeatable; default: every one installed).")
@click.option("--json", "json_path", type=click.Path(dir_okay=False), default=None,
              metavar="PATH", help="Also write the rows as JSON to PATH.")
def train_bench(corpus, limit_mb, vocab_size, runs, threads, impls, json_path):
    """Training speed: asmbpe vs rustbpe, Hugging Face tokenizers and gigatoken on the
    same documents (wall median, CPU, peak RSS, merges equal to asmbpe's)."""
    from .dev.bench_train import IMPLS, bench_train, write_rows

    if threads is None:
        threads = os.cpu_count() or 1
    rows = bench_train(corpus, limit_mb, vocab_size, runs, threads,
                       impls=list(impls) or list(IMPLS), out=click.echo)
    if json_path:
        write_rows(rows, json_path)
        click.echo(f"wrote {len(rows)} rows to {json_path}")


@bench.command("encode", context_settings=CONTEXT)
@click.option("--corpus", default="english", show_default=True,
              type=click.Choice(["english", "multilingual", "code"]),
              help="The shared corpus to encode.")
@click.option("--limit-mb", type=click.FloatRange(min=0), default=100, show_default=True,
              help="Read about this many MB of whole documents (0 = all).")
@click.option("--vocab-size", type=int, default=32768, show_default=True,
              help="Vocabulary trained by asmbpe on the same documents (unless --tokenizer).")
@click.option("--runs", type=click.IntRange(min=1), default=3, show_default=True,
              help="Timed runs per implementation and thread count; the median is shown.")
@click.option("--threads", type=click.IntRange(min=1), default=None,
              help="The multi-threaded setting (default: all cores); 1 thread is always run.")
@click.option("--impl", "impls", multiple=True, metavar="NAME",
              type=click.Choice(["asmbpe", "tiktoken", "tokenizers", "gigatoken"]),
              help="Run only these (repeatable; default: every one installed).")
@click.option("--tokenizer", "tokenizer_path", type=click.Path(dir_okay=False), default=None,
              metavar="FILE", help="Use this tokenizer.bin instead of training one.")
@click.option("--json", "json_path", type=click.Path(dir_okay=False), default=None,
              metavar="PATH", help="Also write the rows as JSON to PATH.")
@click.option("--cluster", default=None, metavar="ADDRESS",
              help="Instead: the distributed encode (local:N or a scheduler address) "
                   "against one process on the same shards (overhead in %).")
@click.option("--shards", "n_shards", type=click.IntRange(min=1), default=8,
              show_default=True, help="With --cluster: input shards.")
def encode_bench(corpus, limit_mb, vocab_size, runs, threads, impls, tokenizer_path,
                 json_path, cluster, n_shards):
    """Encoding speed: asmbpe vs tiktoken, Hugging Face tokenizers and gigatoken on the
    same documents and vocabulary, at 1 thread and at all threads (MB/s, ids equal to
    asmbpe's). With --cluster: the distributed path against one process."""
    from .dev.bench_encode import IMPLS, bench_encode, write_rows

    tok = _load_tokenizer(tokenizer_path) if tokenizer_path else None
    if cluster:
        import json

        from .dev.bench_cluster import bench_cluster

        row = bench_cluster(corpus, limit_mb, vocab_size, runs, cluster, tok,
                            shards=n_shards, out=click.echo)
        if json_path:
            Path(json_path).write_text(json.dumps(row, indent=1) + "\n")
            click.echo(f"wrote 1 row to {json_path}")
        return
    rows = bench_encode(corpus, limit_mb, vocab_size, runs, threads or os.cpu_count() or 1,
                        impls=list(impls) or list(IMPLS), tokenizer=tok, out=click.echo)
    if json_path:
        write_rows(rows, json_path)
        click.echo(f"wrote {len(rows)} rows to {json_path}")


# ------------------------------------------------------------------ encode and friends

def _load_tokenizer(path: str):
    """tokenizer.bin at path (TokenizerFileError, a one-line error, when it is bad)."""
    from .tokenizer import Tokenizer

    return Tokenizer.load(check_file(path))


def _readers(threads) -> int:
    """Parquet row groups read at once for a run on `threads` worker threads (None:
    all CPUs): one reader thread per four, as one decodes about as much text per
    second as three or four encoding threads use (docs/OPTIMIZATION_LOG.md, E55)."""
    return max(1, (threads or os.cpu_count() or 1) // 4)


def _check_threads(threads) -> None:
    if threads is not None and threads < 1:
        raise InputError(f"--threads must be >= 1, got {threads}")


class _BytesProgress:
    """A progress display on stderr for work measured in source bytes: a bar (MB done,
    MB/s) when the total is known, else a counter line on a terminal; nothing when
    disabled."""

    def __init__(self, label: str, total: int | None, enabled: bool = True):
        self.label = label
        self.enabled = enabled
        self.err = sys.stderr
        self.t0 = time.perf_counter()
        self.done = 0
        self.bar = None
        if enabled and total:
            self.bar = click.progressbar(length=total, label=label, file=self.err,
                                         show_eta=True, item_show_func=lambda x: x)
            self.bar.__enter__()

    def __call__(self, done: int) -> None:
        if not self.enabled:
            return
        took = time.perf_counter() - self.t0
        info = f"{done / 1e6:.1f} MB, {done / 1e6 / took if took > 0 else 0.0:.1f} MB/s"
        if self.bar is not None:
            self.bar.update(done - self.done, info)
        elif self.err.isatty():
            self.err.write(f"\r{self.label}: {info}")
            self.err.flush()
        self.done = done

    def close(self) -> None:
        if self.bar is not None:
            self.bar.__exit__(None, None, None)
            self.bar = None
        elif self.enabled and self.done and self.err.isatty():
            self.err.write("\n")
            self.done = 0


_SEPARATOR = click.option(
    "--separator", default=None, metavar="LINE",
    help="Plain text files: documents are separated by lines equal to LINE ('' = a blank "
         "line); default: one document per file.")


@asmbpe.command(context_settings=CONTEXT)
@click.argument("inputs", nargs=-1, required=True, metavar="INPUT...",
                type=click.Path(dir_okay=True, path_type=str))
@click.option("-t", "--tokenizer", "tokenizer_path", required=True, metavar="FILE",
              help="tokenizer.bin.")
@click.option("-o", "--output", required=True, metavar="FILE",
              help="The .tok file to write (written under a temporary name, then renamed); "
                   "with --cluster or --shards, a directory.")
@click.option("--chat", is_flag=True,
              help="The inputs hold conversations (`messages`: role/content, JSONL or "
                   "Parquet); MASKBIT marks assistant content and its <|end|>.")
@click.option("--threads", type=int, default=None,
              help="Encoding threads (default: the library chooses).")
@_SEPARATOR
@_MEMORY
@_CLUSTER
@click.option("--shards", "sharded", is_flag=True,
              help="Write the layout of --cluster on this machine: OUTPUT is a directory "
                   "with one .tok per input file and manifest.json.")
@click.option("-q", "--quiet", is_flag=True, help="No progress output.")
def encode(inputs, tokenizer_path, output, chat, threads, separator, memory, cluster, sharded,
           quiet):
    """Encode INPUT files into a .tok file (SPEC §7): each document as <|bos|> + its
    text, or with --chat each conversation as <|bos|>, then <|role|> content <|end|>
    per message.

    INPUT: Parquet (`text`, or `messages` with --chat), JSONL (`text` / `messages`) or,
    without --chat, plain text; JSONL and text optionally .gz / .zst. Progress goes to
    stderr, the summary to stdout. On any error nothing is left at the output path.

    With --cluster ADDRESS (or --shards, on this machine) OUTPUT is a directory: each
    INPUT becomes OUTPUT/NNNNN-NAME.tok, listed with its counts in
    OUTPUT/manifest.json; the shards' tokens, concatenated in manifest order, are
    those of the single .tok file, and the files are the same bytes for any number of
    workers. After an error no shard of the run and no manifest is left.
    """
    from .corpora import (arrow_memory_kept, budget_batch_bytes, check_streamable,
                          estimate_bytes)
    from .pipeline import BLOCK_BYTES, PREFETCH_BLOCKS, encode_to_tok

    _check_threads(threads)
    tok = _load_tokenizer(tokenizer_path)
    files = [check_file(p) for p in inputs]
    budget = _memory(memory)
    batch_bytes = BLOCK_BYTES
    if budget is not None:
        batch_bytes = budget_batch_bytes(budget, "encode", files)
        if not chat:
            check_streamable(files, batch_bytes, separator)
    if cluster or sharded:
        return _encode_sharded(tok, files, output, chat, threads, separator, batch_bytes,
                               cluster, quiet)
    out = _check_output(output)
    # chat: the files hold JSON around the contents, so their size is no estimate
    progress = _BytesProgress("encoding", None if chat else estimate_bytes(files),
                              enabled=not quiet)
    t0 = time.perf_counter()
    try:
        with (arrow_memory_kept(_readers(threads)) if budget is None
              else contextlib.nullcontext()):
            s = encode_to_tok(tok, files, out, chat=chat, threads=threads,
                              separator=separator, progress=progress,
                              batch_bytes=batch_bytes,
                              prefetch_depth=PREFETCH_BLOCKS if budget is None else 1)
    except ValueError as e:
        progress.close()
        _fail(str(e).splitlines()[0] if str(e) else type(e).__name__)
    finally:
        progress.close()
    took = time.perf_counter() - t0
    rate = s.source_bytes / 1e6 / took if took > 0 else 0.0
    what = "conversations" if chat else "documents"
    click.echo(f"encoded {s.documents:,} {what}, {_mb(s.source_bytes)}, {s.tokens:,} tokens "
               f"({s.special_tokens:,} special), {s.bytes_per_token:.2f} bytes/token, "
               f"{took:.2f} s, {rate:.1f} MB/s -> {out}")


def _encode_sharded(tok, files, output, chat, threads, separator, batch_bytes, cluster,
                    quiet):
    from .corpora import estimate_bytes
    from .distributed import encode_sharded

    out = Path(output)
    if out.exists() and not out.is_dir():
        raise InputError(f"{out}: exists and is not a directory (with --cluster or "
                         "--shards, -o names a directory)")
    parent = out.parent if str(out.parent) else Path(".")
    if not parent.is_dir():
        raise InputError(f"{out}: directory {parent} does not exist")
    progress = _BytesProgress("encoding", None if chat else estimate_bytes(files),
                              enabled=not quiet)
    close = None
    t0 = time.perf_counter()
    try:
        client = None
        if cluster:
            client, close = _open_cluster(cluster)
        s = encode_sharded(tok, files, out, client=client, chat=chat, threads=threads,
                           separator=separator, batch_bytes=batch_bytes, progress=progress)
    except ValueError as e:
        progress.close()
        _fail(str(e).splitlines()[0] if str(e) else type(e).__name__)
    finally:
        progress.close()
        if close is not None:
            close()
    took = time.perf_counter() - t0
    rate = s.source_bytes / 1e6 / took if took > 0 else 0.0
    what = "conversations" if chat else "documents"
    where = f"on {cluster}" if cluster else "on this machine"
    click.echo(f"encoded {s.documents:,} {what}, {_mb(s.source_bytes)}, {s.tokens:,} tokens "
               f"({s.special_tokens:,} special), {s.bytes_per_token:.2f} bytes/token, "
               f"{took:.2f} s, {rate:.1f} MB/s, {len(s.shards)} shard(s) {where} -> "
               f"{s.manifest}")


def _write_stdout(pieces) -> None:
    """Write str pieces to stdout as UTF-8; a closed pipe (`| head`) ends quietly."""
    stdout = sys.stdout.buffer
    try:
        for piece in pieces:
            stdout.write(piece.encode("utf-8", "surrogateescape"))
        stdout.flush()
    except BrokenPipeError:
        _quiet_broken_pipe()


@asmbpe.command(context_settings=CONTEXT)
@click.argument("file", metavar="FILE.tok", type=click.Path(dir_okay=True, path_type=str))
@click.option("-t", "--tokenizer", "tokenizer_path", required=True, metavar="FILE",
              help="The tokenizer.bin that wrote FILE.tok (its merges hash must match).")
@click.option("-q", "--quiet", is_flag=True, help="No summary on stderr.")
def decode(file, tokenizer_path, quiet):
    """Write the text of FILE.tok to stdout: every token's bytes (specials as their
    names, e.g. <|bos|>; MASKBIT stripped), decoded as UTF-8 with invalid bytes
    replaced by U+FFFD. A summary goes to stderr."""
    from .pipeline import decode_text
    from .tokfile import read_tok

    tok = _load_tokenizer(tokenizer_path)
    tf = read_tok(check_file(file), tok)
    t0 = time.perf_counter()
    try:
        _write_stdout(decode_text(tf, tok))
    except ValueError as e:                     # an id that is not a token
        _fail(f"{file}: {str(e).splitlines()[0]}")
    took = time.perf_counter() - t0
    if not quiet:
        rate = tf.source_bytes / 1e6 / took if took > 0 else 0.0
        click.echo(f"decoded {tf.n_tokens:,} tokens, {tf.n_documents:,} documents, "
                   f"{_mb(tf.source_bytes)} in {took:.2f} s ({rate:.1f} MB/s)", err=True)


@asmbpe.command(context_settings=CONTEXT)
@click.argument("text_or_file", metavar="TEXT_OR_FILE")
@click.option("-t", "--tokenizer", "tokenizer_path", required=True, metavar="FILE",
              help="tokenizer.bin.")
@click.option("--color/--no-color", default=None,
              help="Colours on or off (default: on when stdout is a terminal).")
@click.option("--limit", type=click.IntRange(min=0), default=0, show_default=True,
              help="Show at most this many tokens (0 = all).")
def show(text_or_file, tokenizer_path, color, limit):
    """Show how TEXT_OR_FILE splits into tokens. An existing file is shown whole: a
    .tok file as its tokens (MASKBIT tokens of chat files bold and underlined), any
    other file as its raw bytes encoded; anything else is taken as the text itself.

    With colour (a terminal, or --color): the text with each token on its own
    background colour, specials white on grey. Without (a pipe, or --no-color): one
    token per line, `ID<TAB>TEXT`, TEXT a Python literal, `*` after the ID for MASKBIT.
    """
    from .show import render_color, render_plain, summary
    from .tokfile import is_tok_file, read_tok

    tok = _load_tokenizer(tokenizer_path)
    chat = False
    if os.path.isfile(text_or_file):
        path = check_file(text_or_file)
        if is_tok_file(path):
            tf = read_tok(path, tok)
            ids, chat = tf.tokens, tf.chat
        else:
            ids = tok.encode(path.read_bytes())
    else:
        ids = tok.encode(text_or_file)
    if limit:
        ids = ids[:limit]
    table = tok.id_to_bytes()
    if color is None:
        color = sys.stdout.isatty()
    try:
        if color:
            _write_stdout([render_color(ids, table, chat), "\n"])
            click.echo(summary(ids, table, chat), err=True)
        else:
            _write_stdout([line + "\n" for line in render_plain(ids, table, chat)])
    except ValueError as e:                     # an id that is not a token (a bad .tok)
        _fail(f"{text_or_file}: {e}")


@asmbpe.command(context_settings=CONTEXT)
@click.argument("inputs", nargs=-1, required=True, metavar="FILE.tok|INPUT...",
                type=click.Path(dir_okay=True, path_type=str))
@click.option("-t", "--tokenizer", "tokenizer_path", required=True, metavar="FILE",
              help="tokenizer.bin.")
@click.option("--top", type=click.IntRange(min=0), default=20, show_default=True,
              help="List the N most frequent tokens.")
@click.option("--chat", is_flag=True, help="INPUT files hold conversations (as encode --chat).")
@click.option("--threads", type=int, default=None, help="Encoding threads for INPUT files.")
@_SEPARATOR
def stats(inputs, tokenizer_path, top, chat, threads, separator):
    """Documents, source bytes, tokens, bytes per token and the most frequent tokens of
    .tok files (read as they are) and INPUT files (encoded first, as `asmbpe encode`
    would). Bytes per token counts text tokens only (specials left out)."""
    from .show import TokenStats, format_stats
    from .pipeline import encode_blocks
    from .tokfile import is_tok_file, read_tok

    _check_threads(threads)
    tok = _load_tokenizer(tokenizer_path)
    files = [check_file(p) for p in inputs]
    st = TokenStats(tok.vocab_size)
    try:
        for path in files:
            if is_tok_file(path):
                tf = read_tok(path, tok)
                for block in tf.blocks():
                    st.add(block, chat=tf.chat)
                st.documents += tf.n_documents
                st.source_bytes += tf.source_bytes
        others = [p for p in files if not is_tok_file(p)]
        if others:
            for tokens, docs, nbytes in encode_blocks(tok, others, chat=chat, threads=threads,
                                                      separator=separator):
                st.add(tokens, docs, nbytes, chat=chat)
    except ValueError as e:
        _fail(str(e).splitlines()[0] if str(e) else type(e).__name__)
    for line in format_stats(st, tok.id_to_bytes(), top):
        click.echo(line)


@asmbpe.command(context_settings=CONTEXT)
@click.option("-t", "--tokenizer", "tokenizer_path", required=True, metavar="FILE",
              help="tokenizer.bin.")
@click.option("--format", "fmt", required=True, type=click.Choice(["tiktoken", "hf"]),
              help="tiktoken: a ranks file for tiktoken (harness.export.load_tiktoken adds "
                   "the pattern and specials); hf: a Hugging Face tokenizer.json.")
@click.option("-o", "--output", required=True, metavar="PATH", help="The file to write.")
def export(tokenizer_path, fmt, output):
    """Export the tokenizer for tiktoken or Hugging Face tokenizers (same ids as asmbpe)."""
    from . import export as exp

    out = _check_output(output)
    tok = _load_tokenizer(tokenizer_path)
    if fmt == "tiktoken":
        exp.export_tiktoken(tok, out)
    else:
        exp.export_hf(tok, out)
    click.echo(f"wrote {fmt} export of {tok!r} to {out}")


# ------------------------------------------------------------------------- datasets

@asmbpe.group(context_settings=CONTEXT)
def data():
    """Get datasets (FineWeb-Edu, SmolTalk) and prepare local files as Parquet shards."""


class _FetchProgress:
    """One progress bar per file on stderr (bytes, MB/s)."""

    def __init__(self, enabled: bool):
        self.enabled = enabled
        self.name = None
        self.bar = None
        self.done = 0

    def __call__(self, name: str, done: int, total) -> None:
        if not self.enabled:
            return
        if name != self.name or done < self.done:
            self.close()
            self.name, self.done = name, done
            self.bar = _BytesProgress(f"fetching {name}", total)
            self.bar.done = done
        self.bar(done)
        self.done = done

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
            self.bar = None
        self.name, self.done = None, 0


@data.command("fetch", context_settings=CONTEXT)
@click.argument("dataset", type=click.Choice(["fineweb-edu", "smoltalk"]), required=False)
@click.option("--shards", default="0", show_default=True, metavar="LIST",
              help="Shard indices: 0, 0-3 or 0,2,5-7.")
@click.option("--config", default=None, metavar="NAME",
              help="fineweb-edu: the folder of the shards (default sample/10BT; e.g. "
                   "data/CC-MAIN-2024-10); smoltalk: the subset (default all).")
@click.option("--of", "of", type=click.IntRange(min=1), default=None,
              help="smoltalk: the number of shards of the subset (default 9, for all).")
@click.option("--repo", default=None, metavar="OWNER/NAME",
              help="With --path: any dataset repository.")
@click.option("--path", "paths", multiple=True, metavar="PATH",
              help="A file path in the repository (repeatable; instead of --shards).")
@click.option("--revision", default="main", show_default=True, help="Branch, tag or commit.")
@click.option("--cache-dir", default=None, metavar="DIR",
              help="Where files go (default $ASMBPE_CACHE, else ~/.cache/asmbpe).")
@click.option("--base-url", default=None, metavar="URL",
              help="The hub (default $ASMBPE_HF_ENDPOINT, else https://huggingface.co).")
@click.option("--retries", type=click.IntRange(min=0), default=5, show_default=True,
              help="Resume this many more times after a dropped connection.")
@click.option("-q", "--quiet", is_flag=True, help="No progress output.")
def data_fetch(dataset, shards, config, of, repo, paths, revision, cache_dir, base_url,
               retries, quiet):
    """Download dataset shards over HTTPS into the cache, resumably (HTTP range
    requests) and checked (size, and sha256 when the server gives it). Prints the local
    path of each file on stdout, e.g. `asmbpe train $(asmbpe data fetch fineweb-edu
    --shards 0-3 -q) -o tokenizer.bin`.

    DATASET: fineweb-edu (HuggingFaceFW/fineweb-edu, Parquet `text`) or smoltalk
    (HuggingFaceTB/smoltalk, Parquet `messages`); or --repo with --path.
    """
    from . import fetch as F

    if paths:
        if repo is None:
            if dataset is None:
                raise InputError("--path needs --repo OWNER/NAME or a DATASET")
            repo = F.DATASETS[dataset].repo
        files = list(paths)
    else:
        if dataset is None:
            raise InputError("give a DATASET (fineweb-edu, smoltalk), or --repo and --path")
        try:
            idx = F.parse_shards(shards)
        except ValueError as e:
            raise InputError(f"--shards: {e}") from None
        repo, files = F.shard_paths(dataset, idx, config, of)
    progress = _FetchProgress(enabled=not quiet)
    t0 = time.perf_counter()
    total = 0
    try:
        for path in files:
            local = F.fetch_file(repo, path, revision=revision, base=base_url,
                                 cache=cache_dir, retries=retries, progress=progress)
            progress.close()
            total += local.stat().st_size
            click.echo(str(local))
    finally:
        progress.close()
    if not quiet:
        took = time.perf_counter() - t0
        click.echo(f"fetched {len(files)} file(s), {_mb(total)} in the cache, "
                   f"{took:.2f} s", err=True)


@data.command("prepare", context_settings=CONTEXT)
@click.argument("inputs", nargs=-1, required=True, metavar="INPUT...",
                type=click.Path(dir_okay=True, path_type=str))
@click.option("-o", "--output", required=True, metavar="DIR",
              help="The directory for shard-00000.parquet, ... (created if missing).")
@click.option("--chat", is_flag=True,
              help="The inputs hold conversations (`messages`); write a `messages` column.")
@click.option("--binary", is_flag=True,
              help="Write `text` as binary (keeps documents that are not valid UTF-8).")
@click.option("--shard-mb", type=click.FloatRange(min=0.001), default=1024, show_default=True,
              help="Start a new shard after about this many MB of text.")
@click.option("--row-group-mb", type=click.FloatRange(min=0.001), default=64,
              show_default=True, help="Text per Parquet row group (the streaming unit).")
@_SEPARATOR
@click.option("-q", "--quiet", is_flag=True, help="No progress output.")
def data_prepare(inputs, output, chat, binary, shard_mb, row_group_mb, separator, quiet):
    """Turn local files (text, JSONL, Parquet; .gz / .zst) into the Parquet layout the
    harness reads: OUTPUT/shard-NNNNN.parquet with a `text` column (or `messages` with
    --chat), zstd, row groups of --row-group-mb. Shards are written under temporary
    names and renamed when complete; after an error none of this run's is left."""
    from .prepare import prepare

    files = [check_file(p) for p in inputs]
    out = Path(output)
    if out.exists() and not out.is_dir():
        raise InputError(f"{out}: exists and is not a directory")
    progress = _BytesProgress("preparing", None if chat else _estimate(files),
                              enabled=not quiet)
    t0 = time.perf_counter()
    try:
        s = prepare(files, out, chat=chat, binary=binary, separator=separator,
                    shard_bytes=int(shard_mb * 1e6), row_group_bytes=int(row_group_mb * 1e6),
                    progress=progress)
    finally:
        progress.close()
    took = time.perf_counter() - t0
    what = "conversations" if chat else "documents"
    click.echo(f"prepared {s.documents:,} {what}, {_mb(s.source_bytes)} in {took:.2f} s "
               f"-> {len(s.shards)} shard(s) in {out}")


def _estimate(files):
    from .corpora import estimate_bytes

    return estimate_bytes(files)


# --------------------------------------------------------------------------- profile

@asmbpe.group(context_settings=CONTEXT)
def profile():
    """Where the time goes: the library's cycle counters per phase and per thread
    (harness.dev.profile), optionally under perf stat or callgrind."""


def _profile_options(fn):
    opts = [
        click.argument("inputs", nargs=-1, metavar="[INPUT...]",
                       type=click.Path(dir_okay=True, path_type=str)),
        click.option("--corpus", default=None, metavar="NAME",
                     type=click.Choice(["english", "multilingual", "code"]),
                     help="A shared corpus instead of INPUT files (default without either: "
                          "the bundled datasets/kjv.txt, split at blank lines)."),
        click.option("--limit-mb", type=click.FloatRange(min=0), default=16, show_default=True,
                     help="Read about this many MB of whole documents (0 = all)."),
        _SEPARATOR,
        click.option("--perf", is_flag=True,
                     help="Also run the work under `perf stat` (cycles, instructions, IPC, "
                          "branch and cache misses, where the machine has the counters)."),
        click.option("--callgrind", is_flag=True,
                     help="Also run a small input (256 KB, 1 thread) under valgrind's callgrind "
                          "and list instructions per assembly routine."),
    ]
    for opt in reversed(opts):
        fn = opt(fn)
    return fn


def _profile_run(kind, inputs, corpus, limit_mb, separator, **kw):
    from .dev.profile import load_docs, run_profile

    docs, what = load_docs(inputs, corpus, limit_mb, separator)
    try:
        run_profile(kind, docs, what, out=click.echo, **kw)
    except (RuntimeError, ValueError) as e:
        _fail(str(e).splitlines()[0] if str(e) else type(e).__name__)


@profile.command("train", context_settings=CONTEXT)
@_profile_options
@click.option("--vocab-size", type=int, default=8192, show_default=True,
              help="256 + merges + 16.")
@click.option("--threads", type=int, default=None, help="As for `asmbpe train`.")
@click.option("--plot", metavar="PATH.png", default=None,
              help="Draw the per-merge curves (time, positions replaced, winning count; log "
                   "scales) to PATH.png (needs matplotlib: pip install 'asmbpe[plot]').")
def profile_train(inputs, corpus, limit_mb, separator, perf, callgrind, vocab_size, threads,
                  plot):
    """Train once with the library's counters on: count, layout, pairs, merge loop (scan,
    apply, heap, compact), per-merge records."""
    _check_threads(threads)
    if plot:
        _check_output(plot)
    _profile_run("train", inputs, corpus, limit_mb, separator, perf=perf,
                 callgrind=callgrind, vocab_size=vocab_size, threads=threads, plot=plot)


@profile.command("encode", context_settings=CONTEXT)
@_profile_options
@click.option("-t", "--tokenizer", "tokenizer_path", default=None, metavar="FILE",
              help="tokenizer.bin (default: train one on the same documents).")
@click.option("--vocab-size", type=int, default=8192, show_default=True,
              help="Vocabulary of the tokenizer trained when -t is not given.")
@click.option("--threads", type=int, default=None, help="Encoding threads (default: all CPUs).")
@click.option("--warm", is_flag=True,
              help="Encode the documents once untimed first, and profile the second call: "
                   "the caches hold the text and no memory is touched for the first time.")
def profile_encode(inputs, corpus, limit_mb, separator, perf, callgrind, tokenizer_path,
                   vocab_size, threads, warm):
    """Encode once (cold caches; --warm: a second call) with the encoder's counters on:
    pre-tokenize, cache, merge, write, per thread, and the load balance."""
    _check_threads(threads)
    tok = _load_tokenizer(tokenizer_path) if tokenizer_path else None
    _profile_run("encode", inputs, corpus, limit_mb, separator, perf=perf,
                 callgrind=callgrind, vocab_size=vocab_size, threads=threads, tokenizer=tok,
                 warm=warm)


@profile.command("pretok", context_settings=CONTEXT)
@_profile_options
def profile_pretok(inputs, corpus, limit_mb, separator, perf, callgrind):
    """The pre-tokenizer (asmbpe_split_offsets) over every document, one thread."""
    _profile_run("pretok", inputs, corpus, limit_mb, separator, perf=perf,
                 callgrind=callgrind)


def main(argv=None):
    """Console entry point (`asmbpe`)."""
    return asmbpe.main(args=argv, prog_name="asmbpe")


if __name__ == "__main__":
    main()
