"""The tokenizer: its vocabulary layout (SPEC §5) and `tokenizer.bin` (SPEC §7, §11).

This module is the one place that knows the file format (docs/FORMATS.md spells out
both versions byte by byte). All integers little-endian. Version 1, asmbpe's own
tokenizers (merges, u16 ids):

    0   8 bytes  magic "ASMBPETK"
    8   u16      format version (1)
    10  u16      pre-tokenizer id (harness.pretokenizers: 1 seed = SPEC §3, 2 nanochat,
                 3 cl100k, 4 o200k, 5 gpt2; SPEC §10)
    12  u32      vocab_size
    16  u32      n_merges
    20  u32      n_special (16)
    24  u64      FNV-1a-64 hash of the merge table bytes
    32  u32 x n_merges: left id in bits 0-15, right id in bits 16-31

Version 2, a loaded vocabulary (SPEC §11: a tiktoken ranks file or a tokenizer.json;
`harness.loaded.LoadedTokenizer`), a 64-byte header then the body:

    0   8 bytes  magic "ASMBPETK"
    8   u16      format version (2)
    10  u16      pre-tokenizer id (as in version 1)
    12  u32      n_tokens: ordinary tokens, ids 0 .. n_tokens - 1 (at least 256)
    16  u32      n_merges (0 unless flags bit 1)
    20  u32      n_special
    24  u64      identity hash: blake2b, 8-byte digest, read as a little-endian u64,
                 of the pre-tokenizer id (u16) and flags (u32) followed by the body
                 from offset 64 up to (not including) the name
    32  u64      token_bytes: the length of all token bytes together
    40  u32      special_bytes: the length of all special names together
    44  u32      flags: bit 0 whole_chunk (a chunk that is a token is that token),
                 bit 1 merges (tokenizer.json: merge priorities; else tiktoken ranks),
                 bit 2 merge_ids (with bit 1: merge i makes id 256 + i, as asmbpe's
                 training lays ids out; n_merges = n_tokens - 256, tokens may repeat)
    48  u32      name_len: the length of the name (UTF-8)
    52  12 bytes reserved (0)
    64  u64 x (n_tokens + 1)   token offsets: token i is bytes offset[i] .. offset[i+1]
                               of the token bytes; offset[0] = 0, each token at least
                               one byte, offset[n_tokens] = token_bytes
        token_bytes bytes      the tokens' bytes, in id order
        (u32 id, u32 length) x n_special   specials in increasing id order
        special_bytes bytes    their names (UTF-8), in the same order
        (u32 left, u32 right) x n_merges   merges in priority order (flags bit 1)
        name_len bytes         the vocabulary's name (display only, not hashed)

Rules version 2 adds (each refused with TokenizerFileError naming offset and problem):
every token distinct (unless flags bit 2: then token 256 + i is merge i's two tokens
together, each id below 256 + i, and ids 0..255 are the bytes in order); all 256 single bytes are tokens; a special's id is not 0xFFFFFFFF,
is not an ordinary token's id unless that token's bytes are the special's name (a
tokenizer.json may keep its specials in its vocab), and names are non-empty, distinct,
UTF-8; a merge's two ids are tokens and their bytes together are a token; the file is
exactly as long as the header says (no trailing bytes); the hash matches. The identity
hash is what `Tokenizer.merges_hash` gives for a loaded vocabulary and what `.tok`
files written with it record.

`Tokenizer.load` / `from_bytes` read both versions (the version field decides);
`save` writes version 1 for asmbpe's own tokenizers (unchanged) and version 2 for
loaded vocabularies.

Vocabulary: ids 0..255 are the bytes, merge i makes id 256 + i, and the 16 specials
are the top ids, vocab_size - 16 .. vocab_size - 1, in the order of `SPECIALS`. So
vocab_size = 256 + n_merges + 16 always; when training stops early (no pair left with
min_count) the tokenizer is smaller than asked and the specials move down with it.

Pre-tokenizer: every tokenizer encodes with the pre-tokenizer it was trained with
(`Tokenizer.pretokenizer`, a name of harness.pretokenizers), whose id the file stores.
Files written before the exact pre-tokenizers existed hold id 1 and load as seed.

`Tokenizer.load` refuses every bad file listed in SPEC §7 with a `TokenizerFileError`
whose message names the file, the problem and its byte offset; an unknown pre-tokenizer
id is one of them. The constructor makes the same checks on the merges it is given (a
plain ValueError, no offsets).
"""
from __future__ import annotations

import functools
import operator
import os
import struct
from collections.abc import Iterable, Mapping, Sequence
from typing import NamedTuple, Union

from ._lazy import lazy_numpy

from .errors import AsmbpeError
from .pretokenizers import DEFAULT as DEFAULT_PRETOKENIZER
from .pretokenizers import PRETOKENIZERS, resolve

np = lazy_numpy(globals())    # numpy imported on first use (harness/_lazy.py)

__all__ = [
    "Document", "TokenIds", "PathArg", "AllowedSpecial", "PretokenizerArg",
    "MAGIC", "VERSION", "N_BYTES", "N_SPECIAL", "MAX_VOCAB", "HEADER_SIZE",
    "SPECIALS", "MASKBIT", "CHAT_ROLES", "fnv1a64", "TokenizerFileError", "Tokenizer",
    "VERSION_LOADED", "HEADER2_SIZE", "identity_hash", "v2_body", "v2_image", "parse_v2",
    "split_specials", "insert_per_document",
]

# The types of the public API's arguments.
Document = Union[str, bytes, bytearray, memoryview]
"""A document: str (encoded as UTF-8, lone surrogates passed through) or bytes-like (any
bytes, valid UTF-8 or not)."""
TokenIds = Union[Sequence[int], "np.ndarray"]
"""A sequence of ids: a list of ints or a 1-D integer numpy array."""
PathArg = Union[str, "os.PathLike[str]"]
"""A file's path: a str or a path-like object (pathlib.Path)."""
AllowedSpecial = Union[str, Iterable[str]]
"""The specials whose text becomes their id (tiktoken's `allowed_special`): "all", one
name, or names; () (the default) for none."""
PretokenizerArg = Union[str, int]
"""A pre-tokenizer of harness.pretokenizers: its name ("nanochat", "cl100k", ...) or id."""

MAGIC = b"ASMBPETK"
VERSION = 1
N_BYTES = 256
N_SPECIAL = 16
MAX_VOCAB = 65535      # ids are u16 and 0xFFFF is never a token
MAX_MERGES = MAX_VOCAB - N_BYTES - N_SPECIAL
HEADER_SIZE = 32

SPECIALS = ["<|bos|>", "<|user|>", "<|assistant|>", "<|system|>", "<|end|>"] + [
    f"<|reserved_{k}|>" for k in range(11)
]
assert len(SPECIALS) == N_SPECIAL

