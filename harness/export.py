r"""Exports of a tokenizer for the ecosystem (SPEC §7): tiktoken and Hugging Face.

    export_tiktoken(tokenizer, path)   path: the ranks file; path + ".json": the rest
    load_tiktoken(path, tokenizer)     -> tiktoken.Encoding (checked against tokenizer)
    export_hf(tokenizer, path)         path: a Hugging Face tokenizer.json
    load_hf(path)                      -> tokenizers.Tokenizer, specials as plain text
    first_difference(tokenizer, docs, library="hf")  -> first document index where the
                                       exported tokenizer encodes differently, or None
    export_vocab(tokenizer, path, counts=None)  path: the vocabulary dump (a TSV to read)
    read_vocab(path)                   -> its rows, the token bytes parsed back

Every file is written to a temporary name in its directory and renamed over `path`
when complete, so `path` is its old content or the whole new file, never a part.

tiktoken. The ranks file is tiktoken's own format: one line per token id below the
specials, "base64(token bytes) id", in id order (`tiktoken.load.load_tiktoken_bpe`
reads it). The sidecar path + ".json" holds what the ranks file cannot: the split
pattern (the tokenizer's pre-tokenizer's pattern string, verbatim: `pattern_of`; for
seed `harness.pattern.ORACLE_PATTERN_LITERAL`), the 16 specials with their ids,
n_vocab and the merges hash. Build the Encoding as `load_tiktoken` does;
`load_tiktoken` parses the ranks itself because `load_tiktoken_bpe` caches a local
file by its path (in $TIKTOKEN_CACHE_DIR or /tmp/data-gym-cache) and would hand back a
stale copy after a re-export to the same path. Use `encode_ordinary` (or
`encode(text, disallowed_special=())`): asmbpe encodes special-token text inside text
as ordinary text, while tiktoken's `encode` by default refuses it.

Hugging Face. A BPE model over GPT-2's byte-level alphabet (`bytes_to_unicode`: each
byte is one printable character), vocab = every token id below the specials as the
alphabet string of its bytes, merges = the merge table in order as pairs of those
strings (so HF's merge rank is asmbpe's merge number), ignore_merges off, no dropout,
no unk, no byte fallback; the pre-tokenizer Split(the tokenizer's pattern string,
behavior "isolated") then ByteLevel(add_prefix_space=False, use_regex=False); the
ByteLevel decoder; no normalizer, no post-processor (no <|bos|> is added); the 16
specials as added tokens (special=True) at their ids. HF's BPE applies, per chunk, the
lowest-ranked merge among adjacent pairs, leftmost first, until none applies: SPEC §6's
encoding. One difference is not in tokenizer.json: HF matches added tokens in the text
before pre-tokenizing (so the text "<|bos|>" would become the special), and the switch
that turns this off, `encode_special_tokens`, is not saved in the file; `load_hf` sets
it, anyone else loading the file must too.

Duplicates: two merges whose tokens spell the same bytes (e.g. (a, bc) and (ab, c)).
A tiktoken ranks file maps bytes to one rank and an HF vocab maps a string to one id,
and HF even derives the id a merge makes from the vocab entry of the concatenated
strings, so neither format can hold both ids: an export with duplicates could never
produce or decode one of them, and its later merges would be keyed to the other id.
No export can reproduce such a tokenizer, so both refuse it (`DuplicateTokenError`,
naming the ids). Trained tokenizers never have duplicates: when merge j joins adjacent
tokens spelling S, their outer boundaries were already boundaries at every earlier
step, so that stretch of the word was encoded exactly as the chunk S alone; if an
earlier merge i had made S, it made it from the same stretch, which would then be one
token at step j. Measured on tokenizers trained by `harness.train` at vocab_size 32768
on 31 and 65 MB of english, 40 MB of multilingual and 31 MB of code, and at 65535 on
20 MB of each (and 5 MB with max_word_bytes=0): no duplicates. Only a hand-built
Tokenizer can have them.

tiktoken vs SPEC §6. tiktoken merges, at each step, the adjacent pair whose
concatenated bytes have the lowest rank, whether or not that pair is the merge that
made those bytes; asmbpe (and HF) only apply merges. Without duplicates the two agree
when every token is made by its own merge from the encoding of its own bytes, which is
the case for trained tokenizers (the argument above); tests/test_export.py compares
them on the corpora and on random trained tokenizers, and on a hand-built tokenizer
where they differ.

Loaded vocabularies (harness.loaded.LoadedTokenizer: tiktoken ranks, tokenizer.json)
are exported with their own tokens and specials:

- tiktoken: the ranks file holds every token as "base64 id" (its rank is its id), the
  sidecar the pre-tokenizer's pattern and the vocabulary's specials; explicit_n_vocab
  is null when the ids have gaps (cl100k_base: tiktoken checks that it is the number
  of tokens and specials and one more than the highest id). A tokenizer.json
  vocabulary is exported only when tiktoken's rule gives its ids: its merges' result
  ids increase with their priority (then rank order is merge order: a tokenizer
  trained by tokenizers' BpeTrainer) and no special sits among the ordinary ids;
  otherwise `ExportError`, naming the reason.
- Hugging Face: tokenizer.json written as JSON (the tokenizers API would number the
  added tokens itself): vocab = every token as its byte-level string, the specials as
  added tokens at their ids, pre-tokenizer Split(pattern) + ByteLevel, ignore_merges
  = whole_chunk; the ids between the tokens and the highest special that are no token
  (cl100k_base's 100256 and 100261..100275) get placeholder specials
  `<|asmbpe_unused_ID|>`, since tokenizers renumbers added tokens that leave gaps. A
  tokenizer.json vocabulary keeps its merges; a tiktoken ranks file
  gets merges derived from its ranks (for each token in rank order, tiktoken's rule
  on its bytes with the lower ranks only ends in two tokens: that pair; a token for
  which it does not is reached as a whole chunk only) and ignore_merges = true
  (tiktoken's whole-chunk rule), as the converters of `transformers` do. cl100k's
  pattern is written with `\p{N}{1,3}` for its `\p{N}{1,3}+`: the same cuts in a
  regex engine that reads the possessive (nothing follows it in its alternative), and
  the only spelling Oniguruma reads that way (it takes x{1,3}+ as (?:x{1,3})+). Such a
  file is not loaded back by `-t` (harness.vocab knows the patterns by their exact
  spelling and refuses cl100k's there).

The vocabulary dump (`export_vocab`, `asmbpe export --format vocab`; docs/FORMATS.md)
is for people, not for loading back: a header line, then one TSV line per id that is a
token or a special, `id token left right count kind`. token is the token's bytes as
`token_repr` writes them (quoted, escapes for what is not printable UTF-8;
`parse_token_repr` reads them back); left and right the two ids it was merged from
(asmbpe's merges; a tokenizer.json's first merge that makes it; for a tiktoken ranks
file the split `rank_merges` gives), empty for single bytes, specials and tokens no
merge makes; count the winning pair count of the merge when the caller has it
(`TrainResult.counts`: tokenizer.bin does not store counts, so the command leaves it
empty); kind one of VOCAB_KINDS.
"""
from __future__ import annotations

