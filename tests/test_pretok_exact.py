"""The exact pre-tokenizers in assembly (asm/pretok_exact.asm, SPEC §10) against their
twin (harness.dev.pretok_twin) and their oracles (the published pattern strings run by the
`regex` module): hand-picked texts, a code point sweep, invalid UTF-8 of every kind,
hypothesis, and every valid UTF-8 document of every shared corpus. checkasm's entries
(asmbpe_split_offsets:NAME, asmbpe_pretok_next:NAME: guard pages, every alignment, the
callee-saved registers) run here too.

The library is called directly (asmbpe_split_offsets with the pre-tokenizer's id), so
these tests hold the kernel itself; the public harness.split_offsets is tested elsewhere.
Code points on which the `regex` module's Unicode tables differ from the project's
(docs/UNICODE.md) are left out of the oracle comparisons, as in tests/test_pretok_twin.py.
"""
from __future__ import annotations

import os
import random
import sys
import time

import numpy as np
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

sys.path.insert(0, os.path.dirname(__file__))
from harness._lib import ffi, lib  # noqa: E402
from harness.buffers import Padded  # noqa: E402
from harness.dev import checkasm  # noqa: E402
from harness.dev import pretok_twin as twin  # noqa: E402
from harness.dev.oracle import compiled_pattern  # noqa: E402
from split_util import first_difference  # noqa: E402
from test_pretok_twin import (  # noqa: E402
    PATTERN_NAMES, disagree, invalid_cases, reference_offsets, sweep_cps, sweep_end_texts,
    sweep_text)

IDS = twin.PATTERN_IDS


def asm_offsets(data: bytes, pattern: str) -> list[int]:
    buf = Padded(data)
    n = len(data)
    out = np.zeros(max(n, 1), dtype=np.uint64)
    got = lib().asmbpe_split_offsets(buf.ptr, n, 0, ffi.from_buffer("uint64_t[]", out), max(n, 1),
                                     IDS[pattern])
    assert got >= 0
    return out[:got].tolist()


def asm_next_offsets(data: bytes, pattern: str) -> list[int]:
    buf = Padded(data)
    ends, pos = [], 0
    while pos < len(data):
        pos = lib().asmbpe_pretok_next(buf.ptr, len(data), pos, IDS[pattern])
        ends.append(pos)
    return ends


def oracle_offsets(data: bytes, pattern: str) -> list[int]:
    ends, pos = [], 0
    for chunk in compiled_pattern(pattern).findall(data.decode("utf-8")):
        pos += len(chunk.encode("utf-8"))
        ends.append(pos)
    return ends


def chunks(data: bytes, ends: list[int]) -> list[bytes]:
    return [data[a:b] for a, b in zip([0] + ends[:-1], ends)]


def check_oracle(text: str, pattern: str) -> None:
    data = text.encode("utf-8")
    got, want = asm_offsets(data, pattern), oracle_offsets(data, pattern)
    diff = first_difference(chunks(data, got), chunks(data, want), data)
    assert diff is None, f"{pattern}: {diff}"


HAND_PICKED = [
    "Hello world", "don't", "I'll WE'RE they've", "'sam", "123456", "$9.99", "  hello",
    "hello!!!", "(test)", "a... b", "x  \n\n  y", "emoji 😀😀 ok", "日本語のテキスト。",
    "cafe\u0301", "こんにちは、世界！", "مرحبا ٣٤٥", "नमस्ते दुनिया", "שָׁלוֹם", "a\xa0\xa0b",
    "µs and ºC", "Chapter Ⅻ", "① ② ③", "２０２４年", "𝟙𝟚𝟛", "HelloWorld ABCdef aBC",
    "'S 'ſ x'ſ", "a/b//c\r\n/", "  \n", " \r\n\r\n  ", "tab\tx \u3000y", "\u0301abc",
    "!\u0301x", "\u0301ABC.", "ǅungla", "1234567 12 1", "x\u2028y\u0085z", "  ", "\n",
]


@pytest.mark.parametrize("pattern", PATTERN_NAMES)
def test_hand_picked(pattern):
    for text in HAND_PICKED:
        data = text.encode()
        want = twin.split_offsets(data, pattern)
        assert asm_offsets(data, pattern) == want, text
        assert asm_next_offsets(data, pattern) == want, text
        check_oracle(text, pattern)


def test_unknown_id_is_refused():
    buf = Padded(b"abc")
    out = np.zeros(4, dtype=np.uint64)
    for bad in (0, 6, 1 << 40):
        got = lib().asmbpe_split_offsets(buf.ptr, 3, 0, ffi.from_buffer("uint64_t[]", out), 4, bad)
        assert got == -1, bad


@pytest.mark.parametrize("pattern", PATTERN_NAMES)
def test_code_point_sweep(pattern):
    """Every assigned code point (sampled in the private use planes) in the contexts that
    reach every alternative, and at the end of the text."""
    cps, _ = sweep_cps()
    for i in range(0, len(cps), 8192):
        check_oracle(sweep_text(cps[i:i + 8192]), pattern)
    for text in sweep_end_texts(cps[::5]):
        check_oracle(text, pattern)