MASKBIT = 0x8000       # chat output: set on the tokens the model should learn (SPEC §5)
CHAT_ROLES = ("user", "assistant", "system")   # each has the special <|role|>

# magic, version, pre-tokenizer id, vocab_size, n_merges, n_special, hash
_HEADER = struct.Struct("<8sHHIIIQ")
assert _HEADER.size == HEADER_SIZE
OFF_MAGIC, OFF_VERSION, OFF_PRETOK, OFF_VOCAB, OFF_NMERGES, OFF_NSPECIAL, OFF_HASH = (
    0, 8, 10, 12, 16, 20, 24)

def fnv1a64(data) -> int:
    """FNV-1a, 64 bits, of a bytes-like object: the library's `asmbpe_fnv1a64`
    (0.2 ms for a table of 32,496 merges, where a Python loop took 14 ms on every
    train, save and load). harness.dev.twin.fnv1a64 is its twin."""
    from ._lib import ffi, lib

    data = bytes(data)
    return int(lib().asmbpe_fnv1a64(ffi.from_buffer(data), len(data)))


class TokenizerFileError(AsmbpeError, ValueError):
    """A `tokenizer.bin` that cannot be used. The message names the file, the problem
    and the byte offset; `.path`, `.offset` and `.problem` hold them too."""

    def __init__(self, path: PathArg, offset: int, problem: str) -> None:
        self.path = str(path)
        self.offset = offset
        self.problem = problem
        super().__init__(f"{self.path}: {problem}")


# ------------------------------------------------------------------------ merge checks

def _as_merges(merges) -> np.ndarray:
    """merges as a C-contiguous (M, 2) uint16 array; ValueError if it cannot be one."""
    arr = np.asarray(merges)
    if arr.size == 0:
        return np.zeros((0, 2), dtype=np.uint16)
    if arr.ndim != 2 or arr.shape[1] != 2:
        raise ValueError(f"merges must have shape (M, 2), got {arr.shape}")
    if arr.dtype.kind not in "iu":
        raise ValueError(f"merges must be integers, got dtype {arr.dtype}")
    if arr.min() < 0 or arr.max() > 0xFFFF:
        raise ValueError("merges hold ids outside 0..65535")
    return np.ascontiguousarray(arr, dtype=np.uint16)


def _first_merge_problem(merges: np.ndarray):
    """(index, side, message) of the first merge that references an id not yet defined
    (>= 256 + its index; side 0 = left, 1 = right) or repeats an earlier pair; None when
    every merge is fine. Merge checks of SPEC §7, shared by the loader and constructor."""
    limit = N_BYTES + np.arange(len(merges), dtype=np.int64)
    bad = merges.astype(np.int64) >= limit[:, None]
    first_bad = int(np.argmax(bad.any(axis=1))) if bad.any() else len(merges)
    head = merges[:first_bad].astype(np.uint32)
    keys = head[:, 0] << 16 | head[:, 1]
    order = np.argsort(keys, kind="stable")     # equal keys keep their merge order
    ordered = keys[order]
    repeats = order[1:][ordered[1:] == ordered[:-1]]
    if len(repeats):
        i = int(repeats.min())                  # the first merge that repeats a pair
        j = int(order[np.searchsorted(ordered, keys[i])])
        a, b = (int(x) for x in merges[i])
        return i, 0, f"repeats the pair ({a}, {b}) of merge {j}"
    if first_bad < len(merges):
        i = first_bad
        side = 0 if bad[i, 0] else 1
        ident = int(merges[i, side])
        which = "left" if side == 0 else "right"
        return i, side, (f"references id {ident} not yet defined ({which} side; "
                         f"must be < {N_BYTES + i})")
    return None


def _check_counts(vocab_size: int, n_merges: int, n_special: int = N_SPECIAL):
    """Message for a vocab_size / n_merges / n_special that disagree, or None."""
    if n_special != N_SPECIAL:
        return f"n_special {n_special}, expected {N_SPECIAL}"
    if vocab_size != N_BYTES + n_merges + n_special:
        return (f"vocab_size {vocab_size} != 256 + n_merges {n_merges} + n_special "
                f"{n_special} = {N_BYTES + n_merges + n_special}")
    if vocab_size > MAX_VOCAB:
        return f"vocab_size {vocab_size} is above {MAX_VOCAB} (ids are u16, 0xFFFF is never a token)"
    return None


# ---------------------------------------------------------------------------- Tokenizer

