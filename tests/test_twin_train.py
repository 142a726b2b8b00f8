"""The naive Python trainer (harness.dev.twin.train) against SPEC §4 by hand, and against a
second, differently written reference trainer on random inputs.

The reference (`reference_train` below) shares no code with the twin: it keeps every
chunk occurrence (no word counting), holds each one as a str of code points (one per
token id), counts pairs as 2-character slices and rewrites with `str.replace`, which is
left to right and non-overlapping, as SPEC §4.4 asks.
"""
from __future__ import annotations

import time

import numpy as np
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from harness.dev import twin

A = ord("a")


def merges_of(result) -> list[tuple[int, int]]:
    return [tuple(m) for m in result.merges.tolist()]


def counts_of(result) -> list[int]:
    return result.counts.tolist()


def reference_train(docs, n_merges, max_word_bytes=256, min_count=1, splitter=twin.split):
    """A second trainer written differently from twin.train (see the module doc)."""
    if isinstance(docs, (bytes, str)):
        docs = [docs]
    seqs = []
    for doc in docs:
        if isinstance(doc, str):
            doc = doc.encode("utf-8")
        for chunk in splitter(doc):
            if max_word_bytes and len(chunk) > max_word_bytes:
                continue
            seqs.append("".join(chr(b) for b in chunk))     # every occurrence, kept apart
    merges, counts = [], []
    for i in range(n_merges):
        tally: dict[str, int] = {}
        for s in seqs:
            for j in range(len(s) - 1):
                tally[s[j:j + 2]] = tally.get(s[j:j + 2], 0) + 1
        if not tally:
            break
        best = sorted(tally, key=lambda p: (-tally[p], ord(p[0]), ord(p[1])))[0]
        if tally[best] < min_count:
            break
        merges.append((ord(best[0]), ord(best[1])))
        counts.append(tally[best])
        seqs = [s.replace(best, chr(256 + i)) for s in seqs]
    return merges, counts


# ------------------------------------------------------------------- hand-computed cases

def test_rewrite_left_to_right_non_overlapping():
    assert twin._rewrite((A, A, A), A, A, 256) == (256, A)
    assert twin._rewrite((A, A, A, A), A, A, 256) == (256, 256)
    assert twin._rewrite((A, A, A, A, A), A, A, 256) == (256, 256, A)
    assert twin._rewrite((1, 2, 1, 2, 2), 1, 2, 300) == (300, 300, 2)
    assert twin._rewrite((1,), 1, 2, 300) == (1,)


def test_one_repeated_byte_aaa():
    # "aaa": (a, a) occurs twice, overlapping -> count 2; "aaa" -> (aa) a; then (aa, a) once
    r = twin.train(b"aaa", 272 + 10)
    assert merges_of(r) == [(A, A), (256, A)]
    assert counts_of(r) == [2, 1]
    assert r.words == {b"aaa": 1}


def test_one_repeated_byte_aaaa_and_aaaaa():
    r = twin.train(b"aaaa", 272 + 10)              # (a,a)x3 -> (aa)(aa) -> (aaaa)
    assert merges_of(r) == [(A, A), (256, 256)]
    assert counts_of(r) == [3, 1]
    # "aaaaa" -> (aa)(aa)a: (256,256) and (256,a) tie at 1; (256, 97) is the smaller
    r = twin.train(b"aaaaa", 272 + 10)
    assert merges_of(r) == [(A, A), (256, A), (256, 257)]
    assert counts_of(r) == [4, 1, 1]


def test_repeated_byte_words_weighted_by_count():
    # three documents, two words: "aaa" x2 (pair count 2 each), "aaaa" x1 (count 3)
    r = twin.train(["aaa", "aaa", "aaaa"], 272 + 1)
    assert r.words == {b"aaa": 2, b"aaaa": 1}
    assert merges_of(r) == [(A, A)]
    assert counts_of(r) == [2 * 2 + 3]


def test_single_word():
    # "abcabc": ab 2, bc 2, ca 1 -> tie, (a,b) wins; then (256,c) 2; then (257,257) 1
    r = twin.train(b"abcabc", 272 + 50)
    assert merges_of(r) == [(A, A + 1), (256, A + 2), (257, 257)]
    assert counts_of(r) == [2, 2, 1]


def test_no_pairs_learns_nothing():
    # every chunk one byte: no pair at all
    r = twin.train([b"x", b"y", b"\n", b"!", b"7"], 272 + 10)
    assert r.merges.shape == (0, 2) and r.merges.dtype == np.uint16
    assert r.counts.shape == (0,) and r.counts.dtype == np.uint64
    assert r.n_merges == 0
    # long chunks all dropped by max_word_bytes=1: no pairs either
    assert twin.train("hello world, again", 272 + 10, max_word_bytes=1).n_merges == 0


@pytest.mark.parametrize("inputs", [b"", "", [], [b""], [b"", ""]])
def test_empty_input(inputs):
    r = twin.train(inputs, 300)
    assert r.n_merges == 0 and r.merges.shape == (0, 2) and len(r.words) == 0


