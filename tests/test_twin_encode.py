"""The naive encoder (harness.dev.twin.encode, SPEC §6) by hand, and against a second,
differently written reference on random inputs.

The reference (`reference_encode` below) shares no code with the twin: it walks the
merges once, in order, and applies each to every chunk with `str.replace` (left to right,
non-overlapping) on a str of code points, one per token id. One pass in merge order is
the same as "lowest-numbered merge first, repeated": a merge only creates pairs that
involve its new id, and every merge using that id comes later.
"""
from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

import harness
from harness.dev import twin

A, B, C = ord("a"), ord("b"), ord("c")


def reference_encode(merges, data: bytes) -> list[int]:
    out = []
    for chunk in twin.split(data):
        s = "".join(map(chr, chunk))
        for i, (a, b) in enumerate(merges):
            s = s.replace(chr(a) + chr(b), chr(256 + i))
        out.extend(map(ord, s))
    return out


def spell(merges, ids) -> bytes:
    """The bytes of ids under merges (the inverse of encoding)."""
    table = [bytes([b]) for b in range(256)]
    for a, b in merges:
        table.append(table[a] + table[b])
    return b"".join(table[i] for i in ids)


# ------------------------------------------------------------------ hand-computed cases

def test_empty_input():
    assert twin.encode([(A, A)], b"") == []
    assert twin.encode([], b"") == []


def test_no_merges_gives_the_bytes():
    assert twin.encode([], b"hi there") == list(b"hi there")


def test_overlapping_runs_pair_left_to_right():
    aa = [(A, A)]
    assert twin.encode(aa, b"aa") == [256]
    assert twin.encode(aa, b"aaa") == [256, A]             # (aa) a, not a (aa)
    assert twin.encode(aa, b"aaaa") == [256, 256]
    assert twin.encode(aa + [(256, 256)], b"aaaaa") == [257, A]
    assert twin.encode(aa + [(256, A)], b"aaa") == [257]


def test_a_merge_applies_everywhere_in_the_chunk():
    assert twin.encode([(A, B)], b"ababcab") == [256, 256, C, 256]


def test_lowest_numbered_merge_first_not_leftmost():
    # (b, c) is merge 0, so "abc" takes it although (a, b) comes first in the text
    assert twin.encode([(B, C), (A, B)], b"abc") == [A, 256]
    assert twin.encode([(A, B), (B, C)], b"abc") == [256, C]


def test_later_merges_build_on_earlier_ones():
    merges = [(A, B), (256, C), (B, C)]
    assert twin.encode(merges, b"abc") == [257]
    assert twin.encode(merges, b"bc") == [258]
    # (a, bc) is not a merge, so a chunk that reaches a|bc stays there
    assert twin.encode([(B, C), (A, B), (257, C)], b"abc") == [A, 256]


def test_merges_never_cross_chunks():
    # "hello world" is "hello" | " world": the pair (o, space) spans the cut
    assert twin.encode([(ord("o"), ord(" "))], b"hello world") == list(b"hello world")
    assert (twin.encode([(ord(" "), ord("w"))], b"hello world")
            == list(b"hello") + [256] + list(b"orld"))


def test_invalid_utf8_bytes():
    data = b"\xff\xfe\x80abc\xe6\x97"
    merges = [(0xFF, 0xFE), (A, B), (0xE6, 0x97)]
    ids = twin.encode(merges, data)
    assert ids == [256, 0x80, 257, C, 258]
    assert spell(merges, ids) == data


def test_str_is_utf8_and_specials_are_text():
    assert twin.encode([], "é") == [0xC3, 0xA9]
    assert twin.encode([], "<|bos|>") == list(b"<|bos|>")


def test_numpy_merges_and_a_repeated_pair_keeps_the_lower_number():
    import numpy as np

    merges = np.array([(A, B), (B, C)], dtype=np.uint16)
    assert twin.encode(merges, b"abc") == [256, C]
    assert twin.merge_ranks([(A, B), (B, C), (A, B)])[(A, B)] == 0


# ------------------------------------------------------------------------ random inputs

docs = st.lists(st.sampled_from([b"a", b"b", b"ab", b" ", b"\n", b"1", b"\xc3\xa9", b"\xff",
                                 b"'s", b"!"]), max_size=40).map(b"".join)


@st.composite
def merge_lists(draw):
    """Valid merge tables over a small alphabet: merge i uses ids below 256 + i."""
    alphabet = [A, B, ord(" "), 0xC3, 0xA9, ord("1")]
    merges = []
    for _ in range(draw(st.integers(0, 12))):
        ids = alphabet + list(range(256, 256 + len(merges)))
        pair = (draw(st.sampled_from(ids)), draw(st.sampled_from(ids)))
        if pair not in merges:
            merges.append(pair)
    return merges


@settings(max_examples=300, deadline=None)
@given(merge_lists(), docs)
def test_matches_the_reference_on_random_merges(merges, data):
    ids = twin.encode(merges, data)
    assert ids == reference_encode(merges, data)
    assert spell(merges, ids) == data


@settings(max_examples=60, deadline=None)
@given(st.lists(docs, min_size=1, max_size=8), docs)
def test_matches_the_reference_on_trained_merges(corpus, data):
    merges = twin.train(corpus, 272 + 20).merges.tolist()
    assert twin.encode(merges, data) == reference_encode(merges, data)


def test_the_assembly_splitter_gives_the_same_ids():
    text = "It's 12:30 — naïve café, 日本語のテキスト。 emoji 😀😀 ok\r\n\n  x" * 20
    text = text.encode()
    merges = twin.train(text, 272 + 80).merges
    def seed_split(data):
        return harness.split(data, pretokenizer="seed")      # the twin's default

    assert twin.encode(merges, text, splitter=seed_split) == twin.encode(merges, text)