class Tokenizer:
    """A trained tokenizer: its merges and vocabulary layout (SPEC §5).

    Tokenizer(merges, vocab_size=None, pretokenizer="nanochat"): merges is an (M, 2)
    array of ids, merge i making id 256 + i; vocab_size, when given, must be 256 + M +
    16; pretokenizer: a name or id of harness.pretokenizers, the one the merges were
    learned with (every encode uses it).

    Encoding (`encode`, `encode_batch`, `encode_document`, `encode_many`,
    `render_chat`) goes through `harness.encoder.encode_many`. str input is encoded as
    UTF-8 (lone surrogates passed through); bytes may be anything. Special tokens are
    only ever produced by `bos=True`, `encode_document` and `render_chat`: special-token
    text inside ordinary text (e.g. the string "<|bos|>") is encoded as ordinary text,
    byte by byte and merged like any other text, never turned into a special id.
    `decode_bytes` / `decode` map ids back (specials to their names' text).

    tiktoken's names work too: `n_vocab`, `encode_ordinary` / `encode_ordinary_batch`,
    `decode_batch` / `decode_bytes_batch`, `decode_single_token_bytes` (=
    `token_bytes`), `encode_single_token` (= `id_of`), `special_tokens`. A tokenizer
    pickles (its tokenizer.bin image; the library's tables are made again by the first
    encode after unpickling), so it can go to other processes (multiprocessing's
    spawn, `datasets.map(num_proc=...)`, DataLoader workers).
    """

    def __init__(self, merges: np.typing.ArrayLike, vocab_size: int | None = None, *,
                 pretokenizer: PretokenizerArg = DEFAULT_PRETOKENIZER) -> None:
        self._pretok = resolve(pretokenizer)
        arr = _as_merges(merges)
        n = len(arr)
        if vocab_size is None:
            vocab_size = N_BYTES + n + N_SPECIAL
        if isinstance(vocab_size, bool) or not (isinstance(vocab_size, int)
                                                or isinstance(vocab_size, np.integer)):
            raise TypeError(f"vocab_size must be an integer, got {vocab_size!r}")
        vocab_size = int(vocab_size)
        problem = _check_counts(vocab_size, n)
        if problem:
            raise ValueError(f"bad tokenizer: {problem}")
        found = _first_merge_problem(arr)
        if found:
            raise ValueError(f"bad tokenizer: merge {found[0]} {found[2]}")
        arr.flags.writeable = False
        self._merges = arr
        # (M, 2) little-endian u16, row-major == one u32 left | right << 16 per merge
        self._table = arr.astype("<u2", copy=False).tobytes()
        self._vocab_size = vocab_size
        self._hash = fnv1a64(self._table)

    @classmethod
    def _trained(cls, table: bytes, pretokenizer: PretokenizerArg) -> "Tokenizer":
        """The tokenizer of the merges asmbpe_train just learned, from its output as
        is: `table`, one u32 left | right << 16 per merge (tokenizer.bin's table).
        Not checked as the constructor checks (the trainer makes each merge of ids
        below it, and never a pair twice; the training tests compare every merge with
        the twin's), and without numpy: `asmbpe train` never imports it
        (harness/_lazy.py); the merges array is made on first use."""
        self = cls.__new__(cls)
        self._pretok = resolve(pretokenizer)
        self._table = bytes(table)
        self._vocab_size = N_BYTES + len(self._table) // 4 + N_SPECIAL
        self._hash = fnv1a64(self._table)
        return self

    @functools.cached_property
    def _merges(self) -> np.ndarray:
        """(M, 2) uint16, read-only, from `_table` (a tokenizer `_trained` made)."""
        return np.frombuffer(self._table, dtype="<u2").reshape(-1, 2)

    # -- pickling: the definition, never the library's state

    def __getstate__(self) -> dict:
        """What pickle keeps: the tokenizer.bin image (SPEC §7), 32 + 4 * n_merges
        bytes. The library's encoder (a cffi handle to its tables and caches) and the
        tables `token_bytes` and `id_of` build stay behind: the first call that needs
        them after unpickling builds them again. So a tokenizer can be sent to other
        processes (multiprocessing's spawn, `datasets.map(num_proc=...)`, DataLoader
        workers) after it has encoded."""
        return {"tokenizer.bin": self.to_bytes()}

    def __setstate__(self, state: dict) -> None:
        other = Tokenizer.from_bytes(state["tokenizer.bin"], "pickled tokenizer")
        self.__dict__.update(vars(other))

    # -- properties

    @property
    def merges(self) -> np.ndarray:
        """(M, 2) uint16, read-only: merge i made id 256 + i from (left, right)."""
        return self._merges

    @property
    def vocab_size(self) -> int:
        """The number of ids: 256 + n_merges + 16 (SPEC §5); for a loaded vocabulary one
        more than its highest id (= `n_vocab`)."""
        return self._vocab_size

    @property
    def pretokenizer(self) -> str:
        """The name of the pre-tokenizer this tokenizer splits text with (a name of
        harness.pretokenizers; tokenizer.bin stores its id)."""
        return self._pretok.name

    @property
    def n_merges(self) -> int:
        """The number of merges: merge i made id 256 + i."""
        return len(self._table) // 4

    @property
    def n_vocab(self) -> int:
        """One more than the highest id (tiktoken's name): vocab_size."""
        return self.vocab_size

    @property
    def dtype(self) -> np.dtype:
        """The ids' numpy dtype: uint16 when every id (specials included) is below
        65535, else uint32 (SPEC §11). asmbpe's own tokenizers: always uint16."""
        return np.dtype(np.uint16)

    @property
    def name(self) -> str:
        """What the tokenizer is called in messages: "asmbpe" for asmbpe's own."""
        return "asmbpe"

    @property
    def is_loaded(self) -> bool:
        """Whether this is a loaded vocabulary (tiktoken ranks, tokenizer.json), not one
        asmbpe trained."""
        return False

    @property
    def special_tokens(self) -> dict[str, int]:
        """specials under tiktoken's name for them."""
        return self.specials

    @property
    def bos_id(self) -> int | None:
        """The id of <|bos|>, which `bos=True`, `encode_document` and `render_chat`
        put first."""
        return self.special_id("<|bos|>")

    def describe(self) -> list[str]:
        """Lines that say what the tokenizer is (`asmbpe show` and `stats` print them
        for loaded vocabularies)."""
        return [f"vocabulary       {self.name} ({self.vocab_size:,} ids, "
                f"{self.n_merges:,} merges)",
                f"pre-tokenizer    {resolve(self.pretokenizer)}",
                "specials         " + ", ".join(f"{n} {i}" for n, i in self.specials.items()),
                f"ids              {self.dtype.name}"]

    # -- loaded vocabularies (SPEC §11): harness.loaded.LoadedTokenizer

    @classmethod
    def from_tiktoken(cls, path: PathArg, pretokenizer: PretokenizerArg | None = None,
                      special_tokens: Mapping[str, int] | None = None) -> "Tokenizer":
        """A tokenizer for a tiktoken ranks file (.tiktoken, or gzip-compressed):
        cl100k_base and o200k_base are recognised (by the sha256 of the decompressed
        file) with their pattern and specials; any other file needs `pretokenizer`
        (never guessed). `special_tokens` (name -> id) overrides the specials. Encodes
        through harness.rank.RankEncoder; ids in `dtype`."""
        from .loaded import LoadedTokenizer
        from .vocab import from_tiktoken
        return LoadedTokenizer(from_tiktoken(path, pretokenizer, special_tokens))

    @classmethod
    def from_hf(cls, path: PathArg) -> "Tokenizer":
        """A tokenizer for a Hugging Face tokenizer.json (byte-level BPE; the
        pre-tokenizers harness.vocab.from_hf accepts; ignore_merges honoured)."""
        from .loaded import LoadedTokenizer
        from .vocab import from_hf
        return LoadedTokenizer(from_hf(path))

    @classmethod
    def named(cls, name: str, path: PathArg) -> "Tokenizer":
        """A known tiktoken encoding ("cl100k_base", "o200k_base") from its ranks file at
        path; ValueError when the file is not that encoding."""
        from .vocab import KNOWN_ENCODINGS
        if name not in KNOWN_ENCODINGS:
            raise ValueError(f"unknown encoding {name!r}; the known ones are "
                             f"{', '.join(KNOWN_ENCODINGS)}")
        tok = cls.from_tiktoken(path)
        if tok.name != name:
            raise ValueError(f"{path}: is not {name} (its sha256 is not {name}'s)")
        return tok

    @property
    def specials(self) -> dict[str, int]:
        """Special token name -> id (the top 16 ids, SPEC §5)."""
        base = self._vocab_size - N_SPECIAL
        return {name: base + k for k, name in enumerate(SPECIALS)}

    def special_id(self, name: str) -> int:
        """The id of the special named `name` ("<|bos|>"); KeyError listing the
        specials when there is none of that name."""
        try:
            return self._vocab_size - N_SPECIAL + SPECIALS.index(name)
        except ValueError:
            raise KeyError(f"unknown special token {name!r}; the specials are "
                           f"{', '.join(SPECIALS)}") from None

    @property
    def merges_hash(self) -> int:
        """FNV-1a-64 of the merge table as stored in tokenizer.bin (little-endian u32
        per merge: left | right << 16). `.tok` files record it."""
        return self._hash

    def _table_bytes(self) -> bytes:
        """tokenizer.bin's merge table: one u32 left | right << 16 per merge."""
        return self._table

    def id_to_bytes(self) -> list[bytes]:
        """The bytes of every id, a list of length vocab_size: the 256 bytes, each merged
        token as the concatenation of its two parts, and each special as the UTF-8 of its
        name (e.g. b"<|bos|>"; decoding will treat specials by id, not by these bytes)."""
        table = [bytes([b]) for b in range(N_BYTES)]
        for a, b in self._merges.tolist():
            table.append(table[a] + table[b])
        table.extend(name.encode() for name in SPECIALS)
        return table

    def _bytes_table(self) -> list[bytes]:
        """id_to_bytes(), made once per tokenizer (not pickled); b"" marks an id that
        is no token (a loaded vocabulary's gaps). Never handed out: it is not a copy."""
        table = self.__dict__.get("_id_bytes")
        if table is None:
            table = self.__dict__.setdefault("_id_bytes", self.id_to_bytes())
        return table

    def token_bytes(self, token: int) -> bytes:
        """The bytes of one id (tiktoken's `decode_single_token_bytes`, an alias): a
        token's bytes, or the UTF-8 of a special's name (b"<|bos|>"). KeyError for an
        id that is no token (out of range, or a gap of a loaded vocabulary such as
        cl100k_base's 100256). MASKBIT is not stripped: pass plain ids."""
        i = operator.index(token)
        table = self._bytes_table()
        if not 0 <= i < len(table) or not table[i]:
            raise KeyError(f"id {i} is not a token of {self.name} "
                           f"(n_vocab {self.n_vocab})")
        return table[i]

    decode_single_token_bytes = token_bytes

    def id_of(self, token: bytes | str) -> int:
        """The id of one token given by its bytes or text (tiktoken's
        `encode_single_token`, an alias): the ordinary token whose bytes are exactly
        these, else the special of that name (as text or its UTF-8 bytes). str is
        encoded as UTF-8. KeyError naming the bytes when they are neither (nothing is
        encoded: bytes that encode to several ids are no single token)."""
        if isinstance(token, str):
            data = token.encode("utf-8", "surrogatepass")
        elif isinstance(token, (bytes, bytearray, memoryview)):
            data = bytes(token)
        else:
            raise TypeError(f"expected bytes or str, got {type(token).__name__}")
        index = self.__dict__.get("_id_index")
        if index is None:
            specials = self.specials
            special_ids = set(specials.values())
            index = {}
            for i, b in enumerate(self._bytes_table()):
                if b and i not in special_ids:
                    index.setdefault(b, i)          # the lower id of two equal tokens
            for n, i in specials.items():
                index.setdefault(n.encode("utf-8"), i)
            index = self.__dict__.setdefault("_id_index", index)
        try:
            return index[data]
        except KeyError:
            raise KeyError(f"{data[:80]!r} is not a token of {self.name} (nor a special's "
                           "name)") from None

    encode_single_token = id_of

    # -- encoding (SPEC §6); every path goes through harness.encoder.encode_many

    def encode_many(self, docs: Iterable[Document], threads: int | None = None, *,
                    bos: bool = False, cache: bool = True,
                    allowed_special: AllowedSpecial = ()) -> tuple[np.ndarray, np.ndarray]:
        """Encode a list of documents (str as UTF-8, surrogates passed through, or
        bytes-like) in one call: (every document's tokens concatenated in order, uint16;
        the token count of each document, uint64). bos: prefix each with <|bos|>.
        allowed_special: names of specials (or "all") whose text becomes their id, as
        tiktoken's; by default special text is ordinary text."""
        from . import encoder
        from .buffers import TextBatch

        if allowed_special:
            specials = allowed_specials(self, allowed_special)
            datas = [_doc_bytes(d, k) for k, d in enumerate(docs)]
            ids, counts = encode_with_specials(self, datas, specials, threads, self.dtype)
            if bos:
                ids, counts = insert_per_document(ids, counts, self.bos_id, "start")
            return ids, counts

        if isinstance(docs, TextBatch):
            data = docs
        else:
            docs = docs if isinstance(docs, (list, tuple)) else list(docs)
            # a list of bytes as it is (the common case: no call per document)
            data = docs if set(map(type, docs)) <= {bytes} else [
                _doc_bytes(doc, k) for k, doc in enumerate(docs)]
        return encoder.encode_many(self, data, threads, bos=bos, cache=cache)

    def encode(self, text: Document, allowed_special: AllowedSpecial = (), *,
               bos: bool = False, cache: bool = True) -> np.ndarray:
        """The tokens (`dtype`) of one str or bytes; bos: prefix <|bos|>;
        allowed_special: as tiktoken's (special text is ordinary text by default)."""
        tokens, _ = self.encode_many([text], bos=bos, cache=cache,
                                     allowed_special=allowed_special)
        return tokens

    def encode_document(self, text: Document) -> np.ndarray:
        """A plain document as SPEC §5 encodes it: <|bos|> + its text."""
        return self.encode(text, bos=True)

    def encode_batch(self, docs: Iterable[Document], threads: int | None = None, *,
                     bos: bool = False,
                     allowed_special: AllowedSpecial = ()) -> list[np.ndarray]:
        """The tokens of each document, one array each (views into one array)."""
        tokens, counts = self.encode_many(docs, threads, bos=bos,
                                          allowed_special=allowed_special)
        ends = np.cumsum(counts, dtype=np.int64)
        return [tokens[e - c:e] for e, c in zip(ends.tolist(), counts.tolist())]

    def encode_ordinary(self, text: Document) -> np.ndarray:
        """The ids of text with special-token text as ordinary text (tiktoken's name;
        asmbpe's `encode` does the same unless `allowed_special` names specials)."""
        return self.encode(text)

    def encode_ordinary_batch(self, docs: Iterable[Document],
                              threads: int | None = None) -> list[np.ndarray]:
        """`encode_ordinary` of each document, in one call (`encode_batch`)."""
        return self.encode_batch(docs, threads)

    def render_chat(self, messages: Iterable[Mapping[str, str]]) -> np.ndarray:
        """A conversation as SPEC §5 encodes it (uint16): <|bos|>, then for each message
        its role's token, its content's tokens and <|end|>, with MASKBIT (0x8000) set
        on each assistant message's content tokens and its <|end|>.

        messages: a list of dicts with "role" ("user", "assistant" or "system") and
        "content" (str). ValueError naming the message for a bad one, and for a
        vocab_size above 32768 (its top ids would collide with MASKBIT)."""
        if self._vocab_size > MASKBIT:
            raise ValueError(f"render_chat needs vocab_size <= {MASKBIT} (MASKBIT 0x8000 "
                             f"marks the tokens to learn); this tokenizer has "
                             f"{self._vocab_size}")
        messages = list(messages)
        for k, m in enumerate(messages):
            if not isinstance(m, Mapping):
                raise ValueError(f"message {k}: expected a dict with 'role' and "
                                 f"'content', got {type(m).__name__}")
            if m.get("role") not in CHAT_ROLES:
                raise ValueError(f"message {k}: unknown role {m.get('role')!r}; the roles "
                                 f"are {', '.join(CHAT_ROLES)}")
            if not isinstance(m.get("content"), str):
                what = "missing" if "content" not in m else type(m["content"]).__name__
                raise ValueError(f"message {k}: content must be a str, got {what}")
        tokens, counts = self.encode_many([m["content"] for m in messages])
        end = self.special_id("<|end|>")
        parts = [np.array([self.special_id("<|bos|>")], dtype=np.uint16)]
        start = 0
        for m, n in zip(messages, counts.tolist()):
            mask = MASKBIT if m["role"] == "assistant" else 0
            parts.append(np.array([self.special_id(f"<|{m['role']}|>")], dtype=np.uint16))
            parts.append(tokens[start:start + n] | np.uint16(mask))
            parts.append(np.array([end | mask], dtype=np.uint16))
            start += n
        return np.concatenate(parts)

    # -- decoding

    def decode_bytes(self, ids: TokenIds) -> bytes:
        """The exact bytes of a sequence of ids (SPEC §6). MASKBIT is stripped first
        (when vocab_size <= 32768, so that no real id has it); specials decode to the
        UTF-8 of their names (e.g. b"<|bos|>"). An id that is not a token after that
        raises ValueError naming its position."""
        arr = np.asarray(ids)
        if arr.size == 0:
            return b""
        if arr.ndim != 1:
            raise ValueError(f"ids must be a flat sequence, got shape {arr.shape}")
        if arr.dtype.kind not in "iu":
            raise TypeError(f"ids must be integers, got dtype {arr.dtype}")
        vals = arr.astype(np.int64)          # (a uint64 above 2**63 turns negative: bad)
        if self._vocab_size <= MASKBIT:
            masked = (vals >= MASKBIT) & (vals <= 0xFFFF)
            vals[masked] -= MASKBIT
        bad = (vals < 0) | (vals >= self._vocab_size)
        if bad.any():
            pos = int(np.argmax(bad))
            raise ValueError(f"id {arr[pos]} at position {pos} is not a token "
                             f"(vocab_size {self._vocab_size})")
        # the library's id -> bytes table (asmbpe_decode) between specials, whose
        # bytes are their names
        from . import encoder

        plain = N_BYTES + self.n_merges
        ids16 = vals.astype(np.uint16)
        out, start = [], 0
        for pos in np.flatnonzero(vals >= plain).tolist() + [len(vals)]:
            if pos > start:
                out.append(encoder.decode_ids(self, ids16[start:pos]))
            if pos < len(vals):
                out.append(SPECIALS[int(vals[pos]) - plain].encode())
            start = pos + 1
        return b"".join(out)

    def decode(self, ids: TokenIds, errors: str = "replace") -> str:
        """decode_bytes, then UTF-8 decoding with `errors` ("replace" by default,
        "strict" raises UnicodeDecodeError on bytes that are not UTF-8)."""
        return self.decode_bytes(ids).decode("utf-8", errors)

    def decode_bytes_batch(self, batch: Iterable[TokenIds]) -> list[bytes]:
        """`decode_bytes` of each sequence of ids (tiktoken's name). ValueError for an
        id that is no token names the sequence and the position."""
        out = []
        for k, ids in enumerate(batch):
            try:
                out.append(self.decode_bytes(ids))
            except ValueError as e:
                raise ValueError(f"sequence {k}: {e}") from None
        return out

    def decode_batch(self, batch: Iterable[TokenIds], errors: str = "replace") -> list[str]:
        """`decode` of each sequence of ids (tiktoken's name): bytes that are not
        UTF-8 handled by `errors` ("replace" by default)."""
        return [b.decode("utf-8", errors) for b in self.decode_bytes_batch(batch)]

    def __eq__(self, other):
        if not isinstance(other, Tokenizer):
            return NotImplemented
        return (self._vocab_size == other._vocab_size and self._pretok == other._pretok
                and self._table == other._table)

    __hash__ = None

    def __repr__(self):
        return (f"Tokenizer(vocab_size={self._vocab_size}, n_merges={self.n_merges}, "
                f"merges_hash=0x{self._hash:016x}, pretokenizer={self.pretokenizer!r})")

    # -- tokenizer.bin

    def to_bytes(self) -> bytes:
        """The tokenizer.bin image (SPEC §7)."""
        header = _HEADER.pack(MAGIC, VERSION, self._pretok.id, self._vocab_size,
                              self.n_merges, N_SPECIAL, self._hash)
        return header + self._table_bytes()

    def save(self, path: PathArg) -> None:
        """Write tokenizer.bin to path: to a temporary name beside it first, then
        rename, so path is either its old content or the complete new file."""
        from .files import write_atomic
        write_atomic(path, self.to_bytes())

    @classmethod
    def from_bytes(cls, data: bytes | bytearray | memoryview,
                   name: str = "tokenizer.bin") -> "Tokenizer":
        """Parse and validate a tokenizer.bin image; `name` is used in error messages."""
        data = bytes(data)
        if _version_of(data) == VERSION_LOADED:
            from .loaded import LoadedTokenizer
            return LoadedTokenizer(parse_v2(data, name))
        head = _check_header(data[:HEADER_SIZE], len(data), name)
        return cls._from_table(data[HEADER_SIZE:], head, name)

    @classmethod
    def load(cls, path: PathArg) -> "Tokenizer":
        """Read and validate tokenizer.bin; TokenizerFileError for every bad file of
        SPEC §7 (the header and the size are checked before the table is read)."""
        name = os.fspath(path)
        with open(path, "rb") as f:
            file_len = os.fstat(f.fileno()).st_size
            header = f.read(HEADER_SIZE)
            if _version_of(header) == VERSION_LOADED:
                from .loaded import LoadedTokenizer
                return LoadedTokenizer(parse_v2(header + f.read(), name))
            head = _check_header(header, file_len, name)
            table = f.read(4 * head.n_merges + 1)
        if len(table) != 4 * head.n_merges:     # the file changed under us
            raise TokenizerFileError(name, HEADER_SIZE + len(table),
                                     f"merge table is {len(table)} bytes, expected "
                                     f"{4 * head.n_merges} (file changed while reading?)")
        return cls._from_table(table, head, name)

    @classmethod
    def _from_table(cls, table: bytes, head: "_Header", name: str) -> "Tokenizer":
        n_merges, stored_hash = head.n_merges, head.hash
        merges = np.frombuffer(table, dtype="<u2").reshape(n_merges, 2)
        found = _first_merge_problem(merges)
        if found:
            i, side, message = found
            raise TokenizerFileError(
                name, HEADER_SIZE + 4 * i + 2 * side,
                f"merge {i} at offset {HEADER_SIZE + 4 * i + 2 * side} {message}")
        actual = fnv1a64(table)
        if actual != stored_hash:
            raise TokenizerFileError(
                name, OFF_HASH,
                f"hash mismatch at offset {OFF_HASH}: the header says 0x{stored_hash:016x}, "
                f"the merge table hashes to 0x{actual:016x}")
        return cls(merges.astype(np.uint16), head.vocab_size, pretokenizer=head.pretok)


