"""`asmbpe split`, `encode`, `decode`, `show`, `stats` and `export`: text to tokens and
back, and the tokenizer for other libraries."""
from __future__ import annotations

import contextlib
import os
import sys
import time
from pathlib import Path

import click

from ..corpora import InputError, check_file
from .common import (CONTEXT, _CLUSTER, _MEMORY, _SEPARATOR, _check_output, _check_threads,
                     STDOUT, _fail, _load_tokenizer, _mb, _memory, _open_cluster, _pretokenizer_option,
                     _quiet_broken_pipe, _readers, _tokenizer_options, _write_stdout,
                     _write_stdout_bytes, _output_file)
from .common import _input_notes, _inputs, _read_option_flags, _read_options
from .progress import BytesProgress


@click.command(context_settings=CONTEXT)
@click.argument("file", type=click.Path(dir_okay=True, path_type=str))
@_pretokenizer_option("How to cut the text")
@click.option("--format", "fmt", type=click.Choice(["bar", "jsonl", "offsets"]),
              default="bar", show_default=True,
              help="bar: the chunks' raw bytes joined by | (a | in the text is ambiguous); "
                   "jsonl: one JSON object per chunk, {\"start\", \"end\", \"text\"} "
                   "(byte offsets, end exclusive; \"hex\" too when the chunk is not "
                   "valid UTF-8 on its own); offsets: `START<TAB>END` per chunk.")
@click.option("-q", "--quiet", is_flag=True, help="Accepted for symmetry: split prints its "
              "result only.")
def split(file, pretokenizer, fmt, quiet):
    """Print the pre-tokenizer chunks of FILE (raw bytes; `-`: standard input) joined
    by | (or, with --format, as JSON lines or byte offsets)."""
    from ..corpora import STDIN
    from ..pretok import split as asm_split
    from ..pretok import split_offsets

    try:
        if file == STDIN:
            data = sys.stdin.buffer.read()
        else:
            data = check_file(file).read_bytes()
    except OSError as e:
        raise InputError(f"{file}: cannot read: {e.strerror or e}") from None
    if not data:
        raise InputError(f"{file}: is empty")
    if fmt == "bar":
        _write_stdout_bytes([b"|".join(asm_split(data, pretokenizer)) + b"\n"])
    else:
        ends = split_offsets(data, pretokenizer).tolist()
        _write_stdout(_split_lines(data, ends, fmt))


def _split_lines(data: bytes, ends: list[int], fmt: str):
    """`asmbpe split --format jsonl|offsets`: one line per chunk."""
    import json

    start = 0
    for end in ends:
        if fmt == "offsets":
            yield f"{start}\t{end}\n"
        else:
            raw = data[start:end]
            rec = {"start": start, "end": end, "text": raw.decode("utf-8", "replace")}
            try:
                raw.decode("utf-8")
            except UnicodeDecodeError:
                rec["hex"] = raw.hex()
            yield json.dumps(rec, ensure_ascii=False) + "\n"
        start = end


@click.command(context_settings=CONTEXT)
@click.argument("inputs", nargs=-1, required=True, metavar="INPUT...",
                type=click.Path(dir_okay=True, path_type=str))
@_tokenizer_options
@click.option("-o", "--output", required=True, metavar="FILE",
              help="The .tok file to write (written under a temporary name, then renamed); "
                   "`-` writes it to stdout once complete (made in $TMPDIR first; the "
                   "summary then goes to stderr); with --cluster or --shards, a directory.")
@click.option("--chat", is_flag=True,
              help="The inputs hold conversations (`messages`: role/content, JSONL or "
                   "Parquet); MASKBIT marks assistant content and its <|end|>.")
@click.option("--threads", type=int, default=None,
              help="Encoding threads (default: the library chooses).")
@click.option("--doc-token", default="default", metavar="NAME",
              help="A special token put at each document's start or end (e.g. "
                   "'<|endoftext|>'), or 'none'. Default: <|bos|> at the start for "
                   "asmbpe's own tokenizers, none for loaded vocabularies (their .tok "
                   "file finds documents through its index).")
@click.option("--doc-token-at", type=click.Choice(["start", "end"]), default="start",
              show_default=True, help="Where --doc-token goes.")
@_SEPARATOR
@_read_option_flags
@_MEMORY
@_CLUSTER
@click.option("--shards", "sharded", is_flag=True,
              help="Write the layout of --cluster on this machine: OUTPUT is a directory "
                   "with one .tok per input file and manifest.json.")