import base64
import functools
import json
import os
import tempfile
from typing import NamedTuple

from .errors import AsmbpeError
from .files import write_atomic
from .pretokenizers import resolve
from .tokenizer import N_SPECIAL, SPECIALS, Tokenizer

__all__ = ["DuplicateTokenError", "ExportError", "rank_merges", "hf_json_loaded",
           "bytes_to_unicode", "duplicate_tokens", "pattern_of",
           "export_tiktoken", "load_tiktoken", "export_hf", "load_hf", "first_difference",
           "SIDECAR_SUFFIX", "token_repr", "parse_token_repr", "vocab_rows", "VocabRow",
           "export_vocab", "read_vocab", "VOCAB_HEADER", "VOCAB_KINDS"]

SIDECAR_SUFFIX = ".json"          # export_tiktoken writes path + this beside the ranks
SIDECAR_FORMAT = "asmbpe-tiktoken/1"


class DuplicateTokenError(AsmbpeError, ValueError):
    """The tokenizer has two ids with the same bytes, which no export can hold."""


class ExportError(AsmbpeError, ValueError):
    """A loaded vocabulary that the asked format cannot reproduce."""


@functools.lru_cache(maxsize=None)
def bytes_to_unicode() -> dict[int, str]:
    """GPT-2's byte-level alphabet: byte -> one printable character. Printable Latin-1
    bytes map to themselves, the other 68 to U+0100 onwards, in byte order."""
    keep = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1),
            *range(ord("®"), ord("ÿ") + 1)]
    extra = iter(range(256, 512))
    return {b: chr(b) if b in keep else chr(next(extra)) for b in range(256)}


