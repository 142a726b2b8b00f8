"""`asmbpe data prepare`: local files -> the Parquet layout the harness reads.

    prepare(inputs, outdir, shard_bytes=1 << 30, row_group_bytes=64 << 20)

The documents of the inputs (any format of harness.corpora: text, JSONL, Parquet,
.gz / .zst) are written, in order, to `outdir/shard-00000.parquet`,
`shard-00001.parquet`, ...: one `text` column (UTF-8 strings; `binary=True` keeps
bytes that are not valid UTF-8), zstd-compressed, row groups of about
`row_group_bytes` of text, a new shard after about `shard_bytes`. With `chat=True` the
inputs hold conversations and the shards one `messages` column (a list of structs with
`role` and `content`), as SmolTalk ships it.

Memory is bounded by one row group. Each shard is written through
harness.files.AtomicFile (an unnamed file where the file system allows, else a temporary
name) and renamed when complete; after a failure the shards of this run are deleted, so
the directory holds either every shard or none of this run's.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from .corpora import InputError, conversation_bytes, iter_conversations, iter_documents
from .files import AtomicFile

__all__ = ["prepare", "PrepareSummary", "shard_path", "SHARD_RE"]

SHARD_RE = re.compile(r"shard-\d{5}\.parquet")     # the names shard_path gives


def shard_path(outdir, index: int) -> Path:
    """The index-th shard of `outdir`: shard-NNNNN.parquet."""
    return Path(outdir) / f"shard-{index:05d}.parquet"


@dataclass
class PrepareSummary:
    shards: list[Path] = field(default_factory=list)
    documents: int = 0
    source_bytes: int = 0


def _schema(chat: bool, binary: bool):
    import pyarrow as pa

    if chat:
        return pa.schema([("messages", pa.list_(pa.struct([("role", pa.string()),
                                                            ("content", pa.string())])))])
    return pa.schema([("text", pa.binary() if binary else pa.string())])


def prepare(inputs, outdir, *, chat: bool = False, binary: bool = False, separator=None,
            shard_bytes: int = 1 << 30, row_group_bytes: int = 64 << 20,
            progress=None) -> PrepareSummary:
    import pyarrow as pa
    import pyarrow.parquet as pq

    out = Path(outdir)
    out.mkdir(parents=True, exist_ok=True)
    schema = _schema(chat, binary)
    summary = PrepareSummary()
    state = {"writer": None, "file": None, "final": None, "bytes": 0}
    rows: list = []
    rows_bytes = 0

    def open_shard():
        final = shard_path(out, len(summary.shards))
        state.update(file=AtomicFile(final), final=final, bytes=0)
        state["writer"] = pq.ParquetWriter(state["file"].file, schema, compression="zstd")

    def close_shard():
        if state["writer"] is not None:
            state["writer"].close()
            state["writer"] = None
            state["file"].commit()
            summary.shards.append(state["final"])
            state.update(file=None, final=None, bytes=0)

    def flush():
        nonlocal rows, rows_bytes
        if not rows:
            return
        if state["writer"] is None:
            open_shard()
        if chat:
            table = pa.table({"messages": pa.array(rows, type=schema.field(0).type)})
        else:
            arr = pa.array(rows, type=pa.binary())
            if not binary:
                try:
                    arr = arr.cast(pa.string())
                except pa.ArrowInvalid:
                    raise InputError(f"{state['final']}: a document is not valid UTF-8 "
                                     "(use --binary to keep the bytes as they are)") from None
            table = pa.table({"text": arr})
        state["writer"].write_table(table, row_group_size=len(rows))
        state["bytes"] += rows_bytes
        rows, rows_bytes = [], 0
        if state["bytes"] >= shard_bytes:
            close_shard()

    try:
        for path in inputs:
            items = iter_conversations(path) if chat else iter_documents(path,
                                                                         separator=separator)
            for item in items:
                n = conversation_bytes(item) if chat else len(item)
                rows.append(item)
                rows_bytes += n
                summary.documents += 1
                summary.source_bytes += n
                if rows_bytes >= row_group_bytes or state["bytes"] + rows_bytes >= shard_bytes:
                    flush()
                    if progress:
                        progress(summary.source_bytes)
        flush()
        close_shard()
        if progress:
            progress(summary.source_bytes)
    except BaseException:
        if state["writer"] is not None:
            try:
                state["writer"].close()
            except Exception:
                pass
        if state["file"] is not None:
            state["file"].discard()
        for p in summary.shards:
            p.unlink(missing_ok=True)
        raise
    if not summary.documents:
        raise InputError("no documents in the input; nothing written")
    return summary