def _doc_bytes(doc, k: int) -> bytes:
    """Document k as bytes: str as UTF-8 (surrogatepass), bytes-like as is."""
    if isinstance(doc, str):
        return doc.encode("utf-8", "surrogatepass")
    if isinstance(doc, (bytes, bytearray, memoryview)):
        return bytes(doc)
    raise TypeError(f"document {k}: expected str or bytes, got {type(doc).__name__}")


class _Header(NamedTuple):
    vocab_size: int
    n_merges: int
    hash: int
    pretok: int             # a known pre-tokenizer id


def _check_header(header: bytes, file_len: int, name: str) -> _Header:
    """Validate the 32-byte header against the file length. Checks in the order of
    SPEC §7 (the pre-tokenizer id with the version)."""
    if not MAGIC.startswith(header[:len(MAGIC)]):     # (a short file may be cut in it)
        raise TokenizerFileError(name, OFF_MAGIC,
                                 f"bad magic at offset {OFF_MAGIC}: {header[:8]!r}, "
                                 f"expected {MAGIC!r} (not a tokenizer.bin)")
    if file_len < HEADER_SIZE or len(header) < HEADER_SIZE:
        raise TokenizerFileError(name, min(file_len, len(header)),
                                 f"file too short at offset {min(file_len, len(header))}: "
                                 f"{file_len} bytes, the header alone is {HEADER_SIZE}")
    _, version, pretok, vocab_size, n_merges, n_special, stored_hash = _HEADER.unpack(header)
    if version != VERSION:
        raise TokenizerFileError(name, OFF_VERSION,
                                 f"bad format version {version} at offset {OFF_VERSION}, "
                                 f"expected {VERSION} or {VERSION_LOADED}")
    if pretok not in {p.id for p in PRETOKENIZERS}:
        known = ", ".join(str(p) for p in PRETOKENIZERS)
        raise TokenizerFileError(name, OFF_PRETOK,
                                 f"unknown pre-tokenizer id {pretok} at offset {OFF_PRETOK}, "
                                 f"expected one of {known}")
    expected_len = HEADER_SIZE + 4 * n_merges
    if file_len != expected_len:
        raise TokenizerFileError(name, OFF_NMERGES,
                                 f"size mismatch: n_merges {n_merges} at offset {OFF_NMERGES} "
                                 f"needs a file of {expected_len} bytes, the file is "
                                 f"{file_len} bytes")
    if n_special != N_SPECIAL:
        raise TokenizerFileError(name, OFF_NSPECIAL,
                                 f"bad n_special {n_special} at offset {OFF_NSPECIAL}, "
                                 f"expected {N_SPECIAL}")
    if vocab_size != N_BYTES + n_merges + n_special or vocab_size > MAX_VOCAB:
        raise TokenizerFileError(name, OFF_VOCAB,
                                 f"bad vocab_size at offset {OFF_VOCAB}: "
                                 + _check_counts(vocab_size, n_merges, n_special))
    return _Header(vocab_size, n_merges, stored_hash, pretok)