def duplicate_tokens(tokenizer: Tokenizer) -> list[tuple[int, int]]:
    """(id, earlier id with the same bytes) for every non-special id that repeats the
    bytes of a lower one; empty for every trained tokenizer (see the module doc)."""
    first: dict[bytes, int] = {}
    dups = []
    for i, b in enumerate(_token_bytes(tokenizer)):
        j = first.setdefault(b, i)
        if j != i:
            dups.append((i, j))
    return dups


def pattern_of(tokenizer: Tokenizer) -> str:
    """The split pattern the exports of `tokenizer` carry: its pre-tokenizer's pattern
    string (harness.pretokenizers), verbatim."""
    return resolve(tokenizer.pretokenizer).pattern


def _token_bytes(tokenizer: Tokenizer) -> list[bytes]:
    """The bytes of every id below the specials."""
    return tokenizer.id_to_bytes()[:tokenizer.vocab_size - N_SPECIAL]


def _check_no_duplicates(tokenizer: Tokenizer, what: str) -> None:
    dups = duplicate_tokens(tokenizer)
    if dups:
        shown = ", ".join(f"{i} = {j}" for i, j in dups[:5])
        raise DuplicateTokenError(
            f"cannot export to {what}: {len(dups)} token(s) spell the same bytes as an "
            f"earlier one (id = earlier id: {shown}{', ...' if len(dups) > 5 else ''}); "
            f"the format holds one id per byte string")


# ----------------------------------------------------------------------------- tiktoken

def _loaded_n_vocab(tokenizer) -> int | None:
    """explicit_n_vocab for a loaded vocabulary, None where tiktoken's check would fail
    (ids with gaps)."""
    n = tokenizer.n_tokens + len(tokenizer.specials)
    return n if n == tokenizer.vocab_size else None


def _check_tiktoken_exact(tokenizer) -> None:
    """ExportError unless tiktoken's rank rule gives the loaded vocabulary's ids."""
    inside = sorted(i for i in tokenizer.specials.values() if i < tokenizer.n_tokens)
    if inside:
        raise ExportError(f"cannot export {tokenizer.name} to tiktoken: special id "
                          f"{inside[0]} sits among the ordinary tokens (a ranks file holds "
                          "ranks 0..n-1, the specials above them)")
    if tokenizer.merges is None:
        return
    tokens = tokenizer.vocab.tokens
    index = {t: i for i, t in enumerate(tokens)}
    results = [index[tokens[a] + tokens[b]] for a, b in tokenizer.merges.tolist()]
    for k in range(1, len(results)):
        if results[k] <= results[k - 1]:
            raise ExportError(
                f"cannot export {tokenizer.name} to tiktoken: merge {k} makes id "
                f"{results[k]}, not above merge {k - 1}'s {results[k - 1]} (tiktoken merges "
                "by the rank of the merged bytes, so ranks must follow merge priority)")


def _export_tiktoken_loaded(tokenizer, path) -> None:
    if tokenizer.vocab.merge_ids:       # a vocabulary asmbpe trained above 65,535 ids
        _check_no_duplicates(tokenizer, "tiktoken")
    _check_tiktoken_exact(tokenizer)
    lines = b"".join(base64.b64encode(b) + b" %d\n" % i
                     for i, b in enumerate(tokenizer.vocab.tokens))
    sidecar = {
        "format": SIDECAR_FORMAT,
        "ranks_file": os.path.basename(os.fspath(path)),
        "name": tokenizer.name,
        "pat_str": pattern_of(tokenizer),
        "special_tokens": tokenizer.specials,
        "explicit_n_vocab": _loaded_n_vocab(tokenizer),
        "merges_hash": f"0x{tokenizer.merges_hash:016x}",
    }
    write_atomic(path, lines)
    write_atomic(os.fspath(path) + SIDECAR_SUFFIX,
                 json.dumps(sidecar, indent=1, ensure_ascii=True).encode() + b"\n")


