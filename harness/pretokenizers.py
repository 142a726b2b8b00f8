r"""The pre-tokenizers asmbpe knows (SPEC §3, §10): the one registry of their names, the
ids tokenizer.bin stores (header offset 10) and the library takes, and the pattern
strings that exports carry.

    id 1  seed      SPEC §3: byte-level classes (harness.pattern.ORACLE_PATTERN_LITERAL)
    id 2  nanochat  SPEC §10: nanochat's split pattern with real Unicode classes (default)
    id 3  cl100k    tiktoken's cl100k_base pat_str
    id 4  o200k     tiktoken's o200k_base pat_str
    id 5  gpt2      GPT-2's pattern (tiktoken's r50k_base / p50k_base)

`resolve(name_or_id)` gives the entry (`Pretokenizer`: name, id, pattern) for a name, an
id or an entry, and raises `PretokenizerError` (an AsmbpeError and a ValueError) naming
the valid ones for anything else. `DEFAULT` is what new tokenizers use unless told
otherwise.

The pattern strings are the oracles of the exact pre-tokenizers (run them with the
`regex` module, tiktoken or `tokenizers`) and what a tokenizer's tiktoken and
tokenizer.json exports carry, verbatim. seed's is the literal-code-point spelling of
SPEC §3's oracle, the one Rust engines read (see harness.pattern).

This module imports nothing heavy (no numpy, no library): the twins use it too.
"""
from __future__ import annotations

from dataclasses import dataclass

from .errors import AsmbpeError
from .pattern import ORACLE_PATTERN_LITERAL

__all__ = ["Pretokenizer", "PretokenizerError", "PRETOKENIZERS", "NAMES", "DEFAULT",
           "EXACT_PATTERNS", "GPT2_TIKTOKEN_PATTERN", "resolve"]

# The pattern strings of SPEC §10, verbatim. cl100k and o200k are tiktoken's cl100k_base
# and o200k_base pat_str (tiktoken_ext.openai_public); gpt2 is GPT-2's own pattern as the
# SPEC writes it.
EXACT_PATTERNS: dict[str, str] = {
    "nanochat": (
        r"""'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}+|\p{N}{1,2}| ?[^\s\p{L}\p{N}]++[\r\n]*|\s*[\r\n]|\s+(?!\S)|\s+"""
    ),
    "cl100k": (
        r"""'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+| ?[^\s\p{L}\p{N}]++[\r\n]*+|\s++$|\s*[\r\n]|\s+(?!\S)|\s"""
    ),
    "o200k": "|".join([
        r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
        r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
        r"""\p{N}{1,3}""",
        r""" ?[^\s\p{L}\p{N}]+[\r\n/]*""",
        r"""\s*[\r\n]+""",
        r"""\s+(?!\S)""",
        r"""\s+""",
    ]),
    "gpt2": r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+""",
}

# tiktoken's r50k_base / p50k_base pat_str: a possessive form of GPT-2's pattern that
# cuts every text the same way (tests/test_pretok_twin.py checks both on its inputs).
GPT2_TIKTOKEN_PATTERN = (
    r"""'(?:[sdmt]|ll|ve|re)| ?\p{L}++| ?\p{N}++| ?[^\s\p{L}\p{N}]++|\s++$|\s+(?!\S)|\s"""
)


@dataclass(frozen=True)
class Pretokenizer:
    """One pre-tokenizer: its name, the id tokenizer.bin stores and the library takes
    (ASMBPE_PRETOK_* in asm/asmbpe.h), and the pattern string its exports carry."""

    name: str
    id: int
    pattern: str

    def __str__(self) -> str:
        return f"{self.name} (id {self.id})"


PRETOKENIZERS: tuple[Pretokenizer, ...] = (
    Pretokenizer("seed", 1, ORACLE_PATTERN_LITERAL),
    Pretokenizer("nanochat", 2, EXACT_PATTERNS["nanochat"]),
    Pretokenizer("cl100k", 3, EXACT_PATTERNS["cl100k"]),
    Pretokenizer("o200k", 4, EXACT_PATTERNS["o200k"]),
    Pretokenizer("gpt2", 5, EXACT_PATTERNS["gpt2"]),
)
NAMES: tuple[str, ...] = tuple(p.name for p in PRETOKENIZERS)
DEFAULT = "nanochat"

_BY_NAME = {p.name: p for p in PRETOKENIZERS}
_BY_ID = {p.id: p for p in PRETOKENIZERS}


class PretokenizerError(AsmbpeError, ValueError):
    """A pre-tokenizer name or id that asmbpe does not know."""


def _known() -> str:
    return ", ".join(str(p) for p in PRETOKENIZERS)


def resolve(pretokenizer) -> Pretokenizer:
    """The registry entry of a pre-tokenizer name ("nanochat"), id (2) or entry;
    PretokenizerError, listing the valid names, for anything else."""
    if isinstance(pretokenizer, Pretokenizer):
        return pretokenizer
    if isinstance(pretokenizer, str):
        found = _BY_NAME.get(pretokenizer)
    elif hasattr(pretokenizer, "__index__") and not isinstance(pretokenizer, bool):
        found = _BY_ID.get(int(pretokenizer.__index__()))
    else:
        found = None
    if found is None:
        raise PretokenizerError(f"unknown pre-tokenizer {pretokenizer!r}; the pre-tokenizers "
                                f"are {_known()}")
    return found