@pytest.mark.parametrize("pattern", PATTERN_NAMES)
def test_invalid_utf8(pattern):
    n = 0
    for kind, parts in invalid_cases():
        data = b"".join(v.encode() if b is None else b for v, b in parts)
        want = reference_offsets(parts, pattern)
        assert asm_offsets(data, pattern) == want, (kind, data)
        assert asm_next_offsets(data, pattern) == want, (kind, data)
        n += 1
    assert n > 500


@pytest.mark.parametrize("pattern", PATTERN_NAMES)
@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.one_of(
    st.binary(max_size=80),
    st.lists(st.one_of(st.binary(max_size=4),
                       st.text(max_size=6).map(lambda s: s.encode("utf-8", "surrogatepass")),
                       st.sampled_from([b" ", b"'s", b"'S", b"\r\n", b"/", b"\xe3\x81", b"\xed\xa0\x80",
                                        b"\xc5\xbf", b"\xe3\x80\x80", b"  ", b"12345"])),
             max_size=16).map(b"".join),
))
@example(data=b"")
@example(data=b"\xff" * 10)
def test_random_bytes_equal_twin(pattern, data):
    """Any bytes: the chunks tile them and equal the twin's (page ends and alignments are
    checkasm's)."""
    want = twin.split_offsets(data, pattern)
    assert asm_offsets(data, pattern) == want
    assert asm_next_offsets(data, pattern) == want


# Fragments that reach the ASCII windows' rules (contractions, suffixes after suffixes,
# O runs with [\r\n/]* tails, case changes, digit runs, whitespace runs) and the
# characters that stop a window; texts of 64 bytes and more, so that windows run.
FRAGMENTS = ["'s", "'d", "'S", "'re", "'LL", "'", "''", "\n", "\r\n", "/", "//", ":", "!", ".",
             ",", "ABC", "Abc", "abc", "aBc", "x", "X", "1", "12", "1234", " ", "  ", "\t", " \n"]
NON_ASCII = ["é", "日本", "\u0301", "ǅ", "\xa0", "\u3000", "😀", "Ⅻ", "٣"]
# 2-byte letters the windows take (WIN_L2) and the 2-byte characters next to them that
# they must not: U+00D7 and U+00F7 among the 0xC3 letters, the long s after an apostrophe
TWO_BYTE = ["é", "×", "÷a", "Привет", "ĳ", "ڈ", "'ſ", "ſ", "Ö", "ǅ", "µ", "\xa0",
            # and the 3-byte punctuation they take (WIN_P3), with its white space neighbours
            "’", "“", "”", "—", " — ", "…", "’s", "x’", "\u2009", "\u200b", "\u2028", "\u202f"]


@pytest.mark.parametrize("pattern", PATTERN_NAMES)
def test_windows_equal_twin(pattern):
    """1,500 seeded random texts of 10-120 fragments each (40% ASCII only, 30% with the
    2-byte letters the windows take, 30% with any character). A seeded loop
    rather than hypothesis: hypothesis' examples shrink towards short texts, while the
    window rules need many fragments in one 64-byte window (this loop finds, for example,
    a second [\\r\\n/]* seed in one tail, or a contraction suffix right after another)."""
    rng = random.Random(2026)
    for _ in range(1500):
        pool = (FRAGMENTS if rng.random() < 0.4 else FRAGMENTS + TWO_BYTE if rng.random() < 0.5
                else FRAGMENTS + TWO_BYTE + NON_ASCII + ["\xff", "\xe3\x81"])
        parts = [rng.choice(pool) for _ in range(rng.randrange(10, 120))]
        data = b"".join(p.encode("latin-1") if p in ("\xff", "\xe3\x81") else p.encode()
                        for p in parts)
        assert asm_offsets(data, pattern) == twin.split_offsets(data, pattern), data


@pytest.mark.parametrize("pattern", PATTERN_NAMES)
def test_checkasm(pattern):
    for fn in ("asmbpe_split_offsets", "asmbpe_pretok_next"):
        lines: list[str] = []
        ok = checkasm.run_checks(seed=2026, pattern=f"{fn}:{pattern}", n_random=2000,
                                 out=lines.append)
        assert ok, "\n".join(lines)


@pytest.mark.parametrize("pattern", PATTERN_NAMES)
def test_every_valid_corpus_document(pattern, corpus_files, corpus_texts):
    """Each pattern equals its oracle on every valid UTF-8 document of every shared corpus
    (documents holding a code point the regex module's tables disagree on are counted and
    skipped)."""
    d = disagree()
    started = time.perf_counter()
    compared = nbytes = invalid = skipped = 0
    failures = []
    for path in corpus_files:
        for i, text in enumerate(corpus_texts(path)):
            try:
                data = text.encode("utf-8")
            except UnicodeEncodeError:
                invalid += 1
                continue
            if not text.isascii() and not d.isdisjoint(text):
                skipped += 1
                continue
            got, want = asm_offsets(data, pattern), oracle_offsets(data, pattern)
            if got != want:
                failures.append(f"{path.name} document {i}: "
                                f"{first_difference(chunks(data, got), chunks(data, want), data)}")
            compared += 1
            nbytes += len(data)
    print(f"\n{pattern}: {compared} documents, {nbytes / 1e6:.1f} MB equal the oracle "
          f"({skipped} skipped for code points the tables disagree on, {invalid} not valid "
          f"UTF-8), {time.perf_counter() - started:.1f} s", file=sys.stderr)
    assert compared > 0
    assert not failures, f"{len(failures)} differences; first ones:\n" + "\n".join(failures[:5])
