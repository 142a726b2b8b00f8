r"""The naive Python twin of the exact pre-tokenizers (SPEC §10): nanochat (id 2),
cl100k (id 3), o200k (id 4) and gpt2 (id 5). The seed pre-tokenizer (id 1, SPEC §3) has
its own twin in `harness.dev.twin`.

Written by hand from the SPEC for clarity rather than speed; no regex engine is used.
The tests hold it to the pattern strings in `PATTERNS` run by the `regex` module
(`harness.dev.oracle.pattern_split`).

Characters. The bytes are decoded as strict UTF-8 (`decode`): a well-formed sequence
(no overlong form, no surrogate, nothing above U+10FFFF, not cut short) is one character
with its code point; every other byte (stray continuation byte, 0xC0, 0xC1, 0xF5-0xFF, the
lead and continuation bytes of an overlong, surrogate, too large or truncated sequence)
is a character of its own with no code point (None), in no class: it behaves as U+FFFD
would. So the chunks tile any byte string.

Classes come from `harness.dev.unicode_classes.classes(cp)` (bits LU_LT, LL, LM_LO, M, N,
WS): \p{L} = LU_LT|LL|LM_LO, \p{N} = N, \p{M} = M, \s = WS.

Matching. At each chunk start the pattern's alternatives are tried in order, each written
as a small function `(t, k) -> end or None` over character indexes, with the regex
engine's semantics spelled out: a possessive quantifier takes the longest run and never
gives back; a greedy one takes the longest run and gives back one character at a time
until the rest of the alternative matches; an optional prefix `x?` is tried with x first,
then without. `(?i:...)` folds as the engines do (Unicode simple case folding): besides
ASCII case, U+017F LATIN SMALL LETTER LONG S is an 's' (and U+212A KELVIN SIGN a 'k', which
no contraction uses); no other code point folds onto s t d m l v e r.
"""

from __future__ import annotations

from typing import Callable, Optional

from ..pretokenizers import EXACT_PATTERNS, GPT2_TIKTOKEN_PATTERN, PRETOKENIZERS
from .unicode_classes import LL, LM_LO, LU_LT, M, N, WS, classes

__all__ = ["PATTERNS", "PATTERN_IDS", "GPT2_TIKTOKEN_PATTERN", "decode", "split",
           "split_offsets"]

# The pattern strings of SPEC §10 and the ids live in the product's registry
# (harness.pretokenizers); these names are kept for the tests and tools that use them.
PATTERNS: dict[str, str] = EXACT_PATTERNS
PATTERN_IDS: dict[str, int] = {p.name: p.id for p in PRETOKENIZERS}

# --------------------------------------------------------------------------- characters

LETTER = LU_LT | LL | LM_LO               # \p{L}
UPPERISH = LU_LT | LM_LO | M              # o200k's [\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]
LOWERISH = LL | LM_LO | M                 # o200k's [\p{Ll}\p{Lm}\p{Lo}\p{M}]

CR, LF, SPACE, APOSTROPHE, SLASH = 0x0D, 0x0A, 0x20, 0x27, 0x2F

# Unicode simple case folding onto ASCII letters, beyond ASCII case (as `regex`,
# fancy-regex and Oniguruma apply it inside (?i:...)).
FOLD_TO_ASCII = {0x017F: ord("s"), 0x212A: ord("k")}


def decode(data: bytes) -> list[tuple[Optional[int], int]]:
    """(code point, byte length) of each character of data; (None, 1) for each byte that
    is not part of a well-formed UTF-8 sequence (Unicode Table 3-7)."""
    out: list[tuple[Optional[int], int]] = []
    n = len(data)
    i = 0
    while i < n:
        b = data[i]
        if b < 0x80:
            out.append((b, 1))
            i += 1
            continue
        # (length, lowest and highest allowed second byte) by lead byte
        if 0xC2 <= b <= 0xDF:
            length, lo, hi, cp = 2, 0x80, 0xBF, b & 0x1F
        elif b == 0xE0:
            length, lo, hi, cp = 3, 0xA0, 0xBF, 0          # no overlong
        elif b == 0xED:
            length, lo, hi, cp = 3, 0x80, 0x9F, 0x0D       # no surrogate
        elif 0xE1 <= b <= 0xEF:
            length, lo, hi, cp = 3, 0x80, 0xBF, b & 0x0F
        elif b == 0xF0:
            length, lo, hi, cp = 4, 0x90, 0xBF, 0          # no overlong
        elif 0xF1 <= b <= 0xF3:
            length, lo, hi, cp = 4, 0x80, 0xBF, b & 0x07
        elif b == 0xF4:
            length, lo, hi, cp = 4, 0x80, 0x8F, 4          # nothing above U+10FFFF
        else:  # 0x80-0xBF stray continuation, 0xC0 0xC1 (overlong), 0xF5-0xFF
            out.append((None, 1))
            i += 1
            continue
        ok = i + length <= n and lo <= data[i + 1] <= hi and all(
            0x80 <= data[j] <= 0xBF for j in range(i + 2, i + length))
        if not ok:
            out.append((None, 1))   # only the lead byte; what follows is looked at anew
            i += 1
            continue
        for j in range(i + 1, i + length):
            cp = (cp << 6) | (data[j] & 0x3F)
        out.append((cp, length))
        i += length
    return out


