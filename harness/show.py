"""Looking at tokens: `asmbpe show` (how a text splits into tokens) and `asmbpe stats`
(counts and the most frequent tokens).

`show` has two renderings of a sequence of ids:

- colour (`render_color`, for a terminal): the text as it reads, each token on its own
  background colour, cycling through COLORS (256-colour pastel backgrounds, black
  text). Specials (<|bos|>, <|user|>, ...) are white on dark grey; tokens with MASKBIT
  (what a chat model learns to produce) are bold and underlined. A newline inside a
  token is shown as "↵" before the line break; bytes that are not UTF-8 on their own
  (a character split between tokens) are shown as \\xNN escapes.
- plain (`render_plain`, for pipes and files): one token per line,
  `ID<TAB>TEXT`, where TEXT is the token's text as a Python string literal (a bytes
  literal when the token's bytes are not UTF-8 on their own) and ID has a trailing `*`
  when the token carries MASKBIT.

`stats` (`TokenStats`) counts documents, tokens (all, and the specials among them),
source bytes and each id's occurrences, block by block, so it works on files of any
size; `format_stats` prints them with the top N tokens.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .tokenizer import MASKBIT, N_SPECIAL

__all__ = ["COLORS", "token_text", "render_plain", "render_color", "summary", "TokenStats",
           "stats_record", "format_stats"]

# 256-colour backgrounds, light enough for black text, in the order they cycle
COLORS = (153, 222, 151, 217, 183, 229)
SPECIAL_STYLE = "1;97;48;5;240"        # bold white on dark grey
MASK_STYLE = "1;4"                     # bold, underlined
RESET = "\x1b[0m"


def _split_mask(ids, chat: bool, vocab_size: int) -> tuple[np.ndarray, np.ndarray]:
    """(ids with MASKBIT cleared, whether each had it); only chat ids carry MASKBIT.
    ValueError for an id that is not a token."""
    arr = np.asarray(ids).astype(np.int64)
    if chat:
        plain, masked = arr & ~MASKBIT, (arr & MASKBIT) != 0
    else:
        plain, masked = arr, np.zeros(arr.shape, dtype=bool)
    bad = (plain < 0) | (plain >= vocab_size)
    if bad.any():
        pos = int(np.argmax(bad))
        raise ValueError(f"id {int(arr[pos])} at position {pos} is not a token "
                         f"(vocab_size {vocab_size})")
    return plain, masked


def token_text(table: list[bytes], i: int) -> str:
    """A token's text as a Python literal: repr of its str, or of its bytes when they are
    not UTF-8 on their own."""
    raw = table[i]
    try:
        return repr(raw.decode("utf-8"))
    except UnicodeDecodeError:
        return repr(raw)


def render_plain(ids, table: list[bytes], chat: bool = False):
    """Lines `ID<TAB>TEXT` (ID followed by `*` for a MASKBIT token), one per token.
    table: Tokenizer.id_to_bytes()."""
    plain, masked = _split_mask(ids, chat, len(table))
    for i, m in zip(plain.tolist(), masked.tolist()):
        yield f"{i}{'*' if m else ''}\t{token_text(table, i)}"


def _visible(raw: bytes) -> str:
    text = raw.decode("utf-8", "backslashreplace")
    return text.replace("\r", "\\r")


def _special_set(table: list[bytes], specials) -> set:
    """The special ids: `specials` when given (Tokenizer.specials' ids), else the top
    N_SPECIAL ids (asmbpe's own layout, SPEC §5)."""
    if specials is None:
        return set(range(len(table) - N_SPECIAL, len(table)))
    return set(specials)


def render_color(ids, table: list[bytes], chat: bool = False, specials=None) -> str:
    """The text with each token on its own background colour (ANSI escapes).
    table: Tokenizer.id_to_bytes(); specials: the special ids (default: the top 16)."""
    plain, masked = _split_mask(ids, chat, len(table))
    special_ids = _special_set(table, specials)
    out = []
    k = 0
    for i, m in zip(plain.tolist(), masked.tolist()):
        if i in special_ids:
            style = SPECIAL_STYLE
        else:
            style = f"30;48;5;{COLORS[k % len(COLORS)]}"
            k += 1
        if m:
            style = f"{style};{MASK_STYLE}"
        on = f"\x1b[{style}m"
        # the colour stops before each line break so it does not fill the line's end
        lines = _visible(table[i]).split("\n")
        marks = ["↵"] * (len(lines) - 1) + [""]
        pieces = [on + line + mark + RESET if line + mark else ""
                  for line, mark in zip(lines, marks)]
        out.append("\n".join(pieces))
    return "".join(out)


def summary(ids, table: list[bytes], chat: bool = False, specials=None) -> str:
    """`N tokens (S special), B bytes, X bytes/token`: the bytes and bytes/token of the
    text tokens (specials left out; specials: their ids, default the top 16)."""
    plain, _ = _split_mask(ids, chat, len(table))
    special_ids = np.array(sorted(_special_set(table, specials)), dtype=np.int64)
    text = plain[~np.isin(plain, special_ids)].tolist()
    nbytes = sum(len(table[i]) for i in text)
    per = f", {nbytes / len(text):.2f} bytes/token" if text else ""
    return f"{plain.size:,} tokens ({plain.size - len(text):,} special), {nbytes:,} bytes{per}"


@dataclass
class TokenStats:
    """Counts over a sequence of token blocks; `add` one block at a time."""

    vocab_size: int
    documents: int = 0
    tokens: int = 0
    source_bytes: int = 0
    counts: np.ndarray = field(default=None, repr=False)
    special_ids: list = None        # default: the top N_SPECIAL ids (asmbpe's layout)

    def __post_init__(self):
        if self.counts is None:
            self.counts = np.zeros(self.vocab_size, dtype=np.int64)
        if self.special_ids is None:
            self.special_ids = list(range(self.vocab_size - N_SPECIAL, self.vocab_size))

    def add(self, tokens, documents: int = 0, source_bytes: int = 0,
            chat: bool = False) -> None:
        """Count one block of ids (chat: MASKBIT is cleared first)."""
        plain, _ = _split_mask(tokens, chat, self.vocab_size)
        self.counts += np.bincount(plain, minlength=self.vocab_size)
        self.tokens += plain.size
        self.documents += int(documents)
        self.source_bytes += int(source_bytes)

    def add_counts(self, counts: np.ndarray, tokens: int, documents: int = 0,
                   source_bytes: int = 0) -> None:
        """Count ids already counted (counts[id], MASKBIT stripped; TokFile.id_counts)."""
        self.counts += counts
        self.tokens += int(tokens)
        self.documents += int(documents)
        self.source_bytes += int(source_bytes)

    @property
    def special_tokens(self) -> int:
        return int(self.counts[np.asarray(self.special_ids, dtype=np.int64)].sum())

    @property
    def text_tokens(self) -> int:
        """Tokens that are not specials: the ones that spell the source text."""
        return self.tokens - self.special_tokens

    @property
    def bytes_per_token(self) -> float:
        """Source bytes per text token (specials left out); 0 without text tokens."""
        return self.source_bytes / self.text_tokens if self.text_tokens else 0.0

    def top(self, n: int) -> list[tuple[int, int]]:
        """The n most frequent ids as (id, count), most frequent first (ties: lower id)."""
        order = np.argsort(-self.counts, kind="stable")[:max(0, n)]
        return [(int(i), int(self.counts[i])) for i in order if self.counts[i]]


def format_stats(stats: TokenStats, table: list[bytes], top: int = 20,
                 pretokenizer: str | None = None):
    """The lines `asmbpe stats` prints; pretokenizer: the tokenizer's, as a line of its
    own after the counts (e.g. "nanochat (id 2)")."""
    yield f"documents        {stats.documents:,}"
    yield f"source bytes     {stats.source_bytes:,}"
    yield (f"tokens           {stats.tokens:,} ({stats.text_tokens:,} text, "
           f"{stats.special_tokens:,} special)")
    yield f"bytes per token  {stats.bytes_per_token:.3f} (text tokens)"
    yield f"distinct tokens  {int(np.count_nonzero(stats.counts)):,} of {stats.vocab_size:,}"
    if pretokenizer is not None:
        yield f"pre-tokenizer    {pretokenizer}"
    rows = stats.top(top)
    if rows:
        yield f"top {len(rows)} tokens:"
        yield f"  {'id':>6} {'count':>12} {'share':>7}  text"
        for i, c in rows:
            yield f"  {i:>6} {c:>12,} {100 * c / stats.tokens:>6.2f}%  {token_text(table, i)}"


def stats_record(stats: TokenStats, table: list[bytes], top: int = 20,
                 pretokenizer: str | None = None) -> dict:
    """What `format_stats` prints, as one JSON-ready dict (`asmbpe stats --json`): the
    counts, and per frequent token its id, count, share (of all tokens), `text` (its
    bytes decoded as UTF-8, invalid bytes as U+FFFD) and `hex` (its bytes, exactly)."""
    rec = dict(documents=stats.documents, source_bytes=stats.source_bytes,
               tokens=stats.tokens, text_tokens=stats.text_tokens,
               special_tokens=stats.special_tokens,
               bytes_per_token=round(stats.bytes_per_token, 6),
               distinct_tokens=int(np.count_nonzero(stats.counts)),
               vocab_size=stats.vocab_size, pretokenizer=pretokenizer)
    rec["top"] = [dict(id=i, count=c, share=round(c / stats.tokens, 6),
                       text=table[i].decode("utf-8", "replace"), hex=table[i].hex())
                  for i, c in stats.top(top)]
    return rec