# --------------------------------------------------------------- tokenizer.bin version 2

VERSION_LOADED = 2
HEADER2_SIZE = 64
NO_ID = 0xFFFFFFFF              # never an id (u32 ids)
V2_WHOLE_CHUNK = 1              # flags bit 0
V2_MERGES = 2                   # flags bit 1
V2_MERGE_IDS = 4                # flags bit 2 (with bit 1): merge i makes id 256 + i
V2_KNOWN_FLAGS = V2_WHOLE_CHUNK | V2_MERGES | V2_MERGE_IDS
# magic, version, pretok, n_tokens, n_merges, n_special, hash, token_bytes,
# special_bytes, flags, name_len, reserved
_HEADER2 = struct.Struct("<8sHHIIIQQIII12s")
assert _HEADER2.size == HEADER2_SIZE
(V2_OFF_NTOKENS, V2_OFF_NMERGES, V2_OFF_NSPECIAL, V2_OFF_HASH, V2_OFF_TOKEN_BYTES,
 V2_OFF_SPECIAL_BYTES, V2_OFF_FLAGS, V2_OFF_NAME_LEN, V2_OFF_RESERVED) = (
    12, 16, 20, 24, 32, 40, 44, 48, 52)


def identity_hash(pretok: int, flags: int, body: bytes) -> int:
    """The identity hash of a version-2 file: blake2b with an 8-byte digest, read as a
    little-endian u64, of the pre-tokenizer id (u16), the flags (u32) and the body
    without the name."""
    import hashlib
    h = hashlib.blake2b(struct.pack("<HI", pretok, flags), digest_size=8)
    h.update(body)
    return int.from_bytes(h.digest(), "little")


