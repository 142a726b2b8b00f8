"""The pre-tokenizer's naive Python twin (harness.dev.twin.split) against SPEC §3 and against
the oracle regex (harness.dev.oracle).

The twin is written by hand from the SPEC's byte-level definition; the oracle is the
SPEC's regex run by the `regex` module. On valid UTF-8 the two must agree exactly.
(The regex's (?i) uses Unicode simple case folding, under which U+017F 'ſ' is an 's':
"'ſ" is a contraction. The byte-level rules follow it: see test_long_s_contraction.)

Set ASMBPE_TWIN_CORPUS=full to compare on the whole corpus selection of the brief (the
first 200 documents of each file plus every document with an apostrophe followed by a
letter in its first 100 KB, each cut to 100 KB): some 300 MB, several minutes.
"""

from __future__ import annotations

import os
import re
import sys
import time

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

regex = pytest.importorskip("regex")

from harness.dev import twin  # noqa: E402
from split_util import first_difference  # noqa: E402
from harness.dev.oracle import (  # noqa: E402
    ORACLE_PATTERN,
    ORACLE_PATTERN_LITERAL,
    compiled,
    compiled_literal,
    oracle_split,
    oracle_split_bytes,
)

LONG_S = "\u017f"  # LATIN SMALL LETTER LONG S, the one code point (?i) folds onto s d m t l v e r


def spec_split_via_oracle(text: str) -> list[bytes]:
    """The SPEC's split of valid text, computed with the oracle regex."""
    return [chunk.encode("utf-8") for chunk in oracle_split(text)]




def check_against_oracle(text: str) -> None:
    data = text.encode("utf-8")
    diff = first_difference(twin.split(data, "seed"), spec_split_via_oracle(text), data)
    assert diff is None, diff


def check_tiling(data: bytes) -> list[bytes]:
    chunks = twin.split(data, "seed")
    assert b"".join(chunks) == data
    assert all(chunks), "empty chunk"
    ends = twin.split_offsets(data, "seed")
    assert ends == [sum(len(c) for c in chunks[:i + 1]) for i in range(len(chunks))]
    return chunks


# --------------------------------------------------------------------------- SPEC §3 table

SPEC_EXAMPLES = [
    ("Hello world", "Hello| world"),
    ("don't", "don|'t"),
    ("I'll WE'RE they've", "I|'ll| WE|'RE| they|'ve"),
    ("'sam", "'s|am"),
    ("123456", "12|34|56"),
    ("$9.99", "$|9|.|99"),
    ("  hello", " | hello"),
    ("hello!!!", "hello|!!!"),
    ("(test)", "(test|)"),
    ("a... b", "a|...| b"),
    ("x  \n\n  y", "x|  \n\n| | y"),
    ("emoji 😀😀 ok", "emoji| 😀😀| ok"),
    ("日本語のテキスト。", "日本語のテキスト|。"),
]


@pytest.mark.parametrize("text,joined", SPEC_EXAMPLES)
def test_spec_examples_twin(text, joined):
    assert twin.split(text.encode(), "seed") == [c.encode() for c in joined.split("|")]


@pytest.mark.parametrize("text,joined", SPEC_EXAMPLES)
def test_spec_examples_oracle(text, joined):
    assert oracle_split(text) == joined.split("|")
    assert compiled_literal().findall(text) == joined.split("|")


def test_empty():
    assert twin.split(b"", "seed") == []
    assert twin.split_offsets(b"", "seed") == []
    assert oracle_split("") == []


# --------------------------------------------------------------------------- characters

