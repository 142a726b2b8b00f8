"""`asmbpe check`, `asmbpe bench ...` and `asmbpe profile ...`: the developer tools
(harness.dev), each imported inside its command, so that the other commands never
load them."""
from __future__ import annotations

import os
import sys
from pathlib import Path

import click

from ..corpora import InputError, available, corpora_dir
from .common import (CONTEXT, _SEPARATOR, _check_output, _check_threads, _fail,
                     _load_tokenizer, _pretokenizer_option)


def _bench_corpus(what: str, limit_mb: float):
    """--corpus NAME (a shared corpus, default english) and --limit-mb N of the benches
    that run on one corpus."""
    def add(fn):
        fn = click.option("--limit-mb", type=click.FloatRange(min=0), default=limit_mb,
                          show_default=True,
                          help="Read about this many MB of whole documents (0 = all).")(fn)
        return click.option("--corpus", default="english", show_default=True,
                            type=click.Choice(["english", "multilingual", "code"]),
                            help=f"The shared corpus to {what}.")(fn)
    return add


_BENCH_INPUT = click.option(
    "--input", "input_path", default=None, metavar="FILE",
    type=click.Path(dir_okay=False, path_type=str),
    help="Benchmark on FILE instead of a shared corpus: any input `asmbpe train` reads "
         "(Parquet, JSONL, plain text with --separator; .gz / .zst), --limit-mb of it.")


@click.command(context_settings=CONTEXT)
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
    from .._lib import checkasm_lib
    from ..dev.checkasm import run_checks

    checkasm_lib()      # the test library of a source checkout (not in a wheel): say so once
    extra = {k: v for k, v in dict(save=save, baseline=baseline, bench_only=bench_only,
                                   samples=samples).items() if v}
    if baseline or save:
        from ..dev.checkasm_bench import BaselineError, load_baseline

        try:
            if baseline:
                load_baseline(baseline)
            if save and Path(save).is_dir():
                raise BaselineError(f"{save}: is a directory")
        except BaselineError as e:
            _fail(str(e))
    if not run_checks(seed=seed, pattern=pattern, bench=bench, **extra):
        sys.exit(1)


@click.group(context_settings=CONTEXT)
def bench():
    """Benchmarks (text in memory, median of several runs)."""


@bench.command(context_settings=CONTEXT)
@click.option("--corpus", "corpora", multiple=True, metavar="NAME",
              type=click.Choice(["english", "multilingual", "code", "web-english"]),
              help="english, multilingual, code or web-english (english with typographic "
                   "quotes and dashes; repeatable; default: the shared ones available).")
@click.option("--limit-mb", type=click.FloatRange(min=0), default=32, show_default=True,
              help="Read about this many MB of whole documents per corpus (0 = all).")
@click.option("--twin-mb", type=click.FloatRange(min=0), default=1, show_default=True,
              help="MB given to the (slow) Python twin.")
@click.option("--runs", type=click.IntRange(min=1), default=5, show_default=True,
              help="Timed runs; the median is reported.")
@click.option("--json", "json_path", type=click.Path(dir_okay=False), default=None,
              metavar="PATH", help="Also write the rows as JSON to PATH.")
@_pretokenizer_option("The pre-tokenizer to time")
@_BENCH_INPUT
@_SEPARATOR
def pretok(corpora, limit_mb, twin_mb, runs, json_path, pretokenizer, input_path, separator):
    """Pre-tokenizer speed: asm vs the oracle regex vs the Python twin."""
    from ..dev.bench import bench_pretok, write_json

    if input_path is not None and corpora:
        raise InputError("give --corpus or --input, not both")
    names = list(corpora)
    if input_path is None:
        if not corpora_dir().is_dir():
            raise InputError(f"corpora directory not found: {corpora_dir()} "
                             "(put shared/ next to the repository or set ASMBPE_CORPORA, "
                             "or give --input FILE)")
        names = names or available()
        if not names:
            raise InputError(f"no corpus (english|multilingual|code).parquet in {corpora_dir()}")
    rows = bench_pretok(names, limit_mb, twin_mb, runs=runs, out=click.echo,
                        pretokenizer=pretokenizer, input_path=input_path,
                        separator=separator)
    if json_path:
        write_json(rows, json_path)
        click.echo(f"wrote {len(rows)} rows to {json_path}")