def export_tiktoken(tokenizer: Tokenizer, path) -> None:
    """Write the tiktoken ranks file to path and its sidecar to path + ".json"."""
    if tokenizer.is_loaded:
        return _export_tiktoken_loaded(tokenizer, path)
    _check_no_duplicates(tokenizer, "tiktoken")
    lines = b"".join(base64.b64encode(b) + b" %d\n" % i
                     for i, b in enumerate(_token_bytes(tokenizer)))
    sidecar = {
        "format": SIDECAR_FORMAT,
        "ranks_file": os.path.basename(os.fspath(path)),
        "pat_str": pattern_of(tokenizer),
        "special_tokens": tokenizer.specials,
        "explicit_n_vocab": tokenizer.vocab_size,
        "merges_hash": f"0x{tokenizer.merges_hash:016x}",
    }
    write_atomic(path, lines)
    write_atomic(os.fspath(path) + SIDECAR_SUFFIX,
                  json.dumps(sidecar, indent=1, ensure_ascii=True).encode() + b"\n")


def _read_ranks(path) -> dict[bytes, int]:
    """A tiktoken ranks file, parsed here (see the module doc on tiktoken's cache)."""
    ranks = {}
    with open(path, "rb") as f:
        for lineno, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                token, rank = line.split()
                ranks[base64.b64decode(token, validate=True)] = int(rank)
            except ValueError as e:
                raise ValueError(f"{os.fspath(path)}:{lineno}: not a ranks line: "
                                 f"{line[:80]!r} ({e})") from None
    return ranks


def load_tiktoken(path, tokenizer: Tokenizer):
    """A tiktoken.Encoding from the files `export_tiktoken` wrote (ranks, and pattern and
    specials from the sidecar), after checking that they are those of `tokenizer`."""
    import tiktoken

    ranks = _read_ranks(path)
    with open(os.fspath(path) + SIDECAR_SUFFIX, encoding="utf-8") as f:
        sidecar = json.load(f)
    if tokenizer.is_loaded:
        expected = {b: i for i, b in enumerate(tokenizer.vocab.tokens)}
        n_vocab = _loaded_n_vocab(tokenizer)
    else:
        expected = {b: i for i, b in enumerate(_token_bytes(tokenizer))}
        n_vocab = tokenizer.vocab_size
    problems = [what for what, ok in (
        ("format", sidecar.get("format") == SIDECAR_FORMAT),
        ("ranks", ranks == expected),
        ("special_tokens", sidecar.get("special_tokens") == tokenizer.specials),
        ("pat_str", sidecar.get("pat_str") == pattern_of(tokenizer)),
        ("explicit_n_vocab", sidecar.get("explicit_n_vocab") == n_vocab),
    ) if not ok]
    if problems:
        raise ValueError(f"{os.fspath(path)}: not the tiktoken export of {tokenizer!r} "
                         f"(differs in: {', '.join(problems)})")
    return tiktoken.Encoding(
        f"asmbpe-{tokenizer.merges_hash:016x}",
        pat_str=sidecar["pat_str"],
        mergeable_ranks=ranks,
        special_tokens=sidecar["special_tokens"],
        explicit_n_vocab=sidecar["explicit_n_vocab"],
    )


# ------------------------------------------------------------------------ Hugging Face

def hf_tokenizer(tokenizer: Tokenizer):
    """The Hugging Face `tokenizers.Tokenizer` that `export_hf` saves (module doc)."""
    from tokenizers import AddedToken, Regex, decoders, models, pre_tokenizers
    from tokenizers import Tokenizer as HFTokenizer

    _check_no_duplicates(tokenizer, "a Hugging Face tokenizer.json")
    alphabet = bytes_to_unicode()
    strings = ["".join(alphabet[b] for b in t) for t in _token_bytes(tokenizer)]
    vocab = {s: i for i, s in enumerate(strings)}
    merges = [(strings[a], strings[b]) for a, b in tokenizer.merges.tolist()]
    hf = HFTokenizer(models.BPE(vocab=vocab, merges=merges, dropout=None, unk_token=None,
                                fuse_unk=False, byte_fallback=False, ignore_merges=False))
    hf.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(pattern_of(tokenizer)), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
    ])
    hf.decoder = decoders.ByteLevel()
    hf.add_special_tokens([AddedToken(name, special=True, normalized=False)
                           for name in SPECIALS])
    for name, i in tokenizer.specials.items():            # ids follow the vocab
        if hf.token_to_id(name) != i:
            raise AssertionError(f"HF gave {name} id {hf.token_to_id(name)}, expected {i}")
    return hf