def test_fewer_distinct_pairs_than_asked_stops_early():
    r = twin.train(b"abab", 272 + 100)             # (a,b) 2 -> (256,256) 1 -> one token
    assert merges_of(r) == [(A, A + 1), (256, 256)]
    assert counts_of(r) == [2, 1]


def test_exact_number_of_merges():
    r = twin.train(b"abcabc", 272 + 2)             # vocab_size - 256 - 16 = 2 merges
    assert merges_of(r) == [(A, A + 1), (256, A + 2)]
    assert twin.train(b"abcabc", 272).n_merges == 0


def test_ties_go_to_the_smallest_pair():
    # three pairs, each count 1, given in no particular order
    r = twin.train([b"zy", b"cd", b"ab"], 272 + 10)
    assert merges_of(r) == [(A, A + 1), (A + 2, A + 3), (ord("z"), ord("y"))]
    assert counts_of(r) == [1, 1, 1]
    # same left id: the smaller right id wins
    r = twin.train([b"ac", b"ab"], 272 + 1)
    assert merges_of(r) == [(A, A + 1)]
    # a higher count beats a smaller pair
    r = twin.train([b"ab", b"zz", b"zz"], 272 + 1)
    assert merges_of(r) == [(ord("z"), ord("z"))] and counts_of(r) == [2]


def test_min_count_stops():
    docs = ["ab"] * 5 + ["cd"] * 3 + ["ef"]
    assert counts_of(twin.train(docs, 272 + 10)) == [5, 3, 1]
    assert counts_of(twin.train(docs, 272 + 10, min_count=0)) == [5, 3, 1]
    assert counts_of(twin.train(docs, 272 + 10, min_count=3)) == [5, 3]
    assert counts_of(twin.train(docs, 272 + 10, min_count=4)) == [5]
    assert twin.train(docs, 272 + 10, min_count=6).n_merges == 0


def test_max_word_bytes_drops_long_chunks():
    text = b"abcdefgh ab ab"                       # chunks: abcdefgh, " ab", " ab"
    r = twin.train(text, 272 + 10, max_word_bytes=3)
    assert r.words == {b" ab": 2}
    assert merges_of(r) == [(32, A), (256, A + 1)]
    assert counts_of(r) == [2, 2]
    # a chunk of exactly max_word_bytes stays
    assert twin.train(text, 272 + 10, max_word_bytes=8).words == {b"abcdefgh": 1, b" ab": 2}
    assert twin.train(text, 272 + 10, max_word_bytes=7).words == {b" ab": 2}
    # 0 = no limit; the default is 256
    long_word = b"x" * 300
    assert twin.train(long_word, 272, max_word_bytes=0).words == {long_word: 1}
    assert twin.train(long_word, 272).words == {}
    assert twin.train(b"y" * 256, 272).words == {b"y" * 256: 1}
    r = twin.train(long_word, 272 + 1, max_word_bytes=0)
    assert merges_of(r) == [(ord("x"), ord("x"))] and counts_of(r) == [299]


def test_str_and_bytes_inputs_agree():
    text = "Grüße, naïve café — 東京 and ſ's; it's 1234 élan vital\n\n  x"
    by_str = twin.train(text, 272 + 40)
    by_bytes = twin.train(text.encode(), 272 + 40)
    by_list = twin.train([text[:20], text[20:].encode()], 272 + 40)
    assert merges_of(by_str) == merges_of(by_bytes)
    assert counts_of(by_str) == counts_of(by_bytes)
    assert by_str.words == by_bytes.words
    # documents are split separately: the list gives its own words
    assert by_list.words == twin.count_words([text[:20].encode(), text[20:].encode()])
    with pytest.raises(TypeError):
        twin.train([b"ok", 17], 300)


def test_documents_are_counted_apart():
    r = twin.train([b"ab", b"ab", b"cd"], 272 + 1)
    assert r.words == {b"ab": 2, b"cd": 1}
    assert counts_of(r) == [2]


@pytest.mark.parametrize("bad", [0, 255, 271, 65536, 1 << 20, -1])
def test_vocab_size_out_of_range(bad):
    with pytest.raises(ValueError, match="vocab_size"):
        twin.train(b"abc", bad)


@pytest.mark.parametrize("bad", [300.0, "300", None, True])
def test_vocab_size_not_an_integer(bad):
    with pytest.raises(TypeError, match="vocab_size"):
        twin.train(b"abc", bad)


def test_vocab_size_bounds_accepted():
    assert twin.train(b"abc", 272).n_merges == 0
    assert twin.train(b"abc", 65535).n_merges == 2
    assert twin.train(b"abc", np.int32(300)).n_merges == 2


def test_other_parameters_validated():
    with pytest.raises(ValueError, match="max_word_bytes"):
        twin.train(b"abc", 300, max_word_bytes=-1)
    with pytest.raises(ValueError, match="min_count"):
        twin.train(b"abc", 300, min_count=-1)


def test_splitter_keyword():
    # any bytes -> list of chunks function; here fixed 3-byte pieces
    def threes(d):
        return [d[i:i + 3] for i in range(0, len(d), 3)]

    r = twin.train(b"aaaaaa", 272 + 5, splitter=threes)  # words "aaa" x2
    assert r.words == {b"aaa": 2}
    assert merges_of(r) == [(A, A), (256, A)] and counts_of(r) == [4, 2]