@pytest.mark.parametrize(
    "data,cls,length",
    [
        (b"A", twin.L, 1), (b"z", twin.L, 1), (b"0", twin.N, 1), (b"9", twin.N, 1),
        (b" ", twin.S, 1), (b"\t", twin.S, 1), (b"\x0b", twin.S, 1), (b"\x0c", twin.S, 1),
        (b"\n", twin.NL, 1), (b"\r", twin.NL, 1), (b"\x00", twin.O, 1), (b"'", twin.O, 1),
        (b"\x7f", twin.O, 1), (b"\x08", twin.O, 1), (b"\x0e", twin.O, 1), (b"_", twin.O, 1),
        (b"\x80", twin.O, 1), (b"\xbf\x80", twin.O, 1), (b"\xf8\x80\x80\x80", twin.O, 1),
        (b"\xff", twin.O, 1),
        (b"\xc2\xa0", twin.O, 2), (b"\xc2", twin.O, 1), (b"\xc3\xa9", twin.L, 2),
        (b"\xc0\xaf", twin.L, 2), (b"\xc1", twin.L, 1), (b"\xdf\xbf", twin.L, 2),
        (b"\xe2\x80\x94", twin.O, 3), (b"\xe2", twin.O, 1), (b"\xe1\xbf\xbf", twin.L, 3),
        (b"\xe3\x80\x82", twin.O, 3), (b"\xe3\x80", twin.O, 2), (b"\xe3", twin.L, 1),
        (b"\xe3\x81\x80", twin.L, 3), (b"\xe3A", twin.L, 2), (b"\xe3AB", twin.L, 3),
        (b"\xe3ABC", twin.L, 3), (b"\xed\xa0\x80", twin.L, 3),
        (b"\xf0\x9f\x98\x80", twin.O, 4), (b"\xf0\x9f", twin.O, 2), (b"\xf0", twin.L, 1),
        (b"\xf0\x9e\xbf\xbf", twin.L, 4), (b"\xf0\xa0\x80\x80", twin.L, 4),
        (b"\xf4\x8f\xbf\xbf", twin.L, 4), (b"\xf5\x80\x80\x80", twin.L, 4),
        (b"\xf7", twin.L, 1),
    ],
)
def test_char_at(data, cls, length):
    assert twin.char_at(data, 0) == (cls, length)


@pytest.mark.parametrize(
    "data,chunks",
    [
        # a lead byte swallows what follows, whatever it is (no validation)
        (b"a\xe3Ab c", [b"a\xe3Ab", b" c"]),
        (b"\xe3' s t", [b"\xe3' s", b" t"]),
        # cut at the end, classified by the lead byte alone or with the byte after it
        (b"x\xf0", [b"x\xf0"]), (b"x \xf0\x9f", [b"x", b" \xf0\x9f"]),
        (b"x\xe3\x80", [b"x", b"\xe3\x80"]), (b"x\xe2", [b"x", b"\xe2"]),
        # stray continuation bytes and 0xF8-0xFF are punctuation
        (b" \x80\x80\n\nx", [b" \x80\x80\n\n", b"x"]), (b"\xffab", [b"\xffab"]),
        (b"\x00\x00 x", [b"\x00\x00", b" x"]), (b"\x00x", [b"\x00x"]),
        # 0xC0/0xC1 and 0xF5-0xF7 are letters
        (b"\xc0\x80\xc1\x80", [b"\xc0\x80\xc1\x80"]), (b"1\xf5\x80\x80\x80", [b"1", b"\xf5\x80\x80\x80"]),
        (b"'\xe3", [b"'\xe3"]), (b"''s", [b"''", b"s"]),
    ],
)
def test_split_invalid_utf8(data, chunks):
    assert twin.split(data, "seed") == chunks


# --------------------------------------------------------------------------- twin vs oracle