class _Text:
    """The characters of one byte string: code points (None for an invalid byte), class
    bits and byte start offsets (starts[n] == len(data))."""

    def __init__(self, data: bytes):
        chars = decode(data)
        self.n = len(chars)
        self.cp = [cp for cp, _ in chars]
        self.cls = [0 if cp is None else classes(cp) for cp in self.cp]
        self.starts = [0]
        for _, length in chars:
            self.starts.append(self.starts[-1] + length)

    def has(self, k: int, mask: int) -> bool:
        """Character k exists and is in one of the classes of mask."""
        return k < self.n and bool(self.cls[k] & mask)

    def is_cp(self, k: int, *cps: int) -> bool:
        return k < self.n and self.cp[k] in cps

    def run(self, k: int, test: Callable[[int], bool]) -> int:
        """End of the longest run of characters from k for which test(index) holds."""
        while k < self.n and test(k):
            k += 1
        return k

    def run_of(self, k: int, mask: int) -> int:
        while k < self.n and self.cls[k] & mask:
            k += 1
        return k

    def folded(self, k: int) -> Optional[int]:
        """Code point of character k under (?i) folding onto ASCII lower case."""
        if k >= self.n or self.cp[k] is None:
            return None
        cp = self.cp[k]
        if 0x41 <= cp <= 0x5A:
            return cp + 0x20
        return FOLD_TO_ASCII.get(cp, cp)


# --------------------------------------------------------------------------- pieces

def _not_crlf_letter_number(t: _Text, k: int) -> bool:
    r"""[^\r\n\p{L}\p{N}] at k."""
    return k < t.n and not t.is_cp(k, CR, LF) and not t.cls[k] & (LETTER | N)


def _other(t: _Text, k: int) -> bool:
    r"""[^\s\p{L}\p{N}] at k."""
    return k < t.n and not t.cls[k] & (WS | LETTER | N)


def _contraction_fold(t: _Text, k: int) -> Optional[int]:
    r"""'(?i:[sdmt]|ll|ve|re)  (o200k's (?i:'s|'t|'re|'ve|'m|'ll|'d) is the same set)."""
    if not t.is_cp(k, APOSTROPHE):
        return None
    a, b = t.folded(k + 1), t.folded(k + 2)
    if a is not None and chr(a) in "sdmt":
        return k + 2
    if a is not None and b is not None and chr(a) + chr(b) in ("ll", "ve", "re"):
        return k + 3
    return None


def _contraction_case(t: _Text, k: int) -> Optional[int]:
    r"""'s|'t|'re|'ve|'m|'ll|'d  (GPT-2: case-sensitive)."""
    if not t.is_cp(k, APOSTROPHE):
        return None
    a = t.cp[k + 1] if k + 1 < t.n else None
    b = t.cp[k + 2] if k + 2 < t.n else None
    if a is not None and chr(a) in "stmd":
        return k + 2
    if a is not None and b is not None and chr(a) + chr(b) in ("re", "ve", "ll"):
        return k + 3
    return None


def _possessive_prefix_letters(t: _Text, k: int) -> Optional[int]:
    r"""[^\r\n\p{L}\p{N}]?+\p{L}+  (and cl100k's \p{L}++: the same, nothing follows).

    The prefix is possessive: when the character at k can be it, it is taken and never
    given back, so the match fails if no letter follows it."""
    j = k + 1 if _not_crlf_letter_number(t, k) else k
    end = t.run_of(j, LETTER)
    return end if end > j else None


