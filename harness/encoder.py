"""Encoding many documents (SPEC §6): the one entry point every production encode goes
through (`Tokenizer.encode`, `.encode_batch`, `.encode_many`, `.render_chat`, the CLI).

TEMPORARY: twin-backed until asm/encode.asm lands. Until then the body below encodes
with the naive twin (`harness.twin.encode_chunk`, lowest-numbered merge first) over the
assembly pre-tokenizer (`harness.split`), one chunk at a time in Python; `threads` and
`cache` are checked and otherwise ignored. The library call replaces this body and
keeps exactly this signature and result.
"""
from __future__ import annotations

import numpy as np

from . import twin
from .pretok import split

__all__ = ["encode_many", "MAX_THREADS"]

MAX_THREADS = 256                        # ASMBPE_MAX_THREADS


def encode_many(tokenizer, docs: list[bytes], threads: int | None = None, bos: bool = False,
                cache: bool = True) -> tuple[np.ndarray, np.ndarray]:
    """Encode documents.

    tokenizer: a harness.Tokenizer; docs: a list of bytes-like documents (any bytes,
    valid UTF-8 or not); threads: encoding threads (None: the library chooses);
    bos: prefix each document with <|bos|>; cache: use the per-thread chunk cache
    (results never depend on it).

    Returns (tokens, counts): every document's tokens concatenated in document order,
    uint16, and the number of tokens of each document (the <|bos|> included), uint64.
    Special-token text inside a document is ordinary text.
    """
    if threads is not None and (isinstance(threads, bool)
                                or not 1 <= int(threads) <= MAX_THREADS):
        raise ValueError(f"threads must be between 1 and {MAX_THREADS}, got {threads!r}")
    ranks = twin.merge_ranks(tokenizer.merges)
    prefix = [tokenizer.special_id("<|bos|>")] if bos else []
    tokens: list[int] = []
    counts = np.empty(len(docs), dtype=np.uint64)
    for k, doc in enumerate(docs):
        ids = list(prefix)
        for chunk in split(bytes(doc)):
            ids.extend(twin.encode_chunk(ranks, chunk))
        tokens.extend(ids)
        counts[k] = len(ids)
    return np.array(tokens, dtype=np.uint16), counts
