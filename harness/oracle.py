r"""The oracle of the pre-tokenizer (SPEC §3): a regex that, on valid UTF-8, must cut text
exactly as `harness.twin.split` and the assembly `pretok_next` do.

Two spellings of the same pattern:

- `ORACLE_PATTERN`: with \u / \U escapes, exactly as written in the SPEC, for the Python
  `regex` module (`compiled()`, `oracle_split`, `oracle_split_bytes`).
- `ORACLE_PATTERN_LITERAL`: the same with literal code points instead of the \u / \U
  escapes (\t \n \r \x0b \x0c stay escaped; every regex engine reads those), for engines
  that take the pattern as a Rust `&str`: rustbpe and tiktoken (fancy-regex) and
  Hugging Face `tokenizers` (`tokenizers.Regex`). A Rust string cannot hold a lone
  surrogate, so the literal form writes the SPEC's range U+3040-U+FFFF as
  U+3040-U+D7FF and U+E000-U+FFFF. UTF-8 cannot encode surrogates, so the two spellings
  are equivalent on every valid UTF-8 text (tests/test_twin.py checks this).
  Use the literal form with `tokenizers` in particular: its Oniguruma does not read the
  8-digit \U escapes of ORACLE_PATTERN (with them, " \U0001EFFF\U0001F000" came out as
  one chunk instead of two).

Known deviation (see tests/test_twin.py::test_documented_deviation_long_s): the oracle's
`(?i:...)` uses Unicode simple case folding, under which U+017F LATIN SMALL LETTER LONG S
'ſ' matches 's'. So on the text "'ſa" the oracle gives "'ſ|a" (a contraction) while the
SPEC's byte-level definition, whose (?i) is ASCII-only, gives "'ſa" (a letter run with an
apostrophe prefix). tiktoken's fancy-regex and tokenizers' Oniguruma fold the same way
as `regex` (tests/test_twin.py checks both when installed). No other code point folds
to one of the contraction letters s d m t l v e r.

`regex` is imported lazily, so `harness` imports without it.
"""

from __future__ import annotations

import functools

__all__ = [
    "LX", "LX_LITERAL", "SP", "ORACLE_PATTERN", "ORACLE_PATTERN_LITERAL",
    "compiled", "compiled_literal", "oracle_split", "oracle_split_bytes",
]

# Letters, as a character-class body (\p{L} of the byte-level definition).
LX = r"A-Za-z\u00C0-\u1FFF\u3040-\uFFFF\U00010000-\U0001EFFF\U00020000-\U0010FFFF"
# Whitespace, as a character-class body (\s): tab, LF, VT, FF, CR and space.
SP = r"\t\n\x0b\x0c\r "


def _pattern(lx: str) -> str:
    return (
        r"'(?i:[sdmt]|ll|ve|re)"
        rf"|[^\r\n{lx}0-9]?+[{lx}]+"
        r"|[0-9]{1,2}"
        rf"| ?[^{SP}{lx}0-9]++[\r\n]*"
        rf"|[{SP}]*[\r\n]"
        rf"|[{SP}]+(?![^{SP}])"
        rf"|[{SP}]+"
    )


ORACLE_PATTERN = _pattern(LX)

# The same letters with literal code points, the surrogate block D800-DFFF left out.
LX_LITERAL = (
    "A-Za-z"
    "\u00C0-\u1FFF"
    "\u3040-\uD7FF"
    "\uE000-\uFFFF"
    "\U00010000-\U0001EFFF"
    "\U00020000-\U0010FFFF"
)
ORACLE_PATTERN_LITERAL = _pattern(LX_LITERAL)


@functools.lru_cache(maxsize=None)
def compiled():
    """ORACLE_PATTERN compiled with the `regex` module (cached)."""
    import regex

    return regex.compile(ORACLE_PATTERN)


@functools.lru_cache(maxsize=None)
def compiled_literal():
    """ORACLE_PATTERN_LITERAL compiled with the `regex` module (cached); for checking
    that the two spellings agree."""
    import regex

    return regex.compile(ORACLE_PATTERN_LITERAL)


def oracle_split(text: str) -> list[str]:
    """Chunks of text according to the oracle regex. Every character starts some
    alternative and none matches empty, so the chunks tile the text."""
    chunks = compiled().findall(text)
    assert "".join(chunks) == text, "oracle chunks do not tile the text"
    return chunks


def oracle_split_bytes(data: bytes) -> list[bytes]:
    """Chunks of UTF-8 data according to the oracle regex; raises UnicodeDecodeError if
    data is not valid UTF-8."""
    text = bytes(data).decode("utf-8", errors="strict")
    return [chunk.encode("utf-8") for chunk in oracle_split(text)]
