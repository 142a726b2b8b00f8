"""Equality with an independent trainer (issue 3): rustbpe (PyPI), given the oracle
pattern of SPEC §3 with literal code points, on the same documents and with
max_word_bytes=0 (rustbpe keeps every chunk), learns exactly asmbpe's merges, compared
as the ordered list of the byte strings they make, at vocab 4096 (3824 merges; rustbpe's
vocabulary has no specials, so it is given 4096 - 16) on ~5 MB each of english,
multilingual and code text.

rustbpe breaks ties between equal counts by the smaller (left, right) pair, as SPEC §4.4
does, and counts overlapping pairs and rewrites left to right like asmbpe.
"""
from __future__ import annotations

import pytest

import harness
from harness.corpora import corpus_path, read_documents

LIMIT = 5_000_000
VOCAB = 4096


def rustbpe_merges(texts: list[str], vocab_size: int) -> list[bytes]:
    import rustbpe

    from harness.dev.oracle import ORACLE_PATTERN_LITERAL

    tok = rustbpe.Tokenizer()
    tok.train_from_iterator(iter(texts), vocab_size=vocab_size - 16,
                            pattern=ORACLE_PATTERN_LITERAL)
    ranks = tok.get_mergeable_ranks()
    items = ranks.items() if isinstance(ranks, dict) else ranks
    ordered = sorted(items, key=lambda kv: kv[1])
    assert [r for _, r in ordered] == list(range(len(ordered)))
    assert [bytes(k) for k, _ in ordered[:256]] == [bytes([b]) for b in range(256)]
    return [bytes(k) for k, _ in ordered[256:]]


@pytest.mark.parametrize("name", ["english", "multilingual", "code"])
def test_same_merges_as_rustbpe(name):
    pytest.importorskip("rustbpe", reason="rustbpe (PyPI) is not installed")
    path = corpus_path(name)
    if not path.is_file():
        pytest.skip(f"corpus not found: {path} (shared/ next to the repository)")
    pytest.importorskip("pyarrow", reason="reading the Parquet corpora needs pyarrow")
    docs = read_documents(path, LIMIT)
    texts = [d.decode("utf-8") for d in docs]          # the corpora are valid UTF-8

    ours = harness.train(docs, VOCAB, max_word_bytes=0)
    table = ours.tokenizer.id_to_bytes()
    mine = [table[256 + i] for i in range(ours.n_merges)]
    theirs = rustbpe_merges(texts, VOCAB)

    assert ours.n_merges == VOCAB - 272
    first = next((i for i, (a, b) in enumerate(zip(mine, theirs)) if a != b), None)
    assert first is None, (
        f"{name}: merge {first} differs: asmbpe {mine[first]!r} "
        f"(pair {ours.merges[first].tolist()}, count {int(ours.counts[first])}), "
        f"rustbpe {theirs[first]!r}")
    assert len(mine) == len(theirs)