TRICKY = [
    # contractions
    "'LL", "'Ll", "'lL", "'Ve", "'vE", "'RE", "'rE", "'S", "'D", "'M", "'T", "'dx", "'mm",
    "x's", " 's", "''s", "'''", "'", "'l", "'v", "'r", "'le", "'l l", "x'llama", "'tis",
    "it's'", "ROCK'N'ROLL", "we'd've", "can't't", "O'Neil's", "'s'", "' s", "\t's",
    "\n's", "1's", "'1", "'é", "'éa", "x'é", " 'é", "!'s", "'\u00a0s", "'\u2019s", "’s",
    # whitespace
    " ", "  ", "\t", "\n", "\r\n", "\n\r", " \n", "\n ", "  \n", "\n  ", " \r\n \r\n ",
    "a \r\n\r\n b", "a\t\tb", "\tb", "\t\tb", " \tb", "\t b", "a  ", "a \t", "a\n ",
    "a \n", "x \n \n y", " !!!\n\nx", " !!!\n\n", "!! \n", "a\x0b\x0cb", "\x0b\x0c",
    "\r\r\r", "a\r\rb", " \x0b\n\x0c y", "x    y", "x  \n", "\n\n\n\n", " \n\t\n x",
    "x \u00a0 y", "\u00a0", " \u00a0x", "\u3000x", " \u3000 x", "x\u2028y", "x\u0085y",
    # digits
    "1", "12", "123", "1234", "12345", "123456", "1234567", "a1", "1a", "a12b",
    " 1", " 12", "1 2", "1.2", "-1", "\u0661\u0662\u0663", "١٢", "²³", "٣4",
    # punctuation
    "...", " ...", "...\n", " ...\r\n\r\nx", "a...\n\n b", " (", " (a", "((a", "$a", " $a",
    "\"hello\"", "<a href='x'>", "#!/bin/sh\n", "x = {'a': 1}\n", "a_b", "__init__",
    "=>\n\n\n", " \x00\x01", "\x7f",
    # non-ASCII boundaries
    "\u0080", "\u00bf", "\u00c0", "\u00ff", "\u07ff", "\u0800", "\u1fff", "\u2000",
    "\u2014", "a\u2014b", " \u2014 ", "\u2fff", "\u3000", "\u303f", "\u3040", "\u3041",
    "\ud7ff", "\ue000", "\ufeff", "\uffff", "\U00010000", "\U0001efff", "\U0001f000",
    "\U0001f600", "\U0001ffff", "\U00020000", "\U0010ffff", "\U000e0001",
    "a\u0080b", "a\u00c0b", " \u00c0", " \u0080a", "x\U0001f600y", " \U0001f600\n\n",
    "\U0001f600\U0001f601 ok", "\U0001efff\U0001f000\U00020000",
    "\u00bfQu\u00e9?", "¡Hola!", "naïve café", "Straße", "İstanbul ıi", "\u212a\u212b",
    "\ufb00\ufb01", "\u01c5", "Ⅻ", "ǅungla",
    # scripts
    "日本語のテキスト。", "中文，测试。", "こんにちは、世界！", "한국어 텍스트", "Привет, мир!",
    "مرحبا بالعالم", "שלום עולם", "नमस्ते दुनिया", "สวัสดีชาวโลก", "Ελληνικά κείμενα",
    "e\u0301", "a\u0300\u0301b", " \u0301", "\u0301", "\u200d", "👨‍👩‍👧", "🇫🇷",
    "x\u200by", "\u00ad", "a\u00adb",
]


@pytest.mark.parametrize("text", TRICKY)
def test_twin_equals_oracle_tricky(text):
    check_against_oracle(text)
    for wrapped in (f"a{text}b", f" {text} ", f"{text}\n", f"'{text}'", f"{text}{text}"):
        check_against_oracle(wrapped)


def test_literal_pattern_is_literal():
    assert "\\u" not in ORACLE_PATTERN_LITERAL and "\\U" not in ORACLE_PATTERN_LITERAL
    ORACLE_PATTERN_LITERAL.encode("utf-8")  # no surrogates: a Rust &str can hold it
    assert "\\u3040-\\uFFFF" in ORACLE_PATTERN


# --------------------------------------------------------------------------- case folding

def test_long_s_is_the_only_case_fold():
    """The only non-ASCII code point that the oracle's (?i) lets stand for one of the
    contraction letters s d m t l v e r is U+017F."""
    every = "".join(chr(c) for c in range(0x80, 0x110000) if not 0xD800 <= c <= 0xDFFF)
    folds = {m.group() for m in regex.finditer(r"(?i:[sdmtlver])", every)}
    assert folds == {LONG_S}


def test_long_s_contraction():
    """The oracle regex's `(?i:[sdmt]|...)` uses Unicode simple case folding (as the
    Rust engines and Oniguruma do), under which U+017F 'ſ' matches 's': "'ſ" is a
    contraction, also when a letter follows.  The byte-level rules (twin and
    assembly) take C5 BF after an apostrophe as such an 's'."""
    for text in ("'ſa", "x'ſſ", "'ſpam", "'ſ", "'ſ.", "'ſ 1", "'ſ\n", " 'ſx", "a 'ſ", "'ſ'ſa"):
        assert twin.split(text.encode(), "seed") == [c.encode() for c in oracle_split(text)], text
    assert twin.split("'ſa".encode(), "seed") == ["'ſ".encode(), b"a"]
    # not the long s: other C5 xx letters, and a cut C5
    assert twin.split("'Ŀa".encode(), "seed") == ["'Ŀa".encode()]
    assert twin.split(b"'\xc5", "seed") == [b"'\xc5"]
    assert twin.split(b"'\xe5\xbf\x80x", "seed") == [b"'\xe5\xbf\x80x"]