@bench.command("train", context_settings=CONTEXT)
@_bench_corpus("train on", 100)
@click.option("--vocab-size", type=int, default=32768, show_default=True,
              help="256 + merges + 16 (peers without specials get vocab_size - 16).")
@click.option("--runs", type=click.IntRange(min=1), default=3, show_default=True,
              help="Runs per implementation (each a fresh process); the median is shown.")
@click.option("--threads", type=int, default=None,
              help="Threads for every implementation (default: all cores).")
@click.option("--impl", "impls", multiple=True, metavar="NAME",
              type=click.Choice(["asmbpe", "asmbpe-command", "rustbpe", "tokenizers",
                                 "gigatoken", "gigabpe"]),
              help="Run only these (repeatable; default: every one installed). "
                   "asmbpe-command: the whole `asmbpe train` command on the documents "
                   "written as a Parquet file.")
@click.option("--json", "json_path", type=click.Path(dir_okay=False), default=None,
              metavar="PATH", help="Also write the rows as JSON to PATH.")
@_pretokenizer_option("The pre-tokenizer of every implementation (its pattern string for "
                      "the peers)")
@_BENCH_INPUT
@_SEPARATOR
def train_bench(corpus, limit_mb, vocab_size, runs, threads, impls, json_path, pretokenizer,
                input_path, separator):
    """Training speed: asmbpe (the call and the whole command) vs rustbpe, Hugging Face
    tokenizers, gigatoken and gigabpe on the same documents: the train call's wall
    median, CPU and peak RSS, the whole process's wall and peak RSS, merges equal to
    asmbpe's."""
    from ..dev.bench_train import IMPLS, bench_train, write_rows

    _check_threads(threads)
    if threads is None:
        threads = os.cpu_count() or 1
    rows = bench_train(corpus, limit_mb, vocab_size, runs, threads,
                       impls=list(impls) or list(IMPLS), out=click.echo,
                       pretokenizer=pretokenizer, input_path=input_path,
                       separator=separator)
    if json_path:
        write_rows(rows, json_path)
        click.echo(f"wrote {len(rows)} rows to {json_path}")


@bench.command("scaling", context_settings=CONTEXT)
@_bench_corpus("train and encode", 100)
@click.option("--vocab-size", type=int, default=32768, show_default=True,
              help="256 + merges + 16.")
@click.option("--threads", "threads_list", default="1,2,4,8,16", show_default=True,
              metavar="N,N,...", help="The thread counts, the first the baseline.")
@click.option("--runs", type=click.IntRange(min=1), default=3, show_default=True,
              help="Runs per thread count; the median is shown.")
@click.option("--no-encode", is_flag=True, help="Train only.")
@click.option("--json", "json_path", type=click.Path(dir_okay=False), default=None,
              metavar="PATH", help="Also write the rows as JSON to PATH.")