def v2_flags(vocab) -> int:
    return ((V2_WHOLE_CHUNK if vocab.whole_chunk else 0)
            | (V2_MERGES if vocab.merges is not None else 0)
            | (V2_MERGE_IDS if vocab.merge_ids else 0))


def v2_body(vocab, merges: np.ndarray | None = None) -> bytes:
    """The hashed part of a version-2 file for a harness.vocab.Vocab: token offsets,
    token bytes, specials (by id), special names, merges (`merges`: vocab.merges already
    as a uint32 (n, 2) array). Same vocabulary, same bytes."""
    lengths = np.fromiter(map(len, vocab.tokens), dtype=np.uint64,
                          count=len(vocab.tokens))
    offsets = np.zeros(len(vocab.tokens) + 1, dtype="<u8")
    np.cumsum(lengths, out=offsets[1:])
    specials = sorted((i, name.encode("utf-8")) for name, i in vocab.specials.items())
    entries = np.array([(i, len(n)) for i, n in specials], dtype="<u4").reshape(-1, 2)
    if merges is None:
        merges = np.array(vocab.merges or [], dtype="<u4").reshape(-1, 2)
    return b"".join([offsets.tobytes(), *vocab.tokens, entries.tobytes(),
                     *(n for _, n in specials), merges.tobytes()])