@click.option("-q", "--quiet", is_flag=True, help="No progress output.")
def encode(inputs, tokenizer_path, vocab_pretokenizer, output, chat, threads, doc_token,
           doc_token_at, separator, column, field, per_line, memory, cluster, sharded,
           quiet):
    """Encode INPUT files into a .tok file (SPEC §7): each document as <|bos|> + its
    text, or with --chat each conversation as <|bos|>, then <|role|> content <|end|>
    per message.

    INPUT: Parquet (`text`, or `messages` with --chat; --column), JSONL (`text` /
    `messages`; --field) or, without --chat, plain text (one document per file, or
    --separator, or --lines); JSONL and text optionally .gz / .zst; `-` is standard
    input (its format told by its first bytes). Progress goes to stderr, the summary
    to stdout. On any error nothing is left at the output path.

    With --cluster ADDRESS (or --shards, on this machine) OUTPUT is a directory: each
    INPUT becomes OUTPUT/NNNNN-NAME.tok, listed with its counts in
    OUTPUT/manifest.json; the shards' tokens, concatenated in manifest order, are
    those of the single .tok file, and the files are the same bytes for any number of
    workers. After an error no shard of the run and no manifest is left.

    -t also takes a tiktoken ranks file or a tokenizer.json (a loaded vocabulary): its
    ids may be u32, and the .tok file is version 2, whose document index finds each
    document (no <|bos|> needed); --doc-token NAME inserts one of its specials.
    """
    from ..corpora import (arrow_memory_kept, budget_batch_bytes, check_streamable,
                          estimate_bytes)
    from ..pipeline import BLOCK_BYTES, PREFETCH_BLOCKS, encode_to_tok

    from ..pipeline import doc_token_of

    _check_threads(threads)
    tok = _load_tokenizer(tokenizer_path, vocab_pretokenizer)
    if chat and doc_token != "default":
        raise InputError("--doc-token applies to plain documents, not --chat")
    try:
        doc_token_of(tok, doc_token, doc_token_at)
    except ValueError as e:
        raise InputError(str(e)) from None
    read = _read_options(separator, column, field, per_line)
    files = _inputs(inputs, "--cluster" if cluster else "--shards" if sharded else None)
    budget = _memory(memory)
    batch_bytes = BLOCK_BYTES
    if budget is not None:
        # (a loaded vocabulary's rank encoder works in 4-byte ids)
        batch_bytes = budget_batch_bytes(budget, "encode", files,
                                         id_bytes=4 if tok.is_loaded else 2)
        if not chat and not per_line:
            check_streamable(files, batch_bytes, separator)
    to_stdout = output == STDOUT                # -o -: the .tok file on stdout
    if (cluster or sharded) and to_stdout:
        raise InputError("-o -: with --cluster or --shards the output is a directory")
    if cluster or sharded:
        from ..distributed import writes_name

        _check_output(output, [*inputs, tokenizer_path], directory=True, writes=writes_name)
        return _encode_sharded(tok, files, output, chat, threads, read, batch_bytes,
                               cluster, quiet, doc_token, doc_token_at)
    out = "stdout" if to_stdout else _check_output(output, [*inputs, tokenizer_path])
    # chat: the files hold JSON around the contents, so their size is no estimate
    progress = BytesProgress("encoding", None if chat else estimate_bytes(files),
                              enabled=not quiet)
    t0 = time.perf_counter()
    try:
        with (arrow_memory_kept(_readers(threads)) if budget is None
              else contextlib.nullcontext()), _input_notes(progress.close), \
                _output_file(output) as path:
            s = encode_to_tok(tok, files, path, chat=chat, threads=threads,
                              read_options=read, progress=progress,
                              batch_bytes=batch_bytes,
                              prefetch_depth=PREFETCH_BLOCKS if budget is None else 1,
                              doc_token=doc_token, doc_token_at=doc_token_at)
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
               f"{took:.2f} s, {rate:.1f} MB/s -> {out}", err=to_stdout)


def _encode_sharded(tok, files, output, chat, threads, read, batch_bytes, cluster,
                    quiet, doc_token="default", doc_token_at="start"):
    from ..corpora import estimate_bytes
    from ..distributed import encode_sharded

    out = Path(output)                      # checked by _check_output(directory=True)
    parent = out.parent if str(out.parent) else Path(".")
    if not parent.is_dir():
        raise InputError(f"{out}: directory {parent} does not exist")
    progress = BytesProgress("encoding", None if chat else estimate_bytes(files),
                              enabled=not quiet)
    close = None
    t0 = time.perf_counter()
    try:
        client = None
        if cluster:
            client, close = _open_cluster(cluster)
        with _input_notes(progress.close):     # (the notes of this machine's reading)
            s = encode_sharded(tok, files, out, client=client, chat=chat, threads=threads,
                               read_options=read, batch_bytes=batch_bytes,
                               progress=progress, doc_token=doc_token,
                               doc_token_at=doc_token_at)
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