@_BENCH_INPUT
@_SEPARATOR
def scaling_bench(corpus, limit_mb, vocab_size, threads_list, runs, no_encode, json_path,
                  input_path, separator):
    """Thread scaling: harness.train (count, merge loop, the whole call) and encoding
    with what it learned, at each thread count, in one process; speed-ups against the
    first count, merges and ids checked equal across counts."""
    from ..dev.bench import bench_documents, write_json
    from ..dev.scaling import scaling
    from ..train import MAX_TRAIN_VOCAB, MIN_VOCAB

    try:
        counts = [int(x) for x in threads_list.split(",") if x.strip()]
    except ValueError:
        raise InputError(f"--threads must be numbers separated by commas, got "
                         f"{threads_list!r}") from None
    if not counts:
        raise InputError("--threads names no thread count")
    for t in counts:
        _check_threads(t)
    if not MIN_VOCAB < vocab_size <= MAX_TRAIN_VOCAB:
        raise InputError(f"--vocab-size must be between {MIN_VOCAB + 1} and "
                         f"{MAX_TRAIN_VOCAB}, got {vocab_size}")
    if json_path:
        _check_output(json_path)
    docs, label = bench_documents(corpus, limit_mb, input_path, separator)
    click.echo(f"documents: {label}")
    rows = scaling(docs, vocab_size, counts, runs, encode=not no_encode, out=click.echo)
    if json_path:
        write_json(rows, json_path)
        click.echo(f"wrote {len(rows)} rows to {json_path}")
    if not all(r["merges_equal"] and r["ids_equal"] is not False for r in rows):
        _fail("the thread counts disagree (merges or ids): see the table")


@bench.command("ladder", context_settings=CONTEXT)
@_bench_corpus("train on", 1)
@click.option("--vocab-size", type=int, default=512, show_default=True,
              help="256 + merges + 16.")
@click.option("--budget-s", type=click.FloatRange(min=0, min_open=True), default=20,
              show_default=True,
              help="Seconds per Python rung; a rung still running then stops and its "
                   "time is extrapolated from the merges it made (and marked so).")
@click.option("--json", "json_path", type=click.Path(dir_okay=False), default=None,
              metavar="PATH", help="Also write the rows as JSON to PATH.")
@click.option("--plot", metavar="PATH.png", default=None,
              help="Draw the times as bars (log scale) to PATH.png (needs matplotlib: "
                   "pip install 'asmbpe[plot]').")
@_pretokenizer_option("The pre-tokenizer of every rung")
@_BENCH_INPUT
@_SEPARATOR
def ladder_bench(corpus, limit_mb, vocab_size, budget_s, json_path, plot, pretokenizer,
                 input_path, separator):
    """The optimization ladder: the same training through each rung, from the naive
    Python loop (recount every pair per merge) through incremental counts, a pair
    index, deduplicated words and a lazy heap to the assembly trainer on 1 and on all
    threads; time, speed-ups, and whether every rung learns asmbpe's merges."""
    from ..dev.ladder import check_plot, ladder, plot_ladder, write_rows

    for path in (json_path, plot):
        if path:
            _check_output(path)
    if plot:
        check_plot()
    rows = ladder(corpus, limit_mb, vocab_size, budget_s, pretokenizer, input_path,
                  separator, out=click.echo)
    if json_path:
        write_rows(rows, json_path)
        click.echo(f"wrote {len(rows)} rows to {json_path}")
    if plot:
        r = rows[0]
        plot_ladder(rows, plot, title=f"the optimization ladder: {r['corpus']}, "
                    f"{r['bytes'] / 1e6:.2f} MB, vocab {r['vocab_size']}, {r['pretokenizer']}")
        click.echo(f"plot: wrote {plot}")


@bench.command("encode", context_settings=CONTEXT)
@_bench_corpus("encode", 100)
@click.option("--vocab-size", type=int, default=32768, show_default=True,
              help="Vocabulary trained by asmbpe on the same documents (unless --tokenizer).")
@click.option("--runs", type=click.IntRange(min=1), default=3, show_default=True,
              help="Timed runs per implementation and thread count; the median is shown.")
@click.option("--threads", type=int, default=None,
              help="The multi-threaded setting (default: all cores); 1 thread is always run.")
@click.option("--impl", "impls", multiple=True, metavar="NAME",
              type=click.Choice(["asmbpe", "tiktoken", "tokenizers", "gigatoken", "bpe-openai"]),
              help="Run only these (repeatable; default: every one installed; bpe-openai "
                   "only with --vocab).")
