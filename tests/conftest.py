"""Shared test helpers: where the corpora are and how to read them.

The corpora live in shared/corpora/*.parquet (column `text`), with shared/ next to the
repository (as on the developers' machines and in CI), or where $ASMBPE_CORPORA says
(harness.corpora.corpora_dir).  Tests that need them take the `corpus_files` fixture,
which skips with a reason when they are absent.
"""

from __future__ import annotations

import functools
from pathlib import Path

import pytest

from harness.corpora import corpora_dir as _corpora_dir

CORPORA_DIR = _corpora_dir()


@functools.lru_cache(maxsize=None)
def read_corpus_texts(path: Path) -> tuple[str, ...]:
    """Every document (the `text` column) of one Parquet corpus file, in file order,
    read by the harness's own reader."""
    from harness.corpora import iter_documents

    return tuple(doc.decode("utf-8", "surrogatepass") for doc in iter_documents(path))


@pytest.fixture(scope="session")
def corpora_dir() -> Path:
    """shared/corpora next to the repository; the test skips if it is missing."""
    if not CORPORA_DIR.is_dir():
        pytest.skip(f"corpora directory not found: {CORPORA_DIR} (shared/ next to the repo)")
    return CORPORA_DIR


@pytest.fixture(scope="session")
def corpus_files(corpora_dir: Path) -> list[Path]:
    """The Parquet corpus files, sorted by name; the test skips if there are none."""
    files = sorted(corpora_dir.glob("*.parquet"))
    if not files:
        pytest.skip(f"no *.parquet corpus in {corpora_dir}")
    pytest.importorskip("pyarrow", reason="pyarrow is needed to read the Parquet corpora")
    return files


@pytest.fixture(scope="session")
def corpus_texts():
    """A function path -> tuple of the documents of that corpus file (cached)."""
    return read_corpus_texts
