"""One huge document is counted by every thread (issue 24): asmbpe_count_words cuts
the text into the threads' shares at safe places inside documents, an ASCII letter
right after an LF (count.asm, snap_cut), which no pre-tokenizer's chunk spans. The
counts must not depend on where the cuts fall: every pre-tokenizer, 1 thread against
2..16, on one document made of the pieces around an LF that could fool a cut (runs of
spaces, CR LF, punctuation that takes the LFs after it, contractions, digits, CJK and
other scripts, lone UTF-8 lead bytes, documents without any safe place), and on the shared corpora joined
into one document; and against the twin's counts (harness.dev.twin) on a small one.
"""
from __future__ import annotations

import random

import pytest

from harness.dev import twin
from harness.pretokenizers import PRETOKENIZERS
from harness.train import WordTable

PIECES = [b"\n", b"\r\n", b" \n", b"  \n", b"\t\n", b"\n\n", b".\n", b"./\n", b"'\n", b"'s\n",
          b"'S\n", b"12\n", b"1234\n", b"\xe4\xb8\xad\xe6\x96\x87\n", b"\xc3\xa9\n", b" ",
          b"  ", b"word", b"Word", b"WORD", b"x", b"I", b"don't", b"it's", b"\xce\xb1\xce\xb2",
          b"\xf0\x9f\x98\x80", b"!!", b"...", b"--", b"\r", b"\x00", b"\xff", b"\xe2\x80\x99s",
          b"a\xcc\x81", b"42", b"\n ", b" \r\n", b"(", b")",
          # lone lead bytes: the seed's characters take their length from the lead
          # byte alone, so these swallow the LF and letter after them there
          b"\xc3", b"\xe3", b"\xe3 ", b"\xf5", b"\xf5\xff", b"\xe2  \xe3\r"]


def words(t: WordTable) -> dict[bytes, int]:
    """The table's words and counts, as a dict."""
    data, ends, cnt = t.export()
    out, prev = {}, 0
    for e, c in zip(ends.tolist(), cnt.tolist()):
        out[data[prev:e]] = c
        prev = e
    return out


def counts(docs: list[bytes], threads: int, pretokenizer: str) -> dict[bytes, int]:
    t = WordTable(pretokenizer)
    try:
        t.count(docs, threads=threads, max_word_bytes=0)
        return words(t)
    finally:
        t.close()


def adversarial(seed: int, n: int) -> bytes:
    rng = random.Random(seed)
    return b"".join(rng.choice(PIECES) for _ in range(n))


@pytest.mark.parametrize("pretokenizer", [p.name for p in PRETOKENIZERS])
def test_one_document_any_thread_count(pretokenizer):
    doc = adversarial(7, 60_000)
    want = counts([doc], 1, pretokenizer)
    for threads in (2, 3, 5, 8, 16):
        assert counts([doc], threads, pretokenizer) == want, f"{threads} threads"
    # with documents around it, and documents with no safe place at all
    docs = [adversarial(k, 50) for k in range(40)] + [doc] + [b"x" * 5000, b" 1\n" * 3000]
    want = counts(docs, 1, pretokenizer)
    for threads in (2, 7, 16):
        assert counts(docs, threads, pretokenizer) == want, f"{threads} threads, many documents"


@pytest.mark.parametrize("pretokenizer", ["seed", "nanochat", "gpt2"])
def test_one_document_matches_the_twin(pretokenizer):
    doc = adversarial(11, 3_000)
    want = dict(twin.count_words([doc], max_word_bytes=0, pretokenizer=pretokenizer))
    assert counts([doc], 4, pretokenizer) == want


@pytest.mark.parametrize("name", ["english", "multilingual", "code"])
def test_corpus_as_one_document(name):
    from corpus_util import corpus_docs
    doc = b"\n".join(corpus_docs(name, 3_000_000))
    want = counts([doc], 1, "nanochat")
    for threads in (2, 8):
        assert counts([doc], threads, "nanochat") == want


@pytest.mark.parametrize("threads", [1, 2, 3, 8])
def test_batches_known_words_merged_in_parallel(threads):
    """Counting in several calls, each merging its threads' tables into the table (at
    once from two threads on: count.asm's parallel merge, T58; the words the table
    already holds and new ones): the counts are the twin's over all the documents,
    whatever the split and the threads."""
    rng = random.Random(threads)
    docs = [adversarial(k, rng.randrange(1, 400)) for k in range(300)]
    want = dict(twin.count_words(docs, max_word_bytes=0, pretokenizer="seed"))
    t = WordTable("seed")
    try:
        at = 0
        while at < len(docs):
            n = rng.randrange(1, 60)
            t.count(docs[at:at + n], threads=threads, max_word_bytes=0)
            at += n
        assert t.total == sum(want.values())
        assert words(t) == want
    finally:
        t.close()