def rank_merges(tokens: list[bytes]) -> tuple[list[tuple[int, int]], int]:
    """(merges in rank order, number of tokens that have none) of a tiktoken ranks
    table: for each token of two bytes or more, the two tokens that tiktoken's rule
    leaves when it encodes the token's bytes with the lower ranks only."""
    index = {t: i for i, t in enumerate(tokens)}
    merges, unreached = [], 0
    for r, t in enumerate(tokens):
        if len(t) < 2:
            continue
        parts = [t[k:k + 1] for k in range(len(t))]
        while len(parts) > 2:
            best = None
            for k in range(len(parts) - 1):
                q = index.get(parts[k] + parts[k + 1])
                if q is not None and q < r and (best is None or q < best[0]):
                    best = (q, k)
            if best is None:
                break
            k = best[1]
            parts[k:k + 2] = [parts[k] + parts[k + 1]]
        if len(parts) == 2 and index[parts[0]] < r and index[parts[1]] < r:
            merges.append((index[parts[0]], index[parts[1]]))
        else:
            unreached += 1
    return merges, unreached


def _hf_pattern(tokenizer) -> str:
    """The Split pattern a tokenizer.json export carries (module doc: cl100k's)."""
    return pattern_of(tokenizer).replace(r"\p{N}{1,3}+", r"\p{N}{1,3}")


PLACEHOLDER = "<|asmbpe_unused_{}|>"


def _with_placeholders(tokenizer) -> dict[str, int]:
    """The specials, plus a placeholder special (PLACEHOLDER) for each id between the
    ordinary tokens and the highest special that is no token: tokenizers numbers its
    added tokens one after another whatever ids the file gives them, so without them
    cl100k_base's <|endoftext|> would become 100256 instead of 100257."""
    out = dict(tokenizer.specials)
    taken = set(out.values())
    for i in range(tokenizer.n_tokens, tokenizer.vocab_size):
        if i not in taken:
            out[PLACEHOLDER.format(i)] = i
    return out


def hf_json_loaded(tokenizer) -> dict:
    """The tokenizer.json of a loaded vocabulary, as a dict (module doc)."""
    alphabet = bytes_to_unicode()
    vocab = tokenizer.vocab
    specials = tokenizer.specials
    special_at = {i: n for n, i in specials.items()}
    strings = [special_at[i] if i in special_at else "".join(alphabet[b] for b in t)
               for i, t in enumerate(vocab.tokens)]
    if vocab.merges is not None:
        merges = [list(p) for p in vocab.merges]
        whole = vocab.whole_chunk
    else:
        merges, _ = rank_merges(vocab.tokens)
        whole = True
    return {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": [
            {"id": i, "content": n, "single_word": False, "lstrip": False, "rstrip": False,
             "normalized": False, "special": True}
            for n, i in sorted(_with_placeholders(tokenizer).items(), key=lambda kv: kv[1])],
        "normalizer": None,
        "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
            {"type": "Split", "pattern": {"Regex": _hf_pattern(tokenizer)},
             "behavior": "Isolated", "invert": False},
            {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True,
             "use_regex": False}]},
        "post_processor": None,
        "decoder": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True,
                    "use_regex": True},
        "model": {"type": "BPE", "dropout": None, "unk_token": None,
                  "continuing_subword_prefix": None, "end_of_word_suffix": None,
                  "fuse_unk": False, "byte_fallback": False, "ignore_merges": whole,
                  "vocab": {s: i for i, s in enumerate(strings)},
                  "merges": [[strings[a], strings[b]] for a, b in merges]},
    }


def export_hf(tokenizer: Tokenizer, path) -> None:
    """Write a Hugging Face tokenizer.json to path (module doc)."""
    if tokenizer.is_loaded:
        if tokenizer.vocab.merge_ids:   # a vocabulary asmbpe trained above 65,535 ids
            _check_no_duplicates(tokenizer, "Hugging Face tokenizers")
        data = json.dumps(hf_json_loaded(tokenizer), ensure_ascii=False, indent=1)
        return write_atomic(path, data.encode("utf-8"))
    write_atomic(path, hf_tokenizer(tokenizer).to_str(pretty=True).encode("utf-8"))


