"""The exact pre-tokenizers' naive Python twin (harness.dev.pretok_twin, SPEC §10) against
their oracle regexes (harness.dev.oracle.pattern_split: the published pattern strings run
by the `regex` module).

The twin takes its classes from harness.dev.unicode_classes; the `regex` module has its
own Unicode tables, possibly of another Unicode version. Code points on which the two
disagree (`DISAGREE`, computed here) are left out of the comparisons: documents that
contain one are skipped and counted, the sweep leaves them out.

Set ASMBPE_PRETOK_TWIN_CORPUS=full to compare every valid UTF-8 document of the corpora
whole (some 420 MB per pattern; about 20 minutes for the four). By default each pattern is
compared on a sample: the first documents of each file (cut to 100 KB) plus windows
around the first occurrences of every distinct non-ASCII character and around
apostrophes and digits next to non-ASCII text in the others.
"""

from __future__ import annotations

import functools
import itertools
import os
import sys
import time
import unicodedata

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

regex = pytest.importorskip("regex")

from harness.dev import pretok_twin as twin  # noqa: E402
from harness.dev import unicode_classes as uc  # noqa: E402
from harness.dev.oracle import compiled_pattern, pattern_split  # noqa: E402
from split_util import first_difference  # noqa: E402

PATTERN_NAMES = ("nanochat", "cl100k", "o200k", "gpt2")


# --------------------------------------------------------------------------- helpers

@functools.lru_cache(maxsize=None)
def regex_classes() -> dict[int, int]:
    """The class bits of every code point (surrogates excluded) as the `regex` module sees
    them."""
    cps = [c for c in range(0x110000) if not 0xD800 <= c <= 0xDFFF]
    text = "".join(map(chr, cps))
    bits = dict.fromkeys(cps, 0)
    for bit, pat in [(uc.LU_LT, r"[\p{Lu}\p{Lt}]"), (uc.LL, r"\p{Ll}"),
                     (uc.LM_LO, r"[\p{Lm}\p{Lo}]"), (uc.M, r"\p{M}"), (uc.N, r"\p{N}"),
                     (uc.WS, r"\s")]:
        for m in regex.finditer(pat, text):
            bits[ord(m.group())] |= bit
    return bits


@functools.lru_cache(maxsize=None)
def disagree() -> frozenset[str]:
    """Characters whose classes differ between harness.dev.unicode_classes and `regex`."""
    return frozenset(chr(c) for c, b in regex_classes().items() if b != uc.classes(c))




def check_tiling(data: bytes, pattern: str) -> list[bytes]:
    chunks = twin.split(data, pattern)
    assert b"".join(chunks) == data
    assert all(chunks), "empty chunk"
    ends = twin.split_offsets(data, pattern)
    assert ends == list(itertools.accumulate(len(c) for c in chunks))
    return chunks


def check_against_oracle(text: str, pattern: str) -> None:
    data = text.encode("utf-8")
    diff = first_difference(check_tiling(data, pattern), pattern_split(data, pattern), data)
    assert diff is None, f"{pattern}: {diff}"


# --------------------------------------------------------------------------- the patterns