def test_winning_counts_never_go_up_and_ids_are_defined():
    text = ("the cat sat on the mat; the rat ate the oat. " * 20
            + "aaaa bbbb abab baba 1234 5678 !!!! ,,,,\n" * 10)
    r = twin.train(text, 272 + 150)
    counts = counts_of(r)
    assert all(x >= y for x, y in zip(counts, counts[1:]))
    for i, (a, b) in enumerate(merges_of(r)):
        assert a < 256 + i and b < 256 + i
    assert len(set(merges_of(r))) == r.n_merges


# ----------------------------------------------------------- the independent reference

def test_reference_on_hand_cases():
    for docs, n in [(b"aaaaa", 10), (b"abcabc", 50), ([b"zy", b"cd", b"ab"], 10),
                    (["ab"] * 5 + ["cd"] * 3 + ["ef"], 10)]:
        r = twin.train(docs, 272 + n)
        assert reference_train(docs, n) == (merges_of(r), counts_of(r))


SMALL_ALPHABET = st.sampled_from(list("ab c\n'1é,"))
documents = st.lists(
    st.one_of(st.text(SMALL_ALPHABET, max_size=60),
              st.binary(max_size=40).map(lambda b: bytes(x % 4 + 97 for x in b))),
    min_size=0, max_size=4)


@settings(max_examples=500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(docs=documents, n=st.integers(0, 40), max_word_bytes=st.sampled_from([0, 1, 3, 256]),
       min_count=st.sampled_from([1, 2, 3]))
@example(docs=["aaaa aaaa aaa"], n=10, max_word_bytes=0, min_count=1)
@example(docs=["ab ba ab ba abab"], n=10, max_word_bytes=256, min_count=1)
def test_twin_equals_reference(docs, n, max_word_bytes, min_count):
    r = twin.train(docs, 272 + n, max_word_bytes=max_word_bytes, min_count=min_count)
    ref = reference_train(docs, n, max_word_bytes, min_count)
    assert (merges_of(r), counts_of(r)) == ref
    assert r.merges.dtype == np.uint16 and r.counts.dtype == np.uint64
    counts = counts_of(r)
    assert all(x >= y for x, y in zip(counts, counts[1:]))


def _fives(d: bytes) -> list[bytes]:
    return [d[i:i + 5] for i in range(0, len(d), 5)]


@settings(max_examples=300, deadline=None)
@given(docs=st.lists(st.binary(max_size=80), max_size=4), n=st.integers(0, 30))
def test_twin_equals_reference_any_bytes(docs, n):
    # arbitrary bytes (invalid UTF-8 included) through the pre-tokenizer twin, and through
    # a fixed-width splitter given with splitter=
    r = twin.train(docs, 272 + n)
    assert (merges_of(r), counts_of(r)) == reference_train(docs, n)
    r = twin.train(docs, 272 + n, splitter=_fives)
    assert (merges_of(r), counts_of(r)) == reference_train(docs, n, splitter=_fives)


def test_twin_equals_reference_on_prose():
    text = (
        "It was the best of times, it was the worst of times, it was the age of wisdom, "
        "it was the age of foolishness, it was the epoch of belief, it was the epoch of "
        "incredulity, it was the season of Light, it was the season of Darkness.\n"
    ) * 8 + "def f(x):\n    return x * 2  # twice\n" * 20
    r = twin.train(text, 272 + 80)
    assert (merges_of(r), counts_of(r)) == reference_train(text, 80)


# ---------------------------------------------------------- with the assembly splitter

def _assembly_split():
    harness = pytest.importorskip("harness")
    try:
        harness.split(b"probe")
    except Exception as e:                          # library missing or CPU without AVX2
        pytest.skip(f"assembly pre-tokenizer unavailable: {e}")

    def seed_split(data):
        return harness.split(data, pretokenizer="seed")      # the twin's default

    return seed_split


def _sample_text(n_bytes: int) -> bytes:
    """Deterministic, varied text: this repository's Python and spec files, repeated."""
    from pathlib import Path
    root = Path(__file__).resolve().parent.parent
    parts = [p.read_bytes() for p in sorted((root / "harness").glob("*.py"))]
    parts += [p.read_bytes() for p in sorted(root.glob("*.md"))]
    data = b"\n".join(parts)
    return (data * (n_bytes // max(1, len(data)) + 1))[:n_bytes]


def test_assembly_splitter_gives_the_same_training():
    split = _assembly_split()
    text = _sample_text(150_000)
    docs = [text[i:i + 10_000] for i in range(0, len(text), 10_000)]
    slow = twin.train(docs, 272 + 60)
    t = time.perf_counter()
    fast = twin.train(docs, 272 + 60, splitter=split)
    elapsed = time.perf_counter() - t
    assert slow.words == fast.words
    assert merges_of(slow) == merges_of(fast) and counts_of(slow) == counts_of(fast)
    assert fast.n_merges == 60
    assert elapsed < 20