def load_hf(path):
    """The tokenizer.json at path, with special-token text encoded as ordinary text
    (`encode_special_tokens`, which the file cannot hold), as asmbpe does."""
    from tokenizers import Tokenizer as HFTokenizer

    hf = HFTokenizer.from_file(os.fspath(path))
    hf.encode_special_tokens = True
    return hf


# ------------------------------------------------------------------------- comparisons

def first_difference(tokenizer: Tokenizer, docs, library: str = "hf",
                     batch: int = 256) -> int | None:
    """Index of the first document that the exported tokenizer (exported to a temporary
    directory and loaded back) encodes differently from `tokenizer.encode`, or None.

    docs: str, or bytes that are valid UTF-8 (both libraries take text only).
    library: "hf" (encode_batch with no added tokens; the oracle of SPEC §6) or
    "tiktoken" (encode_ordinary_batch). Compared `batch` documents at a time."""
    if library not in ("hf", "tiktoken"):
        raise ValueError(f"library must be 'hf' or 'tiktoken', got {library!r}")
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "tokenizer.json" if library == "hf" else "ranks.tiktoken")
        if library == "hf":
            export_hf(tokenizer, path)
            hf = load_hf(path)

            def other(texts):
                return [e.ids for e in hf.encode_batch(texts, add_special_tokens=False)]
        else:
            export_tiktoken(tokenizer, path)
            enc = load_tiktoken(path, tokenizer)
            other = enc.encode_ordinary_batch
    for lo in range(0, len(docs), batch):
        texts = [d if isinstance(d, str) else bytes(d).decode("utf-8")
                 for d in docs[lo:lo + batch]]
        ours = tokenizer.encode_batch(texts)
        for k, (a, b) in enumerate(zip(ours, other(texts))):
            if a.tolist() != list(b):
                return lo + k
    return None


# ---------------------------------------------------------------------- vocabulary dump

VOCAB_HEADER = "id\ttoken\tleft\tright\tcount\tkind"
VOCAB_KINDS = ("byte", "merge", "token", "special")   # token: no merge makes it
_ESCAPES = {"\\": "\\\\", '"': '\\"', "\t": "\\t", "\n": "\\n", "\r": "\\r"}
_UNESCAPES = {"\\": "\\", '"': '"', "t": "\t", "n": "\n", "r": "\r"}


def token_repr(data: bytes) -> str:
    """Bytes as the vocabulary dump shows them: in double quotes (so spaces show), the
    UTF-8 text as it is, except `\\` `\\"` `\\t` `\\n` `\\r`, `\\xNN` for each byte
    that is not part of valid UTF-8 (a partial character) and `\\uNNNN` /
    `\\UNNNNNNNN` for each character that is not printable (str.isprintable: other
    controls, U+0085, no-break and other spaces but U+0020, format characters).
    parse_token_repr gives the bytes back."""
    out = ['"']
    for ch in bytes(data).decode("utf-8", "surrogateescape"):
        if ch in _ESCAPES:
            out.append(_ESCAPES[ch])
        elif "\udc80" <= ch <= "\udcff":             # a byte surrogateescape kept
            out.append(f"\\x{ord(ch) - 0xDC00:02x}")
        elif not ch.isprintable():
            out.append(f"\\u{ord(ch):04x}" if ord(ch) <= 0xFFFF else f"\\U{ord(ch):08x}")
        else:
            out.append(ch)
    out.append('"')
    return "".join(out)


def parse_token_repr(text: str) -> bytes:
    """The bytes of a `token_repr` string; ValueError for one it cannot have written."""
    if len(text) < 2 or text[0] != '"' or text[-1] != '"':
        raise ValueError(f"not a quoted token: {text[:80]!r}")
    out = bytearray()
    body, k = text[1:-1], 0
    while k < len(body):
        ch = body[k]
        if ch == '"':
            raise ValueError(f"unescaped quote at {k + 1} in {text[:80]!r}")
        if ch != "\\":
            out += ch.encode("utf-8", "surrogatepass")
            k += 1
            continue
        kind = body[k + 1:k + 2]
        if kind in _UNESCAPES:
            out += _UNESCAPES[kind].encode()
            k += 2
            continue
        width = {"x": 2, "u": 4, "U": 8}.get(kind)
        digits = body[k + 2:k + 2 + width] if width else ""
        if not width or len(digits) != width or not all(
                c in "0123456789abcdefABCDEF" for c in digits):
            raise ValueError(f"bad escape at {k + 1} in {text[:80]!r}")
        value = int(digits, 16)
        out += bytes([value]) if kind == "x" else chr(value).encode("utf-8", "surrogatepass")
        k += 2 + width
    return bytes(out)


