"""`asmbpe data fetch` and `asmbpe data prepare`: datasets into the cache, local files
into Parquet shards."""
from __future__ import annotations

import time

import click

from ..corpora import InputError, check_file
from .common import CONTEXT, _SEPARATOR, _check_output, _mb
from .progress import BytesProgress, FetchProgress


@click.group(context_settings=CONTEXT)
def data():
    """Get datasets (FineWeb-Edu, SmolTalk) and prepare local files as Parquet shards."""


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
    from .. import fetch as F

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
    progress = FetchProgress(enabled=not quiet)
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
    from ..prepare import SHARD_RE, prepare

    files = [check_file(p) for p in inputs]
    out = _check_output(output, inputs, directory=True, writes=SHARD_RE.fullmatch)
    progress = BytesProgress("preparing", None if chat else _estimate(files),
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
    from ..corpora import estimate_bytes

    return estimate_bytes(files)