@click.command(context_settings=CONTEXT)
@click.argument("file", metavar="FILE.tok", type=click.Path(dir_okay=True, path_type=str))
@click.option("-q", "--quiet", is_flag=True, help="No summary on stderr.")
@_tokenizer_options
def decode(file, tokenizer_path, vocab_pretokenizer, quiet):
    """Write the text of FILE.tok to stdout: every token's bytes (specials as their
    names, e.g. <|bos|>; MASKBIT stripped), decoded as UTF-8 with invalid bytes
    replaced by U+FFFD. A summary goes to stderr."""
    from ..pipeline import decode_text
    from ..tokfile import read_tok

    tok = _load_tokenizer(tokenizer_path, vocab_pretokenizer)
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


@click.command(context_settings=CONTEXT)
@click.argument("text_or_file", metavar="TEXT_OR_FILE")
@_tokenizer_options
@click.option("--color/--no-color", default=None,
              help="Colours on or off (default: on when stdout is a terminal).")
@click.option("--limit", type=click.IntRange(min=0), default=0, show_default=True,
              help="Show at most this many tokens (0 = all).")
@click.option("-q", "--quiet", is_flag=True,
              help="No summary and no tokenizer description on stderr.")
def show(text_or_file, tokenizer_path, vocab_pretokenizer, color, limit, quiet):
    """Show how TEXT_OR_FILE splits into tokens. An existing file is shown whole: a
    .tok file as its tokens (MASKBIT tokens of chat files bold and underlined), any
    other file as its raw bytes encoded; anything else is taken as the text itself.

    With colour (a terminal, or --color): the text with each token on its own
    background colour, specials white on grey. Without (a pipe, or --no-color): one
    token per line, `ID<TAB>TEXT`, TEXT a Python literal, `*` after the ID for MASKBIT.
    The tokenizer's pre-tokenizer is named on stderr; for a loaded vocabulary also its
    name, size, specials and id width.
    """
    from ..show import render_color, render_plain, summary
    from ..tokfile import is_tok_file, read_tok

    tok = _load_tokenizer(tokenizer_path, vocab_pretokenizer)
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
    specials = set(tok.specials.values())
    if color is None:
        color = sys.stdout.isatty()
    try:
        if color:
            _write_stdout([render_color(ids, table, chat, specials), "\n"])
            if not quiet:
                click.echo(summary(ids, table, chat, specials), err=True)
        else:
            _write_stdout([line + "\n" for line in render_plain(ids, table, chat)])
    except ValueError as e:                     # an id that is not a token (a bad .tok)
        _fail(f"{text_or_file}: {e}")
    if quiet:
        return
    if tok.is_loaded:
        for line in tok.describe():
            click.echo(line, err=True)
    else:
        click.echo(f"pre-tokenizer: {_pretokenizer_of(tok)}", err=True)


def _pretokenizer_of(tok) -> str:
    """`nanochat (id 2)`: the tokenizer's pre-tokenizer."""
    from ..pretokenizers import resolve

    return str(resolve(tok.pretokenizer))


@click.command(context_settings=CONTEXT)
@click.argument("inputs", nargs=-1, required=True, metavar="FILE.tok|INPUT...",
                type=click.Path(dir_okay=True, path_type=str))
@_tokenizer_options
@click.option("--top", type=click.IntRange(min=0), default=20, show_default=True,
              help="List the N most frequent tokens.")
@click.option("--chat", is_flag=True, help="INPUT files hold conversations (as encode --chat).")
@click.option("--threads", type=int, default=None, help="Encoding threads for INPUT files.")
@_SEPARATOR
@_read_option_flags
@click.option("--json", "as_json", is_flag=True,
              help="Print the figures as one JSON object (the top tokens with their bytes "
                   "in hex) instead of the table.")
@click.option("-q", "--quiet", is_flag=True, help="Accepted for symmetry: stats prints its "
              "result only.")
@click.option("--verify", is_flag=True,
              help="Instead of the figures, read each FILE.tok whole and check it: the "
                   "checksum (version 2), the documents and source bytes recounted, every "
                   "id a token of -t. Prints `verified: ...` per file.")