class VocabRow(NamedTuple):
    """One line of the vocabulary dump: left, right and count are None where empty."""

    id: int
    token: bytes
    left: int | None
    right: int | None
    count: int | None
    kind: str


def _parts(tokenizer) -> dict[int, tuple[int, int]]:
    """id -> (left, right) for every token a merge makes (module doc)."""
    if not tokenizer.is_loaded:
        return {256 + k: (a, b) for k, (a, b) in enumerate(tokenizer.merges.tolist())}
    tokens = tokenizer.vocab.tokens
    index = {t: i for i, t in enumerate(tokens)}
    pairs = (tokenizer.merges.tolist() if tokenizer.merges is not None
             else rank_merges(tokens)[0])
    parts: dict[int, tuple[int, int]] = {}
    for a, b in pairs:
        parts.setdefault(index[tokens[a] + tokens[b]], (a, b))
    return parts


def vocab_rows(tokenizer: Tokenizer, counts=None) -> list[VocabRow]:
    """The rows of the vocabulary dump, in id order: every id that is a token or a
    special. counts: the winning count of each merge (`TrainResult.counts`, M values)
    for asmbpe's own tokenizers; None leaves the column empty."""
    if counts is not None:
        if tokenizer.is_loaded:
            raise ValueError("counts belong to asmbpe's own merges; a loaded vocabulary "
                             "has none")
        counts = [int(c) for c in counts]
        if len(counts) != tokenizer.n_merges:
            raise ValueError(f"{len(counts)} counts for {tokenizer.n_merges} merges")
    special_at = {i: n for n, i in tokenizer.specials.items()}
    parts = _parts(tokenizer)
    rows = []
    for i, data in enumerate(tokenizer.id_to_bytes()):
        left = right = count = None
        if i in special_at:
            kind, data = "special", special_at[i].encode("utf-8")
        elif not data:
            continue                                  # a gap: no token has this id
        elif i in parts:
            kind, (left, right) = "merge", parts[i]
            if counts is not None:
                count = counts[i - 256]
        else:
            kind = "byte" if len(data) == 1 else "token"
        rows.append(VocabRow(i, data, left, right, count, kind))
    return rows


def export_vocab(tokenizer: Tokenizer, path, counts=None) -> None:
    """Write the vocabulary dump of `tokenizer` to path (module doc, docs/FORMATS.md);
    counts as in `vocab_rows`."""
    def cell(v):
        return "" if v is None else str(v)

    lines = [VOCAB_HEADER] + [
        f"{r.id}\t{token_repr(r.token)}\t{cell(r.left)}\t{cell(r.right)}\t{cell(r.count)}"
        f"\t{r.kind}" for r in vocab_rows(tokenizer, counts)]
    write_atomic(path, ("\n".join(lines) + "\n").encode("utf-8"))


def read_vocab(path) -> list[VocabRow]:
    """The rows of a vocabulary dump, token bytes parsed back; ValueError naming the
    line of a bad one."""
    with open(path, encoding="utf-8") as f:
        lines = f.read().splitlines()
    if not lines or lines[0] != VOCAB_HEADER:
        raise ValueError(f"{os.fspath(path)}: not a vocabulary dump (the first line is "
                         f"not {VOCAB_HEADER!r})")
    rows = []
    for lineno, line in enumerate(lines[1:], 2):
        try:
            i, token, left, right, count, kind = line.split("\t")
            if kind not in VOCAB_KINDS:
                raise ValueError(f"unknown kind {kind!r}")
            rows.append(VocabRow(int(i), parse_token_repr(token),
                                 *(int(v) if v else None for v in (left, right, count)),
                                 kind))
        except ValueError as e:
            raise ValueError(f"{os.fspath(path)}:{lineno}: {e}") from None
    return rows