def _numbers(limit: Optional[int]) -> Callable[[_Text, int], Optional[int]]:
    r"""\p{N}{1,limit} (greedy or possessive alike: nothing follows); \p{N}+ if None."""
    def numbers(t: _Text, k: int) -> Optional[int]:
        end = k
        while (limit is None or end - k < limit) and t.has(end, N):
            end += 1
        return end if end > k else None
    numbers.__doc__ = rf"\p{{N}}{{1,{limit}}}" if limit else r"\p{N}+"
    return numbers


def _space_prefix(t: _Text, k: int) -> list[int]:
    r"""Where the rest starts after ` ?`: greedy, so with the space first, then without."""
    return [k + 1, k] if t.is_cp(k, SPACE) else [k]


def _punctuation_crlf(t: _Text, k: int) -> Optional[int]:
    r""" ?[^\s\p{L}\p{N}]++[\r\n]*  (cl100k: [\r\n]*+, the same at the end)."""
    for j in _space_prefix(t, k):
        end = t.run(j, lambda i: _other(t, i))
        if end > j:
            return t.run(end, lambda i: t.cp[i] in (CR, LF))
    return None


def _space_then_crlf(t: _Text, k: int) -> Optional[int]:
    r"""\s*[\r\n]: \s* gives back until a CR or LF follows, so the match ends just after
    the last CR/LF of the whitespace run."""
    for j in range(t.run_of(k, WS), k - 1, -1):       # \s* covers k..j-1
        if t.is_cp(j, CR, LF):
            return j + 1
    return None


def _space_then_crlf_run(t: _Text, k: int) -> Optional[int]:
    r"""\s*[\r\n]+ (o200k): \s* gives back until [\r\n]+ matches, then takes its run."""
    for j in range(t.run_of(k, WS), k - 1, -1):
        if t.is_cp(j, CR, LF):
            return t.run(j, lambda i: t.cp[i] in (CR, LF))
    return None


def _space_not_before_nonspace(t: _Text, k: int) -> Optional[int]:
    r"""\s+(?!\S): the whole whitespace run at the end of the text, else the run less its
    last character (given back so that whitespace follows), else no match."""
    for j in range(t.run_of(k, WS), k, -1):           # \s+ covers k..j-1
        if j == t.n or t.has(j, WS):
            return j
    return None


def _space_run(t: _Text, k: int) -> Optional[int]:
    r"""\s+"""
    end = t.run_of(k, WS)
    return end if end > k else None


def _space_run_to_end(t: _Text, k: int) -> Optional[int]:
    r"""\s++$: the whole whitespace run (possessive), if it reaches the end of the text.
    ($ would also match before a final LF, but that LF would be in the run.)"""
    end = t.run_of(k, WS)
    return end if end > k and end == t.n else None


def _one_space(t: _Text, k: int) -> Optional[int]:
    r"""\s"""
    return k + 1 if t.has(k, WS) else None


# o200k's letter alternatives --------------------------------------------------------

def _o200k_prefix(t: _Text, k: int) -> list[int]:
    r"""Where the rest starts after [^\r\n\p{L}\p{N}]? (greedy: with it first)."""
    return [k + 1, k] if _not_crlf_letter_number(t, k) else [k]


def _o200k_lower_words(t: _Text, k: int) -> Optional[int]:
    r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?

    The upper-ish run is greedy: it gives back one character at a time until a
    lower-ish character follows (Lm, Lo and M are in both classes); the lower-ish run
    then takes all it can and the contraction is optional, so they never need to give
    back."""
    for j in _o200k_prefix(t, k):
        for s in range(t.run_of(j, UPPERISH), j - 1, -1):  # upper-ish covers j..s-1
            if t.has(s, LOWERISH):
                end = t.run_of(s, LOWERISH)
                return _contraction_fold(t, end) or end
    return None


def _o200k_upper_words(t: _Text, k: int) -> Optional[int]:
    r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?

    Everything after the upper-ish run is optional, so its longest run is kept."""
    for j in _o200k_prefix(t, k):
        upper = t.run_of(j, UPPERISH)
        if upper > j:
            end = t.run_of(upper, LOWERISH)
            return _contraction_fold(t, end) or end
    return None


def _o200k_punctuation(t: _Text, k: int) -> Optional[int]:
    r""" ?[^\s\p{L}\p{N}]+[\r\n/]*: greedy, but what follows the [^...]+ run always
    matches, so only the optional space may be given back."""
    for j in _space_prefix(t, k):
        end = t.run(j, lambda i: _other(t, i))
        if end > j:
            return t.run(end, lambda i: t.cp[i] in (CR, LF, SLASH))
    return None


