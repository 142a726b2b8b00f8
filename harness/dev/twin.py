r"""The naive Python twin of asmbpe.

Every hot path of the library (pre-tokenizer, training, encoding) has a plain Python
version here, written straight from SPEC.md for clarity rather than speed. The tests hold
the assembly to these functions, and these functions to the oracle regex
(`harness.dev.oracle`) and to independent tokenizer libraries.

This module must stay importable without the compiled library, numpy or `regex`
(`train` imports numpy when it is called, for its result arrays).

Encoding (SPEC §6): `encode` (at the end of this file), lowest-numbered merge first,
one chunk at a time.

Pre-tokenizers. `split`, `split_offsets`, `count_words`, `train` and `encode` take
`pretokenizer`, a name or id of harness.pretokenizers, by default the library's
(`harness.pretokenizers.DEFAULT`, nanochat). The seed (SPEC §3) is written out below;
the exact ones (SPEC §10: nanochat, cl100k, o200k, gpt2) are
`harness.dev.pretok_twin.split_offsets(data, name)`.

The seed pre-tokenizer (SPEC §3) is hand-written over bytes; no regex engine is used.
The text is first cut into characters (`char_at`), each with a class, then the pattern

    '(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}+|\p{N}{1,2}| ?[^\s\p{L}\p{N}]++[\r\n]*|\s*[\r\n]|\s+(?!\S)|\s+

is matched alternative by alternative, in order, at each chunk start, with the
backtracking written out as loops. Positions below are character indexes unless named
otherwise.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Callable

from ..pretokenizers import DEFAULT, resolve

__all__ = ["L", "N", "S", "NL", "O", "char_len", "char_at", "chars", "split", "split_offsets",
           "TwinTrainResult", "count_words", "train", "merge_ranks", "encode_chunk", "encode"]

# --------------------------------------------------------------------------- characters

# Character classes. S and NL together are the whitespace class \s.
L = "L"    # letter \p{L}: A-Z a-z, and non-ASCII characters except those listed as O
N = "N"    # digit \p{N}: 0-9
S = "S"    # whitespace other than CR/LF: 0x09 0x0B 0x0C 0x20
NL = "NL"  # CR (0x0D) or LF (0x0A), which are whitespace too
O = "O"    # everything else
SPACE = (S, NL)


def _ascii_class(b: int) -> str:
    if b in (0x0A, 0x0D):
        return NL
    if 0x09 <= b <= 0x0D or b == 0x20:
        return S
    if 0x30 <= b <= 0x39:
        return N
    if 0x41 <= b <= 0x5A or 0x61 <= b <= 0x7A:
        return L
    return O


ASCII_CLASS = tuple(_ascii_class(b) for b in range(128))


def char_len(lead: int) -> int:
    """Length in bytes of the character starting with `lead` (before cutting at the end)."""
    if lead <= 0x7F:
        return 1
    if 0xC0 <= lead <= 0xDF:
        return 2
    if 0xE0 <= lead <= 0xEF:
        return 3
    if 0xF0 <= lead <= 0xF7:
        return 4
    return 1  # 0x80-0xBF (stray continuation byte) and 0xF8-0xFF


def char_at(data: bytes, i: int) -> tuple[str, int]:
    """(class, length in bytes) of the character starting at byte offset i of data."""
    lead = data[i]
    length = min(char_len(lead), len(data) - i)  # cut at the end of the text
    if lead <= 0x7F:
        return ASCII_CLASS[lead], length
    # The byte after the lead counts only if it lies inside the text; continuation
    # bytes are never validated.
    nxt = data[i + 1] if i + 1 < len(data) else None
    if 0x80 <= lead <= 0xBF or lead >= 0xF8:
        return O, length
    if lead == 0xC2:                      # U+0080-U+00BF
        return O, length
    if lead == 0xE2:                      # U+2000-U+2FFF
        return O, length
    if lead == 0xE3 and nxt == 0x80:      # U+3000-U+303F
        return O, length
    if lead == 0xF0 and nxt == 0x9F:      # U+1F000-U+1FFFF (emoji)
        return O, length
    return L, length


def chars(data: bytes) -> tuple[list[str], list[int]]:
    """Classes and byte start offsets of the characters of data, plus a final start
    offset equal to len(data) (so the byte end of character k is starts[k + 1])."""
    classes, starts = [], []
    i = 0
    while i < len(data):
        cls, length = char_at(data, i)
        classes.append(cls)
        starts.append(i)
        i += length
    starts.append(len(data))
    return classes, starts


# --------------------------------------------------------------------------- pattern

class _Text:
    """The characters of one byte string, for the matchers below."""

    def __init__(self, data: bytes):
        self.data = data
        self.cls, self.starts = chars(data)
        self.n = len(self.cls)

    def lead(self, k: int) -> int | None:
        """Lead byte of character k, None past the end."""
        return self.data[self.starts[k]] if k < self.n else None

    def is_(self, k: int, classes) -> bool:
        """Character k exists and its class is one of `classes`."""
        return k < self.n and self.cls[k] in classes

    def run(self, k: int, classes) -> int:
        """End of the longest run of characters of `classes` starting at k."""
        while self.is_(k, classes):
            k += 1
        return k


def _lower(b: int | None) -> int | None:
    """ASCII lower case of a byte (the (?i) of the contractions is ASCII-only here)."""
    return b + 0x20 if b is not None and 0x41 <= b <= 0x5A else b


LONG_S = "\u017f".encode()   # U+017F, which (?i) folds onto 's'


def _contraction(t: _Text, k: int) -> int | None:
    """'(?i:[sdmt]|ll|ve|re), with Unicode simple case folding as every regex
    engine applies it: besides ASCII case, U+017F LATIN SMALL LETTER LONG S is
    an 's' (the only non-ASCII code point folding onto s d m t l v e r)."""
    if t.lead(k) != ord("'"):
        return None
    if k + 1 < t.n and t.data[t.starts[k + 1]:t.starts[k + 1] + 2] == LONG_S \
            and (k + 2 >= t.n or t.starts[k + 2] == t.starts[k + 1] + 2):
        return k + 2
    a, b = _lower(t.lead(k + 1)), _lower(t.lead(k + 2))
    if a is not None and a in b"sdmt":
        return k + 2
    for x, y in (b"ll", b"ve", b"re"):
        if (a, b) == (x, y):
            return k + 3
    return None


def _letters(t: _Text, k: int) -> int | None:
    r"""[^\r\n\p{L}\p{N}]?+\p{L}+

    The optional prefix is possessive: when the character at k can be the prefix it is
    taken and never given back, so the match fails if no letter follows it.
    """
    j = k + 1 if (k < t.n and not t.is_(k, (NL, L, N))) else k
    end = t.run(j, (L,))
    return end if end > j else None


def _digits(t: _Text, k: int) -> int | None:
    r"""\p{N}{1,2}"""
    end = k
    while end - k < 2 and t.is_(end, (N,)):
        end += 1
    return end if end > k else None


def _punctuation(t: _Text, k: int) -> int | None:
    r""" ?[^\s\p{L}\p{N}]++[\r\n]*

    ' ?' is greedy but not possessive: try with the space, then without it.
    """
    tries = [k + 1, k] if t.lead(k) == 0x20 else [k]
    for j in tries:
        end = t.run(j, (O,))          # possessive, and nothing after could use an O
        if end > j:
            return t.run(end, (NL,))  # [\r\n]*
    return None


def _space_to_newline(t: _Text, k: int) -> int | None:
    r"""\s*[\r\n]  (the \s* gives back until a CR/LF follows: the last CR/LF of the run)"""
    for j in range(t.run(k, SPACE), k - 1, -1):  # \s* covers k..j-1
        if t.is_(j, (NL,)):
            return j + 1
    return None


def _space_not_before_nonspace(t: _Text, k: int) -> int | None:
    r"""\s+(?!\S)  (the whole run at the end of the text, else the run less its last char)"""
    for j in range(t.run(k, SPACE), k, -1):      # \s+ covers k..j-1, at least one
        if j == t.n or t.is_(j, SPACE):           # (?!\S): end of text or whitespace
            return j
    return None


def _space(t: _Text, k: int) -> int | None:
    r"""\s+"""
    end = t.run(k, SPACE)
    return end if end > k else None


ALTERNATIVES = (
    _contraction,
    _letters,
    _digits,
    _punctuation,
    _space_to_newline,
    _space_not_before_nonspace,
    _space,
)


def _match(t: _Text, k: int) -> int:
    """End (character index) of the chunk starting at character k: the first alternative
    that matches. One always does: L, N, O and whitespace each start some alternative."""
    for alternative in ALTERNATIVES:
        end = alternative(t, k)
        if end is not None:
            assert end > k
            return end
    raise AssertionError(f"no alternative matches at character {k}")  # unreachable


SEED = "seed"


def split_offsets(data: bytes, pretokenizer=DEFAULT) -> list[int]:
    """Byte end offset of each chunk of data (the last one is len(data); [] if empty),
    cut by `pretokenizer` (a name or id; the exact ones by harness.dev.pretok_twin)."""
    name = resolve(pretokenizer).name
    if name != SEED:
        from .pretok_twin import split_offsets as exact_split_offsets

        return exact_split_offsets(data, name)
    t = _Text(bytes(data))
    ends = []
    k = 0
    while k < t.n:
        k = _match(t, k)
        ends.append(t.starts[k])
    return ends


def split(data: bytes, pretokenizer=DEFAULT) -> list[bytes]:
    """Cut data into the chunks of `pretokenizer` (SPEC §3 for seed, §10 for the
    others); their concatenation is data."""
    data = bytes(data)
    chunks, start = [], 0
    for end in split_offsets(data, pretokenizer):
        chunks.append(data[start:end])
        start = end
    return chunks


# --------------------------------------------------------------------------- training

N_BYTES = 256        # byte tokens 0..255 (SPEC §5)
N_SPECIAL = 16       # special tokens, the top 16 ids (SPEC §5)
MAX_VOCAB = 65535    # ids are u16 and 0xFFFF is never a token


@dataclass
class TwinTrainResult:
    """What `train` learned: like harness.TrainResult, without the tokenizer.

    merges: np.ndarray (M, 2) uint16, merge i made token 256 + i from (left, right);
    counts: np.ndarray (M,) uint64, the winning pair count of each merge;
    words:  the Counter of chunk bytes -> occurrences that training started from
            (after dropping chunks longer than max_word_bytes); for tests.
    """

    merges: Any
    counts: Any
    words: Counter = field(repr=False)

    @property
    def n_merges(self) -> int:
        return len(self.counts)


FNV_OFFSET = 0xCBF29CE484222325
FNV_PRIME = 0x100000001B3


def fnv1a64(data: bytes) -> int:
    """FNV-1a, 64 bits (tokenizer.bin's merge-table hash, SPEC §7), byte by byte: the
    twin of the library's asmbpe_fnv1a64 (harness.tokenizer.fnv1a64)."""
    h = FNV_OFFSET
    for byte in bytes(data):
        h = ((h ^ byte) * FNV_PRIME) & 0xFFFFFFFFFFFFFFFF
    return h


def _documents(inputs) -> list[bytes]:
    """inputs (bytes, str, or an iterable of them: one document each) as bytes."""
    if isinstance(inputs, (bytes, bytearray, memoryview, str)):
        inputs = [inputs]
    docs = []
    for k, doc in enumerate(inputs):
        if isinstance(doc, str):
            docs.append(doc.encode("utf-8", "surrogatepass"))
        elif isinstance(doc, (bytes, bytearray, memoryview)):
            docs.append(bytes(doc))
        else:
            raise TypeError(f"document {k}: expected bytes or str, got {type(doc).__name__}")
    return docs


def _check_int(name: str, value, low: int, high: int | None = None) -> int:
    if isinstance(value, bool):
        raise TypeError(f"{name} must be an integer, got {value!r}")
    try:
        value = int(value.__index__())
    except AttributeError:
        raise TypeError(f"{name} must be an integer, got {value!r}") from None
    if value < low or (high is not None and value > high):
        bound = f"between {low} and {high}" if high is not None else f">= {low}"
        raise ValueError(f"{name} must be {bound}, got {value}")
    return value


def count_words(inputs, max_word_bytes: int = 256,
                splitter: Callable[[bytes], list] | None = None, *,
                pretokenizer=DEFAULT) -> Counter:
    """SPEC §4.1: split every document into chunks (by `splitter`, default this
    module's twin of `pretokenizer`) and count identical chunks, leaving out chunks
    longer than max_word_bytes (0 = no limit)."""
    max_word_bytes = _check_int("max_word_bytes", max_word_bytes, 0)
    name = resolve(pretokenizer).name
    split_doc = (lambda doc: split(doc, name)) if splitter is None else splitter
    words: Counter = Counter()
    for doc in _documents(inputs):
        words.update(bytes(c) for c in split_doc(doc))
    if max_word_bytes:
        for w in [w for w in words if len(w) > max_word_bytes]:
            del words[w]
    return words


def _rewrite(w: tuple, a: int, b: int, new: int) -> tuple:
    """SPEC §4.4: replace (a, b) by new, left to right, non-overlapping."""
    out = []
    i, n = 0, len(w)
    while i < n:
        if i + 1 < n and w[i] == a and w[i + 1] == b:
            out.append(new)
            i += 2
        else:
            out.append(w[i])
            i += 1
    return tuple(out)


def train(inputs, vocab_size: int, max_word_bytes: int = 256, min_count: int = 1, *,
          splitter: Callable[[bytes], list] | None = None,
          pretokenizer=DEFAULT) -> TwinTrainResult:
    """The naive twin of the trainer (SPEC §4): recount every pair for every merge.

    inputs: bytes, str, or an iterable of them, one document each (str as UTF-8).
    vocab_size: 256 + merges + 16 (SPEC §5), 272..65535; at most vocab_size - 272
        merges are learned, fewer when no pair is left with a count >= min_count.
    max_word_bytes: chunks longer than this are left out (0 = no limit).
    splitter: bytes -> list of chunks; default `split` with `pretokenizer` (this
        module's pre-tokenizer twins, ~1.5 MB/s for seed). Tests pass the assembly
        `harness.split` for large inputs.
    pretokenizer: a name or id of harness.pretokenizers (default seed).

    Words are tuples of token ids over the unique chunks, each with its count; words of
    a single token have no pairs and are dropped. For each merge i: the count of (a, b)
    is the sum over words of count(word) x the positions with (w[j], w[j+1]) = (a, b),
    overlapping occurrences included (zip(w, w[1:])); the highest count wins, ties go
    to the smaller (a, b); the new token is 256 + i; every word holding the pair is
    rewritten left to right, non-overlapping ("aaa" with (a, a) -> (aa) a).
    """
    import numpy as np

    vocab_size = _check_int("vocab_size", vocab_size, N_BYTES + N_SPECIAL, MAX_VOCAB)
    min_count = _check_int("min_count", min_count, 0)
    words = count_words(inputs, max_word_bytes, splitter, pretokenizer=pretokenizer)

    table = [(tuple(w), c) for w, c in words.items() if len(w) >= 2]
    merges: list[tuple[int, int]] = []
    counts: list[int] = []
    for i in range(vocab_size - N_BYTES - N_SPECIAL):
        pair_counts: dict[tuple[int, int], int] = {}
        get = pair_counts.get
        for w, c in table:
            for p in zip(w, w[1:]):
                pair_counts[p] = get(p, 0) + c
        if not pair_counts:
            break
        best_count = max(pair_counts.values())
        if best_count < min_count:
            break
        a, b = min(p for p, c in pair_counts.items() if c == best_count)
        new = N_BYTES + i
        merges.append((a, b))
        counts.append(best_count)
        rewritten = []
        for w, c in table:
            if a in w and (a, b) in zip(w, w[1:]):   # `a in w`: a quick filter
                w = _rewrite(w, a, b, new)
                if len(w) < 2:
                    continue
            rewritten.append((w, c))
        table = rewritten

    return TwinTrainResult(
        merges=np.array(merges, dtype=np.uint16).reshape(len(merges), 2),
        counts=np.array(counts, dtype=np.uint64),
        words=words,
    )


# --------------------------------------------------------------------------- encoding

def merge_ranks(merges) -> dict[tuple[int, int], int]:
    """(left, right) -> merge number, for an (M, 2) array or list of pairs (a pair
    listed twice keeps its lower number; tokenizer files never repeat one)."""
    rows = merges.tolist() if hasattr(merges, "tolist") else merges
    ranks: dict[tuple[int, int], int] = {}
    for i, (a, b) in enumerate(rows):
        ranks.setdefault((int(a), int(b)), i)
    return ranks


def encode_chunk(ranks: dict[tuple[int, int], int], chunk: bytes) -> list[int]:
    """SPEC §6 for one chunk: start from its bytes; while some adjacent pair is a merge,
    take the lowest-numbered such merge i and rewrite the whole chunk with it, left to
    right, non-overlapping (`_rewrite`, as training does), making id 256 + i."""
    w = tuple(chunk)
    while True:
        pairs = [p for p in zip(w, w[1:]) if p in ranks]
        if not pairs:
            return list(w)
        a, b = min(pairs, key=ranks.__getitem__)
        w = _rewrite(w, a, b, N_BYTES + ranks[a, b])


def encode(merges, data: bytes, *, splitter: Callable[[bytes], list] | None = None,
           pretokenizer=DEFAULT) -> list[int]:
    """The naive twin of encoding (SPEC §6): the token ids of data.

    merges: (M, 2) array or list of pairs, merge i making id 256 + i.
    data: bytes (str is encoded as UTF-8); any byte string, valid UTF-8 or not.
    splitter: bytes -> list of chunks; default `split` with `pretokenizer` (a name or
        id, default nanochat), this module's pre-tokenizer twins. Tests may pass the
        assembly `harness.split` for larger inputs.

    Each chunk is encoded on its own by `encode_chunk`; merges never cross chunks.
    No specials are added and none are recognised: "<|bos|>" in data is ordinary text.
    """
    if isinstance(data, str):
        data = data.encode("utf-8", "surrogatepass")
    ranks = merge_ranks(merges)
    name = resolve(pretokenizer).name
    split_data = (lambda doc: split(doc, name)) if splitter is None else splitter
    ids: list[int] = []
    for chunk in split_data(bytes(data)):
        ids.extend(encode_chunk(ranks, bytes(chunk)))
    return ids
