"""The shared corpora for tests (imported from the tests folder): documents of one,
skipping the test with a clear reason where shared/ or pyarrow is missing."""
from __future__ import annotations

import pytest

from harness.corpora import corpus_path, read_documents


def corpus_docs(name: str, limit: int) -> list[bytes]:
    """About `limit` bytes of whole documents of corpus `name` (0: all of it)."""
    path = corpus_path(name)
    if not path.is_file():
        pytest.skip(f"corpus not found: {path} (shared/ next to the repository)")
    pytest.importorskip("pyarrow", reason="reading the Parquet corpora needs pyarrow")
    return read_documents(path, limit)
