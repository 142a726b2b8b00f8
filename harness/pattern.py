r"""The pre-tokenizer's pattern (SPEC §3) as a regex, for the exports (harness.export) and
for the oracle that tests hold the pre-tokenizer to (harness.dev.oracle).

Two spellings of the same pattern:

- `ORACLE_PATTERN`: with \u / \U escapes, exactly as written in the SPEC, for the Python
  `regex` module (harness.dev.oracle's `compiled()`, `oracle_split`, `oracle_split_bytes`).
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
"""

from __future__ import annotations

__all__ = ["LX", "LX_LITERAL", "SP", "ORACLE_PATTERN", "ORACLE_PATTERN_LITERAL"]

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
