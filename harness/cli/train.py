"""`asmbpe train`: learn merges from input files, write tokenizer.bin."""
from __future__ import annotations

import contextlib

import click

from ..corpora import InputError
from ..errors import OutOfMemory
from .common import (CONTEXT, _CLUSTER, _MEMORY, STDOUT, _check_output, _check_threads,
                     _fail, _mb, _memory, _open_cluster, _output_file, _pretokenizer_option,
                     _readers)
from .common import _input_notes, _inputs, _read_option_flags, _read_options
from .progress import TrainProgress


@click.command(context_settings=CONTEXT)
@click.argument("inputs", nargs=-1, required=True, metavar="INPUT...",
                type=click.Path(dir_okay=True, path_type=str))
@click.option("-o", "--output", required=True, metavar="FILE",
              help="Where to write tokenizer.bin (written under a temporary name, then "
                   "renamed); `-` writes it to stdout (the summary then goes to stderr).")
@click.option("--vocab-size", type=int, default=32768, show_default=True,
              help="256 bytes + merges + 16 specials (272..1048576; above 65535 the "
                   "ids are u32 and tokenizer.bin is version 2).")
@click.option("--threads", type=int, default=None,
              help="Threads for counting and merging (default: all cores).")
@click.option("--max-word-bytes", type=int, default=256, show_default=True,
              help="Leave out chunks longer than this (0 = no limit).")
@click.option("--min-count", type=int, default=1, show_default=True,
              help="Stop when no pair occurs at least this often.")
@click.option("--separator", default=None, metavar="LINE",
              help="Plain text files: documents are separated by lines equal to LINE "
                   "('' = a blank line); default: one document per file.")
@_read_option_flags
@click.option("--naive", is_flag=True,
              help="The library's naive twin: recount every pair for every merge (slow).")
@click.option("--verify", is_flag=True,
              help="Recount all pairs at the end and check the kept table and the "
                   "winning counts.")
@_pretokenizer_option("How to cut documents into words (the tokenizer keeps it)")
@_MEMORY
@_CLUSTER
@click.option("-q", "--quiet", is_flag=True, help="No progress output.")
def train(inputs, output, vocab_size, threads, max_word_bytes, min_count, separator, column,
          field, per_line, naive, verify, pretokenizer, memory, cluster, quiet):
    """Learn byte-level BPE merges from INPUT files and write tokenizer.bin.

    INPUT: Parquet (`text` column, or --column), JSONL (`text` field, or --field) or
    plain text (one document per file, or --separator, or --lines), JSONL and text
    optionally .gz / .zst; `-` is standard input (its format told by its first bytes).
    Progress goes to stderr, the summary to stdout.
    """
    from ..train import TrainError
    from ..train import train as run_train

    from ..corpora import arrow_memory_kept, budget_batch_bytes, check_streamable
    from ..train import BATCH_BYTES, check_min_count

    _check_threads(threads)                     # (checked before any reading)
    try:
        check_min_count(min_count)
    except ValueError as e:
        raise InputError(str(e)) from None
    to_stdout = output == STDOUT                # -o -: tokenizer.bin on stdout
    out = "stdout" if to_stdout else _check_output(output, inputs)
    read = _read_options(separator, column, field, per_line)
    files = _inputs(inputs, "--cluster" if cluster else None)
    budget = _memory(memory)
    batch_bytes = BATCH_BYTES
    if budget is not None:
        batch_bytes = budget_batch_bytes(budget, "train", files)
        if not per_line:
            check_streamable(files, batch_bytes, separator)
    progress = TrainProgress(enabled=not quiet)
    close = None
    try:
        if cluster:
            from ..distributed import train_distributed

            client, close = _open_cluster(cluster)
            result = train_distributed(files, vocab_size, client, threads=threads,
                                       naive=naive, max_word_bytes=max_word_bytes,
                                       min_count=min_count, verify=verify,
                                       read_options=read, batch_bytes=batch_bytes,
                                       progress=progress, pretokenizer=pretokenizer)
        else:
            with (arrow_memory_kept(_readers(threads)) if budget is None
                  else contextlib.nullcontext()), _input_notes(progress.close):
                result = run_train(files, vocab_size=vocab_size, threads=threads,
                                   naive=naive, max_word_bytes=max_word_bytes,
                                   min_count=min_count, verify=verify, progress=progress,
                                   read_options=read, batch_bytes=batch_bytes,
                                   pretokenizer=pretokenizer)
    except OutOfMemory:
        raise                                   # the group's line, with its advice
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
        last = f", last winning count {result.last_count}" if m else ""
        click.echo(f"merged {m} merges in {loop:.2f} s ({rate}){last}", err=True)
    with _output_file(output) as path:
        result.tokenizer.save(path)
    if m == 0:
        click.echo(f"asmbpe: warning: no pair to merge (every chunk is a single byte, or "
                   f"longer than --max-word-bytes): wrote a tokenizer with 0 merges "
                   f"(vocab_size 272) to {out}", err=True)
    elif result.stopped_early:
        v = result.tokenizer.vocab_size
        click.echo(f"asmbpe: note: stopped early after {m} of {result.merges_asked} merges "
                   f"(no pair left with count >= {max(min_count, 1)}); vocab_size is "
                   f"{v}, not {vocab_size}: the specials are ids {v - 16}..{v - 1} "
                   f"(<|bos|> {v - 16})", err=True)
    total = sec["total"]
    click.echo(f"trained {_mb(s['bytes_in'])}, {s['documents']} docs, "
               f"{s['unique_words']} unique words, {m} merges learned, {total:.2f} s, "
               f"{s['bytes_in'] / 1e6 / total:.1f} MB/s -> {out} "
               f"(vocab_size {result.tokenizer.vocab_size}, pre-tokenizer "
               f"{result.tokenizer.pretokenizer})", err=to_stdout)
    click.echo(f"phases: read {sec['read']:.2f} s, count {sec['count']:.2f} s, layout "
               f"{sec['layout']:.2f} s, pairs {sec['pairs']:.2f} s, merge loop "
               f"{sec['merge_loop']:.2f} s (scan {sec['scan']:.2f}, apply {sec['apply']:.2f}, "
               f"heap {sec['heap']:.2f}, compact {sec['compact']:.2f}), verify "
               f"{sec['verify']:.2f} s; {s['threads']} thread(s), peak memory "
               f"{s['peak_memory_bytes'] / 1e6:.0f} MB"
               + (", verified" if verify else "") + (", naive" if naive else "")
               + (f"; counted {s['shards']} shard(s) on {s['workers']} worker(s), "
                  f"tree depth {s['tree_depth']}" if cluster else ""), err=to_stdout)
