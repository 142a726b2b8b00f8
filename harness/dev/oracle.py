r"""The oracle of the pre-tokenizer (SPEC §3): a regex that, on valid UTF-8, must cut text
exactly as `harness.dev.twin.split` and the assembly `pretok_next` do.

The pattern itself, in two spellings (`ORACLE_PATTERN` for the `regex` module,
`ORACLE_PATTERN_LITERAL` for engines that take a Rust `&str`), is in `harness.pattern`
(the exports need it too); it is re-exported here.

Known deviation (see tests/test_twin.py::test_documented_deviation_long_s): the oracle's
`(?i:...)` uses Unicode simple case folding, under which U+017F LATIN SMALL LETTER LONG S
'ſ' matches 's'. So on the text "'ſa" the oracle gives "'ſ|a" (a contraction) while the
SPEC's byte-level definition, whose (?i) is ASCII-only, gives "'ſa" (a letter run with an
apostrophe prefix). tiktoken's fancy-regex and tokenizers' Oniguruma fold the same way
as `regex` (tests/test_twin.py checks both when installed). No other code point folds
to one of the contraction letters s d m t l v e r.

The exact pre-tokenizers (SPEC §10: nanochat, cl100k, o200k, gpt2) have their oracle in
`pattern_split`: the published pattern string (`harness.pretokenizers.EXACT_PATTERNS`)
run by the `regex` module; `harness.dev.pretok_twin` is held to it.

`regex` is imported lazily, so `harness` imports without it.
"""

from __future__ import annotations

import functools

from ..pattern import LX, LX_LITERAL, ORACLE_PATTERN, ORACLE_PATTERN_LITERAL, SP

__all__ = [
    "LX", "LX_LITERAL", "SP", "ORACLE_PATTERN", "ORACLE_PATTERN_LITERAL",
    "compiled", "compiled_literal", "oracle_split", "oracle_split_bytes",
    "compiled_pattern", "pattern_split",
]


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


@functools.lru_cache(maxsize=None)
def compiled_pattern(pattern: str):
    """The published pattern string of an exact pre-tokenizer (a key of
    harness.pretokenizers.EXACT_PATTERNS: nanochat, cl100k, o200k, gpt2), compiled with
    the `regex` module (cached)."""
    import regex

    from ..pretokenizers import EXACT_PATTERNS

    return regex.compile(EXACT_PATTERNS[pattern])


def pattern_split(data: bytes, pattern: str) -> list[bytes]:
    """Chunks of UTF-8 data according to the exact pre-tokenizer `pattern`'s regex (SPEC
    §10), run on the decoded text; raises UnicodeDecodeError if data is not valid UTF-8."""
    text = bytes(data).decode("utf-8", errors="strict")
    chunks = compiled_pattern(pattern).findall(text)
    assert "".join(chunks) == text, "oracle chunks do not tile the text"
    return [chunk.encode("utf-8") for chunk in chunks]