# GPT-2's alternatives ----------------------------------------------------------------

def _space_then(mask: Optional[int]) -> Callable[[_Text, int], Optional[int]]:
    r""" ?X+ for X a class mask, or [^\s\p{L}\p{N}] when mask is None; the space is
    given back when X does not follow it."""
    def alternative(t: _Text, k: int) -> Optional[int]:
        for j in _space_prefix(t, k):
            if mask is None:
                end = t.run(j, lambda i: _other(t, i))
            else:
                end = t.run_of(j, mask)
            if end > j:
                return end
        return None
    return alternative


ALTERNATIVES: dict[str, tuple[Callable[[_Text, int], Optional[int]], ...]] = {
    "nanochat": (
        _contraction_fold,              # '(?i:[sdmt]|ll|ve|re)
        _possessive_prefix_letters,     # [^\r\n\p{L}\p{N}]?+\p{L}+
        _numbers(2),                    # \p{N}{1,2}
        _punctuation_crlf,              #  ?[^\s\p{L}\p{N}]++[\r\n]*
        _space_then_crlf,               # \s*[\r\n]
        _space_not_before_nonspace,     # \s+(?!\S)
        _space_run,                     # \s+
    ),
    "cl100k": (
        _contraction_fold,              # '(?i:[sdmt]|ll|ve|re)
        _possessive_prefix_letters,     # [^\r\n\p{L}\p{N}]?+\p{L}++
        _numbers(3),                    # \p{N}{1,3}+
        _punctuation_crlf,              #  ?[^\s\p{L}\p{N}]++[\r\n]*+
        _space_run_to_end,              # \s++$
        _space_then_crlf,               # \s*[\r\n]
        _space_not_before_nonspace,     # \s+(?!\S)
        _one_space,                     # \s
    ),
    "o200k": (
        _o200k_lower_words,             # [^\r\n\p{L}\p{N}]?[Lu Lt Lm Lo M]*[Ll Lm Lo M]+(?i:'s|...)?
        _o200k_upper_words,             # [^\r\n\p{L}\p{N}]?[Lu Lt Lm Lo M]+[Ll Lm Lo M]*(?i:'s|...)?
        _numbers(3),                    # \p{N}{1,3}
        _o200k_punctuation,             #  ?[^\s\p{L}\p{N}]+[\r\n/]*
        _space_then_crlf_run,           # \s*[\r\n]+
        _space_not_before_nonspace,     # \s+(?!\S)
        _space_run,                     # \s+
    ),
    "gpt2": (
        _contraction_case,              # 's|'t|'re|'ve|'m|'ll|'d
        _space_then(LETTER),            #  ?\p{L}+
        _space_then(N),                 #  ?\p{N}+
        _space_then(None),              #  ?[^\s\p{L}\p{N}]+
        _space_not_before_nonspace,     # \s+(?!\S)
        _space_run,                     # \s+
    ),
}


def _match(alternatives, t: _Text, k: int) -> int:
    """End (character index) of the chunk starting at character k: the first alternative
    that matches. One always does: every character starts a letter, number, punctuation
    or whitespace alternative."""
    for alternative in alternatives:
        end = alternative(t, k)
        if end is not None:
            assert end > k
            return end
    raise AssertionError(f"no alternative matches at character {k}")  # unreachable


def split_offsets(data: bytes, pattern: str) -> list[int]:
    """Byte end offset of each chunk of data under `pattern` (a key of PATTERNS other
    than seed); the last one is len(data); [] if data is empty."""
    try:
        alternatives = ALTERNATIVES[pattern]
    except KeyError:
        raise ValueError(f"unknown pattern {pattern!r}; expected one of {sorted(ALTERNATIVES)}"
                         " (the seed pattern's twin is harness.dev.twin)") from None
    t = _Text(bytes(data))
    ends = []
    k = 0
    while k < t.n:
        k = _match(alternatives, t, k)
        ends.append(t.starts[k])
    return ends


def split(data: bytes, pattern: str) -> list[bytes]:
    """Cut data into the chunks of `pattern`; their concatenation is data."""
    data = bytes(data)
    chunks, start = [], 0
    for end in split_offsets(data, pattern):
        chunks.append(data[start:end])
        start = end
    return chunks