def stats(inputs, tokenizer_path, vocab_pretokenizer, top, chat, threads, separator, column,
          field, per_line, as_json, quiet, verify):
    """Documents, source bytes, tokens, bytes per token and the most frequent tokens of
    .tok files (read as they are) and INPUT files (encoded first, as `asmbpe encode`
    would), and the tokenizer's pre-tokenizer. Bytes per token counts text tokens only
    (specials left out)."""
    from ..corpora import StdinInput
    from ..show import TokenStats, format_stats
    from ..pipeline import encode_blocks
    from ..tokfile import is_tok_file, read_tok

    _check_threads(threads)
    tok = _load_tokenizer(tokenizer_path, vocab_pretokenizer)
    read = _read_options(separator, column, field, per_line)
    files = _inputs(inputs)
    # only regular files are looked into: a FIFO or stdin is read once, as an INPUT
    tok_files = [p for p in files if not isinstance(p, StdinInput) and Path(p).is_file()
                 and is_tok_file(p)]
    if verify:
        return _verify_tok_files(files, tok_files, tok)
    st = TokenStats(tok.vocab_size, special_ids=sorted(tok.specials.values()))
    try:
        for path in tok_files:
            tf = read_tok(path, tok)
            # the header's counts checked against the tokens, and every id counted, in
            # one pass (read with tok: one count per id of tok)
            st.add_counts(tf.id_counts(), tf.n_tokens)
            st.documents += tf.n_documents
            st.source_bytes += tf.source_bytes
        others = [p for p in files if p not in tok_files]
        if others:
            with _input_notes():
                for tokens, docs, nbytes in encode_blocks(tok, others, chat=chat,
                                                          threads=threads,
                                                          read_options=read):
                    st.add(tokens, docs, nbytes, chat=chat)
    except ValueError as e:
        _fail(str(e).splitlines()[0] if str(e) else type(e).__name__)
    pretok = None if tok.is_loaded else _pretokenizer_of(tok)
    if as_json:
        import json

        from ..show import stats_record

        rec = stats_record(st, tok.id_to_bytes(), top, pretok)
        rec["pretokenizer"] = _pretokenizer_of(tok)
        rec["tokenizer"] = dict(name=tok.name, vocab_size=tok.vocab_size,
                                n_merges=tok.n_merges, loaded=tok.is_loaded,
                                specials=tok.specials, dtype=tok.dtype.name)
        _write_stdout([json.dumps(rec, ensure_ascii=False, indent=2), "\n"])
        return
    lines = list(format_stats(st, tok.id_to_bytes(), top, pretok))
    if tok.is_loaded:
        lines += tok.describe()
    _write_stdout([line + "\n" for line in lines])    # `| head` ends quietly


def _verify_tok_files(files, tok_files, tok) -> None:
    """stats --verify: each FILE.tok read whole and checked (TokFile.verify); the first
    problem is the command's error."""
    from ..tokfile import read_tok

    others = [p for p in files if p not in tok_files]
    if others:
        raise InputError(f"{others[0]}: --verify checks .tok files, this is not one")
    for path in tok_files:
        click.echo(f"verified: {read_tok(path, tok).verify()}")


@click.command(context_settings=CONTEXT)
@_tokenizer_options
@click.option("--format", "fmt", required=True,
              type=click.Choice(["tiktoken", "hf", "vocab"]),
              help="tiktoken: a ranks file for tiktoken (harness.export.load_tiktoken adds "
                   "the pattern and specials); hf: a Hugging Face tokenizer.json; vocab: "
                   "a TSV to read, one line per id (its bytes escaped, the ids it was "
                   "merged from; docs/FORMATS.md).")
@click.option("-o", "--output", required=True, metavar="PATH",
              help="The file to write; `-` writes it to stdout.")
@click.option("-q", "--quiet", is_flag=True, help="No summary line.")
def export(tokenizer_path, vocab_pretokenizer, fmt, output, quiet):
    """Export the tokenizer for tiktoken or Hugging Face tokenizers (same ids as asmbpe),
    or dump its vocabulary for people to read. A loaded vocabulary is written with its
    own tokens (ranks) and specials."""
    from .. import export as exp

    to_stdout = output == STDOUT                # -o -: the export on stdout
    out = "stdout" if to_stdout else _check_output(output, [tokenizer_path])
    tok = _load_tokenizer(tokenizer_path, vocab_pretokenizer)
    write = {"tiktoken": exp.export_tiktoken, "vocab": exp.export_vocab}.get(fmt, exp.export_hf)
    with _output_file(output) as path:
        write(tok, path)
    if not quiet:
        click.echo(f"wrote {fmt} export of {tok!r} to {out}", err=to_stdout)