# --------------------------------------------------------------------------- random text

ALPHABET = (
    "aAzZsSdDmMtTlLvVeErR'' \t\n\r\x0b\x0c  \n0123456789.,!?$(-_\"\x00\x7f"
    "\u0080\u0085\u00a0\u00bf\u00c0\u00e9\u00ff\u0131\u0130\u07ff\u0800\u0301\u0661"
    "\u1fff\u2000\u2014\u2019\u2028\u212a\u2fff\u3000\u3002\u303f\u3040\u3042\u4e2d"
    "\ud7ff\ue000\ufb00\ufeff\uffff\U00010000\U0001efff\U0001f000\U0001f600\U0001ffff"
    "\U00020000\U0010ffff\u0434\u0639\u05e9\u0928\u0e2a\ud55c" + LONG_S
)

def fast(max_examples: int) -> settings:
    return settings(max_examples=max_examples, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow])


@fast(1500)
@given(st.text(alphabet=ALPHABET, max_size=40))
@example("x  \n\n  y")
def test_twin_equals_oracle_random_alphabet(text):
    check_against_oracle(text)
    assert compiled_literal().findall(text) == compiled().findall(text)


@fast(1000)
@given(st.text(st.characters(exclude_categories=("Cs",))))
def test_twin_equals_oracle_random_text(text):
    check_against_oracle(text)
    assert compiled_literal().findall(text) == compiled().findall(text)


# --------------------------------------------------------------------------- any bytes

BYTE_PIECES = [
    b"a", b"Z", b"s", b"'", b" ", b"\t", b"\n", b"\r", b"0", b"9", b".", b"\x00", b"\x7f",
    b"\x80", b"\xbf", b"\xc0", b"\xc1", b"\xc2", b"\xc2\xa0", b"\xc3", b"\xc3\xa9", b"\xdf",
    b"\xe2", b"\xe2\x80", b"\xe2\x80\x94", b"\xe3", b"\xe3\x80", b"\xe3\x80\x82",
    b"\xe3\x81\x82", b"\xed\xa0\x80", b"\xef\xbf\xbf", b"\xf0", b"\xf0\x9f", b"\xf0\x9f\x98",
    b"\xf0\x9f\x98\x80", b"\xf0\x90\x80\x80", b"\xf4\x8f\xbf\xbf", b"\xf5", b"\xf7\xbf",
    b"\xf8", b"\xfe", b"\xff",
]


@fast(1000)
@given(st.binary(max_size=64))
def test_tiling_any_bytes(data):
    check_tiling(data)


@fast(1500)
@given(st.lists(st.sampled_from(BYTE_PIECES), max_size=30).map(b"".join))
def test_tiling_tricky_bytes(data):
    check_tiling(data)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        with pytest.raises(UnicodeDecodeError):
            oracle_split_bytes(data)
        return
    assert twin.split(data, "seed") == spec_split_via_oracle(text)


def test_tiling_large():
    data = bytes(range(256)) * 64 + b" " * 5000 + b"x" * 5000 + "日本".encode() * 1000
    check_tiling(data)
    check_tiling(data[::-1])
    assert twin.split(b"a" * 100_000, "seed") == [b"a" * 100_000]
    assert twin.split(b" " * 1000 + b"x", "seed") == [b" " * 999, b" x"]
    assert twin.split(b" " * 1000, "seed") == [b" " * 1000]
    assert twin.split(b"\n" * 7 + b"  ", "seed") == [b"\n" * 7, b"  "]  # last CR/LF, then the rest
    assert twin.split(b"x \t ", "seed") == [b"x", b" \t "]  # \s+(?!\S) takes all at the end


def test_oracle_bytes_rejects_invalid_utf8():
    for bad in (b"\x80", b"\xc0\xaf", b"\xed\xa0\x80", b"a\xe3", b"\xf5\x80\x80\x80"):
        with pytest.raises(UnicodeDecodeError):
            oracle_split_bytes(bad)
    assert oracle_split_bytes("don't".encode()) == [b"don", b"'t"]


# --------------------------------------------------------------------------- other engines