def test_pattern_strings():
    assert twin.PATTERN_IDS == {"seed": 1, "nanochat": 2, "cl100k": 3, "o200k": 4, "gpt2": 5}
    assert set(twin.PATTERNS) == set(PATTERN_NAMES)
    assert twin.PATTERNS["nanochat"] == (
        r"""'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}+|\p{N}{1,2}| ?[^\s\p{L}\p{N}]++[\r\n]*|\s*[\r\n]|\s+(?!\S)|\s+""")
    assert twin.PATTERNS["gpt2"] == (
        r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+""")


def test_pattern_strings_are_tiktokens(monkeypatch):
    openai_public = pytest.importorskip("tiktoken_ext.openai_public")
    # The constructors load their ranks from the network; only pat_str is wanted.
    monkeypatch.setattr(openai_public, "load_tiktoken_bpe", lambda *a, **k: {})
    monkeypatch.setattr(openai_public, "data_gym_to_mergeable_bpe_ranks", lambda *a, **k: {})
    assert twin.PATTERNS["cl100k"] == openai_public.cl100k_base()["pat_str"]
    assert twin.PATTERNS["o200k"] == openai_public.o200k_base()["pat_str"]
    assert twin.GPT2_TIKTOKEN_PATTERN == openai_public.r50k_base()["pat_str"]


def test_fold_cases():
    """(?i) folds onto the contraction letters exactly as the twin assumes: only U+017F
    besides ASCII case (U+212A folds onto k, which no contraction uses)."""
    text = "".join(chr(c) for c in regex_classes() if c > 0x7F)
    for letter in "sdmtlvre":
        found = {ord(m) for m in regex.findall(f"(?i:{letter})", text)}
        assert found == ({0x17F} if letter == "s" else set()), (letter, found)
    assert regex.fullmatch("(?i:k)", "\u212a")
    assert set(twin.FOLD_TO_ASCII) == {0x17F, 0x212A}


def test_unicode_classes_interface():
    assert isinstance(uc.UNICODE_VERSION, str)
    assert (uc.LU_LT, uc.LL, uc.LM_LO, uc.M, uc.N, uc.WS) == (1, 2, 4, 8, 16, 32)
    assert uc.classes(ord("A")) == uc.LU_LT and uc.classes(ord("a")) == uc.LL
    assert uc.classes(0x01C5) == uc.LU_LT  # Lt
    assert uc.classes(ord("0")) == uc.N and uc.classes(0x2160) == uc.N  # Nd, Nl
    assert uc.classes(0x0301) == uc.M and uc.classes(0x3042) == uc.LM_LO
    assert uc.classes(0x20) == uc.WS and uc.classes(0x85) == uc.WS and uc.classes(0x1C) == 0
    assert uc.classes(0xFFFD) == 0 and uc.classes(0xD800) == 0


def test_disagreements_reported():
    """How far the classes and the `regex` module's tables differ (Unicode versions)."""
    d = disagree()
    print(f"\nunicode_classes {uc.UNICODE_VERSION} vs regex {regex.__version__}: "
          f"{len(d)} code points differ", file=sys.stderr)
    # Whatever the versions, ASCII and the White_Space list agree.
    assert not any(ord(c) < 0x80 or uc.classes(ord(c)) & uc.WS for c in d)


# --------------------------------------------------------------------------- hand-picked

ISSUE_CASES = [
    "cafe\u0301", "こんにちは、世界！", "مرحبا ٣٤٥", "नमस्ते दुनिया", "שָׁלוֹם", "a\xa0\xa0b",
    "µs and ºC", "Chapter Ⅻ", "① ② ③", "２０２４年", "𝟙𝟚𝟛", "it's", "IT'S", "'ſa",
    "   a", "a   ", "\r\n\r\n x", "x/y/", "ABCdef's", "/ \n",
    *("1234567"[:n] for n in range(1, 8)),
    *("x " + "1234567"[:n] + "a" for n in range(1, 8)),
]
MORE_CASES = [
    "", " ", "\n", "'", "'s", "'S", "'ſ", "'ſt", "'LL", "'Ve", "'rE", "I'll WE'RE they've",
    "don't", "DON'T", "Hello world", "$9.99", "  hello", "hello!!!", "(test)", "a... b",
    "x  \n\n  y", "emoji 😀😀 ok", "日本語のテキスト。", "  \n", "a \n", " \r\n", "\t\t",
    "foo   \t bar", "x\u3000\u3000y", "x\u2028y", "\u0301a", " \u0301", "'\u0301s",
    "HTMLParser's", "McDonald's", "ǅemal", "ǅ'S", "ΣΑΣ'ς", "a/b//c\n/", "!!/\r\n/x",
    "a\x00b", "a\x1cb\x1f", " \x85x", "x \u00a0", "1\u0660\u0661\u0662\u0663", "a1b2",
    "word\r\n\r\n", "   ", "a\n\n\n", "'''", "' s", "x'", "a'b'c", "Ⅻ'S", "ʰʰ'd",
]


@pytest.mark.parametrize("pattern", PATTERN_NAMES)
def test_hand_picked_cases(pattern):
    for text in ISSUE_CASES + MORE_CASES:
        check_against_oracle(text, pattern)


def test_some_known_splits():
    s = lambda text, p: [c.decode() for c in twin.split(text.encode(), p)]  # noqa: E731
    assert s("1234567", "nanochat") == ["12", "34", "56", "7"]
    assert s("1234567", "cl100k") == ["123", "456", "7"]
    assert s("1234567", "gpt2") == ["1234567"]
    assert s("'ſa", "nanochat") == ["'ſ", "a"]
    assert s("'ſa", "gpt2") == ["'", "ſa"]
    assert s("ABCdef's", "o200k") == ["ABCdef's"]
    assert s("a   ", "cl100k") == ["a", "   "]
    assert s("   a", "nanochat") == ["  ", " a"]
    assert s("x/y/", "o200k") == ["x", "/y", "/"]
    assert s("!/ x", "o200k") == ["!/", " x"]
    assert s("cafe\u0301", "o200k") == ["cafe\u0301"]
    assert s("cafe\u0301", "cl100k") == ["cafe", "\u0301"]


def test_gpt2_tiktoken_form_agrees():
    """tiktoken's possessive r50k pattern cuts the test texts as GPT-2's own does."""
    p = regex.compile(twin.GPT2_TIKTOKEN_PATTERN)
    for text in ISSUE_CASES + MORE_CASES + [sweep_text(range(0x20, 0x3000))]:
        assert p.findall(text) == compiled_pattern("gpt2").findall(text), text[:80]


def test_unknown_pattern():
    with pytest.raises(ValueError):
        twin.split(b"x", "seed")


# --------------------------------------------------------------------------- code point sweep

SEP = "\x00\n"   # punctuation then LF: ends every chunk, so contexts start afresh


def contexts(x: str) -> list[str]:
    return [
        "a" + x, " " + x, "'" + x, "1" + x, "A" + x, x + "'s", "e" + x + "e",
        "1" + x + "2", x + x + x + x, x + x + "a", " " + x + " a", "\r\n" + x + "\r\n",
        x + "\r\n\r\n", "!" + x + "/", x + "/" + x, "A" + x + "'S", x + "'S", "A" + x + "b'T",
        "'" + x + "x",
    ]


def sweep_text(cps) -> str:
    return SEP.join(SEP.join(contexts(chr(c))) for c in cps)


def sweep_end_texts(cps) -> list[str]:
    """Contexts at the end of the text (for \\s++$ and \\s+(?!\\S))."""
    out = []
    for c in cps:
        x = chr(c)
        out += ["a" + x, "a" + x + x, "a " + x, "a" + x + " ", x, x + "\n", "a" + x + "\r\n"]
    return out


def sweep_cps() -> tuple[list[int], int]:
    """Assigned code points (as unicodedata sees them; surrogates and most of the private
    use planes 15-16 left out: all Co, in no class) on which both tables agree, and the
    count left out for disagreeing."""
    d = disagree()
    cps, left_out = [], 0
    for c in range(0x110000):
        cat = unicodedata.category(chr(c))
        if cat == "Cs" or (cat == "Cn" and regex_classes()[c] == 0):
            continue
        if c >= 0xF0000 and c % 251:
            continue
        if chr(c) in d:
            left_out += 1
            continue
        cps.append(c)
    return cps, left_out


@pytest.mark.slow
@pytest.mark.parametrize("pattern", PATTERN_NAMES)
def test_code_point_sweep(pattern):
    started = time.perf_counter()
    cps, left_out = sweep_cps()
    step = 4096
    for i in range(0, len(cps), step):
        check_against_oracle(sweep_text(cps[i:i + step]), pattern)
    # The end-of-text contexts only matter for whitespace; run them for every code point
    # classed as whitespace or as nothing, one text each, and a sample of the others.
    end_cps = [c for c in cps if uc.classes(c) in (0, uc.WS)][::7] + [
        c for c in cps if uc.classes(c) & uc.WS]
    for text in sweep_end_texts(end_cps[:3000]):
        check_against_oracle(text, pattern)
    print(f"\n{pattern}: swept {len(cps)} code points, {left_out} left out (tables differ), "
          f"{time.perf_counter() - started:.1f} s", file=sys.stderr)


@pytest.mark.parametrize("pattern", PATTERN_NAMES)
def test_code_point_sweep_sample(pattern):
    """A fast version of the sweep: Latin-1, the special code points, one code point of
    each class combination per block of 256, all whitespace."""
    d = disagree()
    seen, cps = set(), list(range(0x80, 0x250))
    for c in range(0x250, 0x110000):
        key = (c >> 8, uc.classes(c))
        if key not in seen and chr(c) not in d and not 0xD800 <= c <= 0xDFFF:
            seen.add(key)
            cps.append(c)
    cps += [c for c in range(0x110000) if uc.classes(c) & uc.WS] + [0x17F, 0x212A, 0x130, 0x131]
    for i in range(0, len(cps), 4096):
        check_against_oracle(sweep_text(cps[i:i + 4096]), pattern)
    for text in sweep_end_texts([c for c in cps if uc.classes(c) in (0, uc.WS)][:500]):
        check_against_oracle(text, pattern)


# --------------------------------------------------------------------------- invalid UTF-8

INVALID = {
    "stray continuation": [b"\x80", b"\xbf", b"\x80\x80\xbf"],
    "C0/C1 leads": [b"\xc0\xaf", b"\xc1\xbf", b"\xc0"],
    "F5-FF": [b"\xf5\x80\x80\x80", b"\xf8", b"\xfe\xff"],
    "overlong": [b"\xe0\x80\xaf", b"\xe0\x9f\xbf", b"\xf0\x80\x80\xaf", b"\xf0\x8f\xbf\xbf"],
    "surrogate": [b"\xed\xa0\x80", b"\xed\xbf\xbf"],
    "above U+10FFFF": [b"\xf4\x90\x80\x80", b"\xf7\xbf\xbf\xbf"],
    "truncated": [b"\xc3", b"\xe3\x81", b"\xe3", b"\xf0\x9f\x98", b"\xf0\x9f", b"\xf0"],
}
VALID_PARTS = ["", "a", "hello", " ", "  ", "'", "'s", "1", "12345", "!!", "\n", "\r\n ",
               "日本", "\u0301", "ǅ", "/", " x", "é"]


def reference_offsets(parts: list[tuple[str, bytes | None]], pattern: str) -> list[int]:
    """Oracle chunk ends on the text in which each invalid byte is a U+FFFD, mapped back to
    byte offsets. parts: (valid text, None) or ("", invalid bytes)."""
    text, lengths = [], []
    for valid, bad in parts:
        if bad is None:
            text.append(valid)
            lengths += [len(ch.encode()) for ch in valid]
        else:
            text.append("\ufffd" * len(bad))
            lengths += [1] * len(bad)
    ends, pos, k = [], 0, 0
    for chunk in compiled_pattern(pattern).findall("".join(text)):
        pos += sum(lengths[k:k + len(chunk)])
        k += len(chunk)
        ends.append(pos)
    return ends


def invalid_cases():
    for kind, frags in INVALID.items():
        for frag in frags:
            for before in VALID_PARTS:
                for after in ("", "a", " ", "1", "'s", "\n", "é", "\u0301x", " y"):
                    yield kind, [(before, None), ("", frag), (after, None)]
            yield kind, [("", frag)]
            yield kind, [("", frag), ("a", None), ("", frag), (" ", None), ("", frag)]
            yield kind, [("x  ", None), ("", frag), ("  ", None)]


@pytest.mark.parametrize("pattern", PATTERN_NAMES)
def test_invalid_utf8(pattern):
    n = 0
    for kind, parts in invalid_cases():
        data = b"".join(v.encode() if b is None else b for v, b in parts)
        for _, bad in parts:   # each invalid byte decodes alone, in no class
            if bad is not None:
                assert twin.decode(bad) == [(None, 1)] * len(bad), (kind, bad)
        chunks = check_tiling(data, pattern)
        got = twin.split_offsets(data, pattern)
        want = reference_offsets(parts, pattern)
        assert got == want, (kind, data, chunks)
        n += 1
    assert n > 500


def test_decode_valid_matches_python():
    text = "a\x7f\u0080\u07ff\u0800\ud7ff\ue000\uffff\U00010000\U0010ffff日本😀"
    assert twin.decode(text.encode()) == [(ord(c), len(c.encode())) for c in text]


# --------------------------------------------------------------------------- hypothesis

@pytest.mark.parametrize("pattern", PATTERN_NAMES)
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.one_of(
    st.binary(max_size=64),
    st.lists(st.one_of(st.binary(max_size=4),
                       st.text(max_size=6).map(lambda s: s.encode("utf-8", "surrogatepass")),
                       st.sampled_from([b" ", b"'s", b"\r\n", b"/", b"\xe3\x81", b"\xed\xa0\x80"])),
             max_size=12).map(b"".join),
))
@example(data=b"")
@example(data=b"\xff" * 10)
def test_random_bytes_tile(pattern, data):
    check_tiling(data, pattern)