@pytest.mark.parametrize("threads", [2, 5, 16])
def test_threads_racing_for_the_same_new_words(threads):
    """count.asm's parallel merge (T58): every thread's table holds the same words, all
    new to the persistent table, so the threads race to claim each word's slot (a
    locked cmpxchg; the losers wait for the winner's count, then add theirs), words of
    1 to 60 bytes (memeq on text and on arena keys), and enough of them that the table
    grows before the merge (room for every thread's words) and after it (back under
    3/4), in the first call and in a second one. The counts are the twin's."""
    rng = random.Random(threads)
    letters = b"abcdefghijklmnopqrstuvwxyz"
    vocab = [bytes(rng.choice(letters) for _ in range(rng.randrange(1, 60)))
             for _ in range(6000)]
    doc = b" ".join(vocab)
    other = b" ".join(w + b"q" for w in vocab[:3000])
    want = dict(twin.count_words([doc] * threads + [other] * threads, max_word_bytes=0,
                                 pretokenizer="seed"))
    t = WordTable("seed")
    try:
        t.count([doc] * threads, threads=threads, max_word_bytes=0)
        t.count([other] * threads, threads=threads, max_word_bytes=0)
        assert t.total == sum(want.values())
        assert words(t) == want
    finally:
        t.close()


@pytest.mark.parametrize("threads", [1, 2])
def test_short_words_told_apart_by_hash_and_length(threads):
    """Words of at most 8 bytes are matched by their hash and length alone (T68:
    HASH_BYTES is a bijection of such a key), in the counting loop's fast path, in
    asmbpe_tab_insert and in the parallel table merge. Many distinct short words that
    differ in one byte, or only in a trailing byte that a careless shift would drop,
    in two calls (the second merging into the persistent table) and through
    WordTable.add: the counts are exact."""
    rng = random.Random(68 + threads)
    letters = b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
    vocab = _one_byte_apart(rng, letters, range(1, 9), 20)
    while len(vocab) < 40000:
        vocab.add(bytes(rng.choice(letters) for _ in range(rng.randrange(1, 9))))
    vocab = sorted(vocab)
    docs = [b"\n".join(rng.choice(vocab) for _ in range(2000)) for _ in range(60)]
    want = dict(twin.count_words(docs, max_word_bytes=0, pretokenizer="seed"))
    t = _counted_in_two_calls(docs, threads)
    try:
        assert words(t) == want
        data, ends, cnt = t.export()
        u = WordTable("seed")
        try:
            u.add(data, ends, cnt)
            u.add(data, ends, cnt)
            assert words(u) == {w: 2 * c for w, c in want.items()}
        finally:
            u.close()
    finally:
        t.close()


def _counted_in_two_calls(docs, threads: int) -> WordTable:
    """A seed table of docs counted in two calls (the second merging its words into
    the persistent table, which owns copies of the first's); the caller closes it."""
    t = WordTable("seed")
    half = len(docs) // 2
    t.count(docs[:half], threads=threads, max_word_bytes=0)
    t.count(docs[half:], threads=threads, max_word_bytes=0)
    return t


def _one_byte_apart(rng, letters: bytes, lengths, k: int) -> set:
    """For each length, a random word of `letters` and the words that differ from it
    in one byte, at every position, by each of the first k letters."""
    vocab = set()
    for n in lengths:
        base = bytes(rng.choice(letters) for _ in range(n))
        for i in range(n):
            for c in letters[:k]:
                vocab.add(base[:i] + bytes([c]) + base[i + 1:])
    return vocab


@pytest.mark.parametrize("threads", [1, 2])
def test_long_words_of_one_hash_told_apart(threads):
    """Words of 9 to 40 bytes that differ in one byte, at every position: the counting
    loop compares words of 9..32 bytes in its fast path (T79, 32 bytes loaded from
    each, the bytes past len masked off), longer ones through asmbpe_tab_insert. The
    real hash tells these apart anyway; checked by hand against a hash that drops a
    word's last 8 bytes (every such pair then shares hash and length): the counts
    stayed exact, and failed with the mask taken at 16 bytes instead of len."""
    rng = random.Random(79 + threads)
    vocab = sorted(_one_byte_apart(rng, b"abcdefghijklmnopqrstuvwxyz", range(9, 41), 6))
    docs = [b" ".join(rng.choice(vocab) for _ in range(3000)) for _ in range(16)]
    want = dict(twin.count_words(docs, max_word_bytes=0, pretokenizer="seed"))
    t = _counted_in_two_calls(docs, threads)
    try:
        assert words(t) == want
    finally:
        t.close()