def v2_image(vocab, body: bytes | None = None) -> bytes:
    """The tokenizer.bin version-2 image of a Vocab (module doc)."""
    from .pretokenizers import resolve as _resolve
    body = v2_body(vocab) if body is None else body
    name = vocab.name.encode("utf-8")
    flags = v2_flags(vocab)
    pretok = _resolve(vocab.pretokenizer).id
    header = _HEADER2.pack(MAGIC, VERSION_LOADED, pretok,
                           len(vocab.tokens), len(vocab.merges or ()), len(vocab.specials),
                           identity_hash(pretok, flags, body), sum(map(len, vocab.tokens)),
                           sum(len(n.encode("utf-8")) for n in vocab.specials), flags,
                           len(name), bytes(12))
    return header + body + name


def parse_v2(data: bytes, name: str):
    """The harness.vocab.Vocab of a version-2 image; TokenizerFileError (offset,
    problem) for every bad file (module doc)."""
    from .vocab import Vocab, known_regular

    def fail(offset: int, problem: str):
        raise TokenizerFileError(name, offset, f"{problem} (at offset {offset})")

    if len(data) < HEADER2_SIZE:
        fail(len(data), f"file too short: {len(data)} bytes, the version-2 header alone "
                        f"is {HEADER2_SIZE}")
    (_, _, pretok, n_tokens, n_merges, n_special, stored_hash, token_bytes, special_bytes,
     flags, name_len, reserved) = _HEADER2.unpack(data[:HEADER2_SIZE])
    if pretok not in {p.id for p in PRETOKENIZERS}:
        known = ", ".join(str(p) for p in PRETOKENIZERS)
        fail(OFF_PRETOK, f"unknown pre-tokenizer id {pretok}, expected one of {known}")
    if flags & ~V2_KNOWN_FLAGS:
        fail(V2_OFF_FLAGS, f"unknown flags 0x{flags:08x} (bit 0 whole_chunk, bit 1 "
                           "merges and bit 2 merge_ids are defined)")
    merge_ids = bool(flags & V2_MERGE_IDS)
    if merge_ids and not flags & V2_MERGES:
        fail(V2_OFF_FLAGS, f"flags 0x{flags:08x}: bit 2 (merge_ids) needs bit 1 (merges)")
    if merge_ids and n_merges != n_tokens - N_BYTES:
        fail(V2_OFF_NMERGES, f"bad n_merges {n_merges}: with merge_ids (flags bit 2) it "
                             f"is n_tokens - {N_BYTES} = {n_tokens - N_BYTES}")
    if any(reserved):
        fail(V2_OFF_RESERVED + next(k for k, b in enumerate(reserved) if b),
             "reserved bytes 52..63 must be 0")
    if n_tokens < N_BYTES:
        fail(V2_OFF_NTOKENS, f"bad n_tokens {n_tokens}: a vocabulary holds at least the "
                             f"{N_BYTES} single bytes")
    if n_merges and not flags & V2_MERGES:
        fail(V2_OFF_NMERGES, f"bad n_merges {n_merges}: a rank vocabulary (flags bit 1 "
                             "clear) has no merges")
    if token_bytes < n_tokens:
        fail(V2_OFF_TOKEN_BYTES, f"bad token_bytes {token_bytes}: {n_tokens} tokens of at "
                                 "least one byte need more")
    if special_bytes < n_special:
        fail(V2_OFF_SPECIAL_BYTES, f"bad special_bytes {special_bytes}: {n_special} names "
                                   "of at least one byte need more")
    o_offsets = HEADER2_SIZE
    o_tokens = o_offsets + 8 * (n_tokens + 1)
    o_specials = o_tokens + token_bytes
    o_names = o_specials + 8 * n_special
    o_merges = o_names + special_bytes
    o_name = o_merges + 8 * n_merges
    expected = o_name + name_len
    if len(data) < expected:
        fail(len(data), f"file truncated: the header's counts (n_tokens at {V2_OFF_NTOKENS}, "
                        f"token_bytes at {V2_OFF_TOKEN_BYTES}, n_special, special_bytes, "
                        f"n_merges, name_len) need {expected} bytes, the file is "
                        f"{len(data)} bytes")
    if len(data) > expected:
        fail(expected, f"trailing bytes: the file is {len(data)} bytes, the header's counts "
                       f"say {expected}")

    # tokens
    offsets = np.frombuffer(data, dtype="<u8", count=n_tokens + 1, offset=o_offsets)
    if offsets[0] != 0:
        fail(o_offsets, f"token offset 0 is {int(offsets[0])}, must be 0")
    steps = np.diff(offsets.astype(np.int64)) if n_tokens else np.zeros(0, np.int64)
    big = offsets > token_bytes
    if big.any():
        i = int(np.argmax(big))
        fail(o_offsets + 8 * i, f"token offset {i} is {int(offsets[i])}, out of range "
                                f"(token_bytes {token_bytes})")
    if (steps <= 0).any():
        i = int(np.argmax(steps <= 0))
        fail(o_offsets + 8 * (i + 1), f"token {i} is empty or its offsets decrease "
                                      f"({int(offsets[i])} .. {int(offsets[i + 1])})")
    if int(offsets[-1]) != token_bytes:
        fail(o_offsets + 8 * n_tokens, f"last token offset {int(offsets[-1])} != "
                                       f"token_bytes {token_bytes}")
    blob = data[o_tokens:o_specials]
    bounds = offsets.tolist()
    tokens = [blob[a:b] for a, b in zip(bounds, bounds[1:])]
    index: dict[bytes, int] = {}
    for i, t in enumerate(tokens):
        j = index.setdefault(t, i)
        if j != i and not merge_ids:
            fail(o_tokens + bounds[i], f"duplicate token: id {i} has the bytes {t[:40]!r} "
                                       f"of id {j}")
    if merge_ids:
        for b in range(N_BYTES):
            if tokens[b] != bytes([b]):
                fail(o_tokens + bounds[b], f"token {b} is {tokens[b][:40]!r}, not the byte "
                                           f"0x{b:02x} (merge_ids: ids 0..255 are the bytes)")
    for b in range(N_BYTES):
        if bytes([b]) not in index:
            fail(o_tokens, f"byte 0x{b:02x} is not a token (a vocabulary holds all "
                           f"{N_BYTES} single bytes)")

    # specials
    entries = np.frombuffer(data, dtype="<u4", count=2 * n_special,
                            offset=o_specials).reshape(n_special, 2).tolist()
    if sum(n for _, n in entries) != special_bytes:
        fail(V2_OFF_SPECIAL_BYTES, f"special name lengths add up to "
                                   f"{sum(n for _, n in entries)}, special_bytes is "
                                   f"{special_bytes}")
    specials: dict[str, int] = {}
    at, prev = o_names, -1
    for k, (i, n) in enumerate(entries):
        where = o_specials + 8 * k
        raw = data[at:at + n]
        if n == 0:
            fail(where + 4, f"special {k} has an empty name")
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError:
            fail(at, f"special {k}'s name {raw[:40]!r} is not UTF-8")
        if i == NO_ID:
            fail(where, f"special {text!r} has id 0x{NO_ID:08x}, which is never an id")
        if i <= prev:
            fail(where, f"special {text!r} has id {i}, not above the previous special's "
                        f"{prev} (specials are stored in increasing id order, each id once)")
        if i < n_tokens and tokens[i] != raw:
            fail(where, f"special {text!r} has id {i}, which is the ordinary token "
                        f"{tokens[i][:40]!r}")
        if text in specials:
            fail(at, f"special name {text!r} repeats (ids {specials[text]} and {i})")
        specials[text] = i
        at += n
        prev = i

    # merges
    merges = None
    if flags & V2_MERGES:
        pairs = np.frombuffer(data, dtype="<u4", count=2 * n_merges,
                              offset=o_merges).reshape(n_merges, 2)
        big = pairs >= n_tokens
        if big.any():
            k = int(np.argmax(big.any(axis=1)))
            side = 0 if big[k, 0] else 1
            fail(o_merges + 8 * k + 4 * side, f"merge {k} references id "
                                              f"{int(pairs[k, side])}, not a token "
                                              f"(n_tokens {n_tokens})")
        merges = [(a, b) for a, b in pairs.tolist()]
        for k, (a, b) in enumerate(merges):
            if merge_ids and (max(a, b) >= N_BYTES + k
                              or tokens[a] + tokens[b] != tokens[N_BYTES + k]):
                fail(o_merges + 8 * k, f"merge {k} ({a}, {b}) does not make token "
                                       f"{N_BYTES + k} (merge_ids: its ids below "
                                       f"{N_BYTES + k}, its bytes theirs together)")
            if tokens[a] + tokens[b] not in index:
                fail(o_merges + 8 * k, f"merge {k} ({a}, {b}) makes "
                                       f"{(tokens[a] + tokens[b])[:40]!r}, not a token")

    try:
        vocab_name = data[o_name:expected].decode("utf-8")
    except UnicodeDecodeError:
        fail(o_name, "the name is not UTF-8")
    actual = identity_hash(pretok, flags, data[HEADER2_SIZE:o_name])
    if actual != stored_hash:
        fail(V2_OFF_HASH, f"hash mismatch: the header says 0x{stored_hash:016x}, the body "
                          f"hashes to 0x{actual:016x}")
    whole_chunk = bool(flags & V2_WHOLE_CHUNK)
    return Vocab(name=vocab_name, tokens=tokens, pretokenizer=resolve(pretok).name,
                 specials=specials, merges=merges, whole_chunk=whole_chunk,
                 merge_ids=merge_ids,
                 regular=whole_chunk and merges is None and known_regular(vocab_name, tokens))


