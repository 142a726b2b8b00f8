"""Where the corpora are, and reading documents from files (a first part of SPEC §8).

The shared corpora (english, multilingual, code: Parquet files with a `text` column)
live in the directory named by the environment variable ASMBPE_CORPORA, or else in
`shared/corpora` next to the repository.

`read_documents(path)` returns the documents of one file as UTF-8 bytes:

- `.parquet`: the `text` column, read in streaming batches (pyarrow);
- `.jsonl` / `.jsonl.gz`: the `text` field of each line;
- anything else: plain text, the whole file one document (`.gz` decompressed).

Problems with the file (missing, unreadable, a directory, empty, malformed) raise
`InputError`, whose message is one line naming the file.
"""
from __future__ import annotations

import gzip
import json
import os
from pathlib import Path

try:                                    # a click-friendly error when click is there
    from click import ClickException as _Base
except ImportError:                     # pragma: no cover - click is a dependency
    _Base = Exception

ROOT = Path(__file__).resolve().parent.parent
NAMES = ("english", "multilingual", "code")
ENV = "ASMBPE_CORPORA"

__all__ = ["InputError", "NAMES", "corpora_dir", "corpus_path", "available",
           "check_file", "read_documents"]


class InputError(_Base):
    """A file that cannot be used as input; the message is one line."""

    exit_code = 1

    def __init__(self, message: str):
        super().__init__(message)
        self.message = message

    def __str__(self) -> str:
        return self.message


def corpora_dir() -> Path:
    """$ASMBPE_CORPORA if set, else <repo>/../shared/corpora (it may not exist)."""
    env = os.environ.get(ENV)
    return Path(env) if env else ROOT.parent / "shared" / "corpora"


def corpus_path(name: str) -> Path:
    """The file of the named corpus (english | multilingual | code)."""
    if name not in NAMES:
        raise InputError(f"unknown corpus {name!r} (choose from {', '.join(NAMES)})")
    return corpora_dir() / f"{name}.parquet"


def available() -> list[str]:
    """The corpus names whose file exists, in NAMES order."""
    return [n for n in NAMES if (corpora_dir() / f"{n}.parquet").is_file()]


def check_file(path) -> Path:
    """`path` as a Path, if it is a readable, non-empty regular file; else InputError."""
    p = Path(path)
    try:
        st = p.stat()
    except FileNotFoundError:
        raise InputError(f"{p}: no such file") from None
    except OSError as e:
        raise InputError(f"{p}: cannot read: {e.strerror or e}") from None
    if p.is_dir():
        raise InputError(f"{p}: is a directory")
    if not os.access(p, os.R_OK):
        raise InputError(f"{p}: cannot read: permission denied")
    if st.st_size == 0 and p.is_file():
        raise InputError(f"{p}: is empty")
    return p


def _read_bytes(p: Path) -> bytes:
    try:
        data = p.read_bytes()
    except OSError as e:
        raise InputError(f"{p}: cannot read: {e.strerror or e}") from None
    if p.name.endswith(".gz"):
        try:
            data = gzip.decompress(data)
        except (OSError, EOFError) as e:
            raise InputError(f"{p}: not a valid gzip file: {e}") from None
    return data


def _parquet(p: Path, limit: int | None) -> list[bytes]:
    try:
        import pyarrow.parquet as pq
    except ImportError:
        raise InputError(f"{p}: reading Parquet needs pyarrow (pip install pyarrow)") from None
    docs: list[bytes] = []
    total = 0
    try:
        pf = pq.ParquetFile(p)
        if "text" not in pf.schema_arrow.names:
            raise InputError(f"{p}: no 'text' column (columns: {', '.join(pf.schema_arrow.names)})")
        for batch in pf.iter_batches(columns=["text"]):
            for text in batch.column(0).to_pylist():
                if text is None:
                    continue
                doc = text.encode("utf-8", "surrogatepass") if isinstance(text, str) else bytes(text)
                docs.append(doc)
                total += len(doc)
                if limit is not None and total >= limit:
                    return docs
    except InputError:
        raise
    except Exception as e:          # pyarrow raises its own error types
        raise InputError(f"{p}: cannot read as Parquet: {str(e).splitlines()[0] if str(e) else e}") from None
    return docs


def _jsonl(p: Path, limit: int | None) -> list[bytes]:
    docs: list[bytes] = []
    total = 0
    for lineno, line in enumerate(_read_bytes(p).splitlines(), 1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except ValueError as e:
            raise InputError(f"{p}:{lineno}: not valid JSON: {e}") from None
        text = obj.get("text") if isinstance(obj, dict) else None
        if not isinstance(text, str):
            raise InputError(f"{p}:{lineno}: no string 'text' field")
        doc = text.encode("utf-8", "surrogatepass")
        docs.append(doc)
        total += len(doc)
        if limit is not None and total >= limit:
            break
    return docs


def read_documents(path, limit_bytes: int | None = None) -> list[bytes]:
    """The documents of one file, as bytes. With `limit_bytes`, whole documents are read
    until their total reaches it (so the result may pass it by less than one document)."""
    p = check_file(path)
    limit = int(limit_bytes) if limit_bytes else None
    name = p.name.lower()
    if name.endswith(".parquet"):
        docs = _parquet(p, limit)
    elif name.endswith((".jsonl", ".jsonl.gz")):
        docs = _jsonl(p, limit)
    else:
        data = _read_bytes(p)
        docs = [data] if data else []
    if not docs:
        raise InputError(f"{p}: is empty (no documents)")
    return docs