@pytest.mark.parametrize("pattern", PATTERN_NAMES)
@settings(max_examples=300, deadline=None)
@given(text=st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=40))
def test_random_text_equals_oracle(pattern, text):
    if any(ch in disagree() for ch in text):
        return
    check_against_oracle(text, pattern)


# --------------------------------------------------------------------------- corpora

HEAD = 100_000
FIRST = 20        # documents of each file compared whole (up to HEAD)
WINDOW = 40       # characters each side of a sampled site
PER_CHAR = 3      # sampled occurrences of each distinct non-ASCII character


def _head(text: str) -> str:
    return text.encode("utf-8", "surrogatepass")[:HEAD].decode("utf-8", errors="ignore")


def corpus_samples(texts, seen: dict[str, int], full: bool):
    """(document index, text) pairs to compare for one corpus file (see the module doc)."""
    apostrophe_or_digit = regex.compile(r"['0-9][^\x00-\x7f]|[^\x00-\x7f]['0-9]")
    for i, text in enumerate(texts):
        if full:
            yield i, text
            continue
        if i < FIRST:
            yield i, _head(text)
            continue
        head = _head(text)
        if head.isascii():
            continue
        sites = []
        for ch in set(head) - {c for c, n in seen.items() if n >= PER_CHAR}:
            if ord(ch) > 0x7F:
                seen[ch] = seen.get(ch, 0) + 1
                sites.append(head.index(ch))
        sites += [m.start() for m in apostrophe_or_digit.finditer(head)][:20]
        spans = sorted((max(0, s - WINDOW), s + WINDOW) for s in sites)
        merged: list[list[int]] = []
        for a, b in spans:
            if merged and a <= merged[-1][1]:
                merged[-1][1] = max(merged[-1][1], b)
            else:
                merged.append([a, b])
        for a, b in merged:
            yield i, head[a:b]


