"""Helpers of the loaded-vocabulary tests (imported from the tests folder): the
published rank files in ../shared/vocabs and tiktoken oracles built from them offline
(../shared/vocabs/README.md)."""
from __future__ import annotations

import functools
import gzip
import tempfile
from pathlib import Path

import pytest

VOCABS = Path(__file__).resolve().parents[1].parent / "shared" / "vocabs"


def vocab_path(name: str) -> Path:
    """../shared/vocabs/NAME.tiktoken.gz; the test skips when it is absent."""
    p = VOCABS / f"{name}.tiktoken.gz"
    if not p.is_file():
        pytest.skip(f"{p} not found (shared/ next to the repository)")
    return p


@functools.lru_cache(maxsize=None)
def loaded(name: str):
    from harness.tokenizer import Tokenizer
    return Tokenizer.from_tiktoken(vocab_path(name))


@functools.lru_cache(maxsize=None)
def tiktoken_oracle(name: str):
    """tiktoken.Encoding of a published vocabulary, with tiktoken's pattern (the
    registry's EXACT_PATTERNS) and specials; skips without tiktoken."""
    tiktoken = pytest.importorskip("tiktoken")
    from tiktoken.load import load_tiktoken_bpe

    from harness.pretokenizers import EXACT_PATTERNS
    from harness.vocab import KNOWN_ENCODINGS

    gz = vocab_path(name)
    with tempfile.TemporaryDirectory() as tmp:
        plain = Path(tmp) / f"{name}.tiktoken"
        plain.write_bytes(gzip.decompress(gz.read_bytes()))
        ranks = load_tiktoken_bpe(str(plain))
    known = KNOWN_ENCODINGS[name]
    return tiktoken.Encoding(name, pat_str=EXACT_PATTERNS[known.pretokenizer],
                             mergeable_ranks=ranks, special_tokens=known.specials)