def test_literal_pattern_in_tokenizers():
    """The literal pattern in Hugging Face `tokenizers` (Oniguruma) splits like the oracle."""
    tokenizers = pytest.importorskip("tokenizers")
    split = tokenizers.pre_tokenizers.Split(
        tokenizers.Regex(ORACLE_PATTERN_LITERAL), behavior="isolated"
    )
    for text in TRICKY + [t for t, _ in SPEC_EXAMPLES] + ["'ſa", "x'ſſ"]:
        assert [c for c, _ in split.pre_tokenize_str(text)] == oracle_split(text), text


def test_literal_pattern_in_tiktoken():
    """The literal pattern in tiktoken (Rust fancy-regex, as in rustbpe): every oracle
    chunk of the texts is made one token, so the ids show where tiktoken cut."""
    tiktoken = pytest.importorskip("tiktoken")
    texts = TRICKY + [t for t, _ in SPEC_EXAMPLES] + ["'ſa", "x'ſſ"]
    ranks = {bytes([b]): b for b in range(256)}
    for text in texts:
        for chunk in oracle_split(text):
            ranks.setdefault(chunk.encode(), len(ranks))
    enc = tiktoken.Encoding("asmbpe-oracle", pat_str=ORACLE_PATTERN_LITERAL,
                            mergeable_ranks=ranks, special_tokens={})
    for text in texts:
        assert enc.encode_ordinary(text) == [ranks[c.encode()] for c in oracle_split(text)], text


# --------------------------------------------------------------------------- corpora

APOSTROPHE_LETTER = re.compile(r"'[^\W\d_]")
HEAD = 100_000        # bytes of each document looked at
FIRST = 200           # documents of each file compared whole (up to HEAD)
WINDOW = 100          # characters each side of an apostrophe in the sampled documents
ASCII_HITS = 2        # apostrophe + ASCII letter sites per sampled document


def _head(text: str) -> str:
    """The first HEAD bytes of text, cut back to a character boundary."""
    return text.encode("utf-8")[:HEAD].decode("utf-8", errors="ignore")


def corpus_samples(texts, full: bool):
    """(document index, text) pairs to compare, for one corpus file.

    The first FIRST documents, cut to HEAD bytes. Of the other documents, those with an
    apostrophe followed by a letter in their first HEAD bytes: whole (cut to HEAD) when
    `full`; otherwise windows of WINDOW characters around every apostrophe followed by a
    non-ASCII letter and around the first ASCII_HITS apostrophes followed by an ASCII
    letter (the whole selection is ~300 MB, beyond a test run of the pure-Python twin).
    """
    for i, text in enumerate(texts):
        if i < FIRST:
            yield i, _head(text)
            continue
        head = _head(text)
        hits = list(APOSTROPHE_LETTER.finditer(head))
        if not hits:
            continue
        if full:
            yield i, head
            continue
        ascii_hits = [m for m in hits if m.group()[1].isascii()][:ASCII_HITS]
        other = [m for m in hits if not m.group()[1].isascii()]
        spans = sorted((max(0, m.start() - WINDOW), m.end() + WINDOW) for m in ascii_hits + other)
        merged: list[list[int]] = []
        for a, b in spans:
            if merged and a <= merged[-1][1]:
                merged[-1][1] = max(merged[-1][1], b)
            else:
                merged.append([a, b])
        for a, b in merged:
            yield i, head[a:b]


def test_twin_equals_oracle_corpora(corpus_files, corpus_texts):
    full = os.environ.get("ASMBPE_TWIN_CORPUS") == "full"
    started = time.perf_counter()
    compared = nbytes = 0
    failures = []
    for path in corpus_files:
        for i, text in corpus_samples(corpus_texts(path), full):
            try:
                data = text.encode("utf-8")  # strict: only valid UTF-8 is compared
            except UnicodeEncodeError:
                continue
            want = spec_split_via_oracle(text)
            diff = first_difference(twin.split(data, "seed"), want, data)
            if diff is not None:
                failures.append(f"{path.name} document {i}: {diff}")
            compared += 1
            nbytes += len(data)
    print(
        f"\ncorpora: compared {compared} texts, {nbytes / 1e6:.1f} MB, "
        f"{time.perf_counter() - started:.1f} s",
        file=sys.stderr,
    )
    assert compared > 0
    assert not failures, f"{len(failures)} differences; first ones:\n" + "\n".join(failures[:5])