def _version_of(head: bytes):
    """The version field of a file that starts with the magic, or None when too short."""
    if len(head) < OFF_VERSION + 2 or head[:len(MAGIC)] != MAGIC:
        return None
    return struct.unpack_from("<H", head, OFF_VERSION)[0]


# ------------------------------------------------------------------- special tokens

def split_specials(data: bytes, specials: list[tuple[bytes, int]]) -> list:
    """data cut at the allowed specials' text: a list of bytes (ordinary text) and ints
    (special ids), in order. The leftmost special wins; where two start at the same
    place, the longer one (harness.rank.RankEncoder.encode uses it too)."""
    parts: list = []
    start = 0
    while True:
        found = None                          # (position, -length, id)
        for s, i in specials:
            at = data.find(s, start)
            if at >= 0 and (found is None or (at, -len(s)) < found[:2]):
                found = (at, -len(s), i)
        end = found[0] if found is not None else len(data)
        if end > start:
            parts.append(data[start:end])
        if found is None:
            return parts
        parts.append(found[2])
        start = end - found[1]


def allowed_specials(tokenizer, allowed_special) -> list[tuple[bytes, int]]:
    """(text bytes, id) of the allowed specials: "all", or an iterable of names;
    ValueError for a name that is not one of the tokenizer's specials."""
    table = tokenizer.specials
    if isinstance(allowed_special, str):
        names = list(table) if allowed_special == "all" else [allowed_special]
    else:
        names = list(allowed_special)
    for n in names:
        if n not in table:
            raise ValueError(f"{n!r} is not a special token of this tokenizer (its specials: "
                             f"{', '.join(table) or 'none'})")
    return [(n.encode("utf-8"), table[n]) for n in names]


def encode_with_specials(tokenizer, docs: list[bytes], specials, threads, dtype):
    """(ids, counts) of docs where the allowed specials' text becomes their ids and the
    pieces between are encoded as ordinary text, in one encode_many call."""
    cut = [split_specials(d, specials) for d in docs]
    texts = [p for parts in cut for p in parts if isinstance(p, bytes)]
    ids, counts = tokenizer.encode_many(texts, threads) if texts else (
        np.zeros(0, dtype), np.zeros(0, np.uint64))
    ends = np.cumsum(counts, dtype=np.int64).tolist()
    out, doc_counts, k = [], [], 0
    for parts in cut:
        n = 0
        for p in parts:
            if isinstance(p, bytes):
                piece = ids[ends[k] - int(counts[k]):ends[k]]
                k += 1
            else:
                piece = np.array([p], dtype=dtype)
            out.append(piece)
            n += len(piece)
        doc_counts.append(n)
    tokens = np.concatenate(out).astype(dtype, copy=False) if out else np.zeros(0, dtype)
    return tokens, np.array(doc_counts, dtype=np.uint64)


def insert_per_document(ids: np.ndarray, counts: np.ndarray, token: int, at: str = "start"):
    """(ids with `token` inserted at each document's start or end, counts + 1): ids are
    the documents' ids concatenated, counts each one's length."""
    if at not in ("start", "end"):
        raise ValueError(f"at must be 'start' or 'end', got {at!r}")
    n = len(counts)
    c = np.asarray(counts, dtype=np.int64)
    firsts = np.concatenate(([0], np.cumsum(c)[:-1])) if n else np.zeros(0, np.int64)
    pos = firsts + np.arange(n) + (c if at == "end" else 0)
    out = np.empty(len(ids) + n, dtype=ids.dtype)
    keep = np.ones(len(out), dtype=bool)
    keep[pos] = False
    out[keep] = ids
    out[pos] = token
    return out, (c + 1).astype(np.uint64)