@pytest.mark.parametrize("pattern", PATTERN_NAMES)
def test_twin_equals_oracle_corpora(pattern, corpus_files, corpus_texts):
    full = os.environ.get("ASMBPE_PRETOK_TWIN_CORPUS") == "full"
    started = time.perf_counter()
    compared = nbytes = skipped_invalid = 0
    skipped: dict[str, int] = {}
    failures = []
    d = disagree()
    for path in corpus_files:
        seen: dict[str, int] = {}
        for i, text in corpus_samples(corpus_texts(path), seen, full):
            try:
                data = text.encode("utf-8")  # strict: only valid UTF-8 is compared
            except UnicodeEncodeError:
                skipped_invalid += 1
                continue
            if not text.isascii() and not d.isdisjoint(text):
                for ch in d.intersection(text):
                    skipped[ch] = skipped.get(ch, 0) + 1
                skipped[""] = skipped.get("", 0) + 1
                continue
            diff = first_difference(twin.split(data, pattern), pattern_split(data, pattern), data)
            if diff is not None:
                failures.append(f"{path.name} document {i}: {diff}")
            compared += 1
            nbytes += len(data)
    print(
        f"\n{pattern} corpora{' (full)' if full else ''}: compared {compared} texts, "
        f"{nbytes / 1e6:.1f} MB, {time.perf_counter() - started:.1f} s; skipped "
        f"{skipped.pop('', 0)} with code points the tables disagree on "
        f"({', '.join(f'U+{ord(c):04X}' for c in sorted(skipped))}), "
        f"{skipped_invalid} not valid UTF-8",
        file=sys.stderr,
    )
    assert compared > 0
    assert not failures, f"{len(failures)} differences; first ones:\n" + "\n".join(failures[:5])