@click.option("--tokenizer", "tokenizer_path", type=click.Path(dir_okay=False), default=None,
              metavar="FILE", help="Use this tokenizer.bin instead of training one.")
@click.option("--vocab", default=None, metavar="NAME",
              help="Instead: a published vocabulary, cl100k_base or o200k_base (from "
                   "shared/vocabs, or a path to its .tiktoken[.gz]): asmbpe's rank encoder "
                   "against tiktoken, gigatoken and bpe-openai, ids compared with tiktoken's.")
@click.option("--json", "json_path", type=click.Path(dir_okay=False), default=None,
              metavar="PATH", help="Also write the rows as JSON to PATH.")
@click.option("--cluster", default=None, metavar="ADDRESS",
              help="Instead: the distributed encode (local:N or a scheduler address) "
                   "against one process on the same shards (overhead in %).")
@click.option("--shards", "n_shards", type=click.IntRange(min=1), default=8,
              show_default=True, help="With --cluster: input shards.")
@_pretokenizer_option("The pre-tokenizer of the vocabulary trained here (not with "
                      "--tokenizer, which has its own)")
@_BENCH_INPUT
@_SEPARATOR
def encode_bench(corpus, limit_mb, vocab_size, runs, threads, impls, tokenizer_path,
                 vocab, json_path, cluster, n_shards, pretokenizer, input_path, separator):
    """Encoding speed: asmbpe vs tiktoken, Hugging Face tokenizers, gigatoken (and
    bpe-openai with --vocab) on the same documents and vocabulary, at 1 thread and at all
    threads (load time, MB/s, ids equal to asmbpe's). With --cluster: the distributed path against one process."""
    from ..dev.bench_encode import IMPLS, bench_encode, write_rows

    _check_threads(threads)
    tok = _load_tokenizer(tokenizer_path) if tokenizer_path else None
    if cluster:
        if input_path is not None:
            raise InputError("--cluster benchmarks the shared corpora only (not --input)")
        import json

        from ..dev.bench_cluster import bench_cluster

        row = bench_cluster(corpus, limit_mb, vocab_size, runs, cluster, tok,
                            shards=n_shards, out=click.echo)
        if json_path:
            Path(json_path).write_text(json.dumps(row, indent=1) + "\n")
            click.echo(f"wrote 1 row to {json_path}")
        return
    rows = bench_encode(corpus, limit_mb, vocab_size, runs, threads or os.cpu_count() or 1,
                        impls=list(impls) or list(IMPLS), tokenizer=tok, out=click.echo,
                        pretokenizer=pretokenizer, vocab=vocab, input_path=input_path,
                        separator=separator)
    if json_path:
        write_rows(rows, json_path)
        click.echo(f"wrote {len(rows)} rows to {json_path}")


@click.group(context_settings=CONTEXT)
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
    from ..dev.profile import load_docs, run_profile

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
@_pretokenizer_option("How to cut documents into words")
def profile_train(inputs, corpus, limit_mb, separator, perf, callgrind, vocab_size, threads,
                  plot, pretokenizer):
    """Train once with the library's counters on: count, layout, pairs, merge loop (scan,
    apply, heap, compact), per-merge records."""
    _check_threads(threads)
    if plot:
        _check_output(plot)
    _profile_run("train", inputs, corpus, limit_mb, separator, perf=perf,
                 callgrind=callgrind, vocab_size=vocab_size, threads=threads, plot=plot,
                 pretokenizer=pretokenizer)


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
@_pretokenizer_option("The pre-tokenizer to profile")
def profile_pretok(inputs, corpus, limit_mb, separator, perf, callgrind, pretokenizer):
    """The pre-tokenizer (asmbpe_split_offsets) over every document, one thread."""
    _profile_run("pretok", inputs, corpus, limit_mb, separator, perf=perf,
                 callgrind=callgrind, pretokenizer=pretokenizer)
