"""Tokenizers for loaded vocabularies (SPEC §11): `LoadedTokenizer`, what
`Tokenizer.from_tiktoken`, `Tokenizer.from_hf` and `Tokenizer.load` of a tokenizer.bin
version 2 return. It is a `harness.Tokenizer`, with the same calls, over a
`harness.vocab.Vocab`; encoding goes through `harness.rank.RankEncoder` (built on first
use: the pair table takes 0.3-0.8 s for cl100k / o200k), decoding through a token
bytes table.

What differs from asmbpe's own tokenizers:

- ids: `dtype` is uint16 when every id (specials included) is below 65535, else
  uint32; `vocab_size` (= `n_vocab`) is one more than the highest id, special or not
  (cl100k_base: 100,277; the ids 100,256 and 100,261..100,275 are no token).
- specials: the vocabulary's own (cl100k_base: `<|endoftext|>` 100257, ...). Special
  text is ordinary text unless `allowed_special` names it (tiktoken's rule).
  `bos=True`, `encode_document` and `render_chat` need a `<|bos|>`-like special
  (`BOS_NAMES`); a vocabulary without one is refused with a ValueError (no id is made
  up). `render_chat` also needs `<|user|>`, `<|assistant|>`, `<|system|>`, `<|end|>`
  and vocab_size <= 32768 (MASKBIT).
- `merges`: tokenizer.json's merges in priority order, an (M, 2) uint32 array of
  (left id, right id); None for a tiktoken ranks file (its priorities are the ranks of
  the merged tokens; there is no merge list). `n_merges` is 0 then.
- `merges_hash` (the identity `.tok` files record) is the identity hash of
  tokenizer.bin version 2: blake2b-64 of the pre-tokenizer id, the flags (whole_chunk,
  merges or ranks), the token table, the specials and the merges (harness.tokenizer
  .identity_hash; the name is left out, so a renamed file is the same tokenizer, and
  any change to what decides the ids is another one).
- `save` writes tokenizer.bin version 2; `id_to_bytes` gives every id's bytes, b""
  for the ids that are no token.
"""
from __future__ import annotations

import threading
from collections.abc import Iterable, Mapping

from ._lazy import lazy_numpy

from .pretokenizers import resolve
from .tokenizer import (
    CHAT_ROLES, MASKBIT, AllowedSpecial, Document, TokenIds, Tokenizer, _doc_bytes,
    allowed_specials, encode_with_specials, identity_hash, insert_per_document, v2_body,
    v2_flags, v2_image)
from .vocab import Vocab, VocabError, byte_ids

np = lazy_numpy(globals())    # numpy imported on first use (harness/_lazy.py)

__all__ = ["LoadedTokenizer", "BOS_NAMES", "trained_tokenizer"]

# specials that may start a document, in the order they are looked for
BOS_NAMES = ("<|bos|>", "<|begin_of_text|>", "<|startoftext|>", "<s>")
U16_LIMIT = 0xFFFF              # ids below this fit in uint16 (0xFFFF is never a token)


class LoadedTokenizer(Tokenizer):
    """A Tokenizer over a loaded vocabulary (module doc). LoadedTokenizer(vocab)."""

    def __init__(self, vocab: Vocab) -> None:
        if not isinstance(vocab, Vocab):
            raise TypeError(f"expected a harness.vocab.Vocab, got {type(vocab).__name__}")
        self._vocab = vocab
        self._pretok = resolve(vocab.pretokenizer)
        self._vocab_size = vocab.n_vocab
        if self._vocab_size - 1 >= 0xFFFFFFFF:
            raise VocabError(f"{vocab.name}: id {self._vocab_size - 1} does not fit in u32")
        byte_ids(vocab)                     # VocabError: a byte that is not a token
        if vocab.merges is None:
            self._merges = None
        else:
            self._merges = np.array(vocab.merges, dtype="<u4").reshape(-1, 2)
            self._merges.flags.writeable = False
        self._body = v2_body(vocab, self._merges)
        self._hash = identity_hash(self._pretok.id, v2_flags(vocab), self._body)
        self._encoder = None
        self._decode_table = None
        self._lock = threading.Lock()

    # -- pickling (the Dask path ships tokenizer.bin bytes; this is for anything else)

    def __getstate__(self) -> dict:
        """What pickle keeps: the Vocab (tokens, specials, merges; about 0.9 MB for
        cl100k_base, less than its tokenizer.bin); the rank encoder and the lookup
        tables are built again on first use after unpickling."""
        return {"vocab": self._vocab}

    def __setstate__(self, state: dict) -> None:
        self.__init__(state["vocab"])

    # -- properties

    @property
    def vocab(self) -> Vocab:
        """The loaded vocabulary: tokens by id, specials, merges, pre-tokenizer."""
        return self._vocab

    @property
    def name(self) -> str:
        return self._vocab.name

    @property
    def is_loaded(self) -> bool:
        return True

    @property
    def merges(self) -> np.ndarray | None:
        """tokenizer.json's merges in priority order, (M, 2) uint32 read-only; None for a
        tiktoken ranks file."""
        return self._merges

    @property
    def n_merges(self) -> int:
        """The number of tokenizer.json merges; 0 for a tiktoken ranks file."""
        return 0 if self._merges is None else len(self._merges)

    @property
    def n_tokens(self) -> int:
        """The ordinary tokens: ids 0 .. n_tokens - 1."""
        return len(self._vocab.tokens)

    @property
    def dtype(self) -> np.dtype:
        return np.dtype(np.uint16 if self._vocab_size <= U16_LIMIT else np.uint32)

    @property
    def specials(self) -> dict[str, int]:
        """The vocabulary's specials, name -> id (a copy)."""
        return dict(self._vocab.specials)

    def special_id(self, name: str) -> int:
        """The id of the vocabulary's special named `name`; KeyError listing its
        specials when it has none of that name."""
        try:
            return self._vocab.specials[name]
        except KeyError:
            raise KeyError(f"unknown special token {name!r}; the specials of {self.name} "
                           f"are {', '.join(self._vocab.specials) or 'none'}") from None

    @property
    def bos_id(self) -> int | None:
        """The id of the first of BOS_NAMES the vocabulary has; None when it has none."""
        for n in BOS_NAMES:
            if n in self._vocab.specials:
                return self._vocab.specials[n]
        return None

    def _require_bos(self, what: str) -> int:
        i = self.bos_id
        if i is None:
            raise ValueError(
                f"{what} needs a <|bos|>-like special token ({', '.join(BOS_NAMES)}); "
                f"{self.name} has none (its specials: "
                f"{', '.join(self._vocab.specials) or 'none'}); asmbpe makes up no id: "
                "encode without a BOS, or delimit documents with one of its specials "
                "(asmbpe encode --doc-token NAME)")
        return i

    @property
    def merges_hash(self) -> int:
        """The identity hash (module doc; tokenizer.bin version 2, offset 24)."""
        return self._hash

    def describe(self) -> list[str]:
        sp = self._vocab.specials
        return [f"vocabulary       {self.name} ({self._vocab_size:,} ids: "
                f"{self.n_tokens:,} tokens, {len(sp)} specials"
                + (f", {self.n_merges:,} merges" if self._merges is not None else
                   ", tiktoken ranks") + ")",
                f"pre-tokenizer    {self._pretok}",
                "specials         " + (", ".join(f"{n} {i}" for n, i in sp.items()) or "none"),
                f"ids              {self.dtype.name}"]

    def id_to_bytes(self) -> list[bytes]:
        """Every id's bytes (vocab_size of them): the tokens, each special's name,
        b"" for the ids that are no token."""
        table = list(self._vocab.tokens) + [b""] * (self._vocab_size - self.n_tokens)
        for n, i in self._vocab.specials.items():
            table[i] = n.encode("utf-8")
        return table

    # -- encoding: harness.rank.RankEncoder

    def _rank(self):
        with self._lock:
            if self._encoder is None:
                from .rank import RankEncoder
                self._encoder = RankEncoder(self._vocab)
            return self._encoder

    def encode_many(self, docs: Iterable[Document], threads: int | None = None, *,
                    bos: bool = False, cache: bool = True,
                    allowed_special: AllowedSpecial = ()) -> tuple[np.ndarray, np.ndarray]:
        """(every document's ids concatenated, in `dtype`; each document's id count,
        uint64). bos: the <|bos|>-like special first (ValueError without one);
        allowed_special as tiktoken's. cache: accepted for compatibility (the rank
        encoder keeps its own)."""
        bos_id = self._require_bos("bos=True") if bos else None
        datas = list(docs) if not isinstance(docs, (list, tuple)) else docs
        datas = datas if set(map(type, datas)) <= {bytes} else [
            _doc_bytes(d, k) for k, d in enumerate(datas)]
        if allowed_special:
            ids, counts = encode_with_specials(self, datas, allowed_specials(
                self, allowed_special), threads, self.dtype)
        elif not datas:
            ids, counts = np.zeros(0, self.dtype), np.zeros(0, np.uint64)
        else:
            ids, counts = self._rank().encode_many(datas, threads)
            ids = ids.astype(self.dtype, copy=False)
        if bos_id is not None:
            ids, counts = insert_per_document(ids, counts, bos_id, "start")
        return ids, counts

    def encode_document(self, text: Document) -> np.ndarray:
        """The vocabulary's <|bos|>-like special + the text's ids; ValueError without
        one (`BOS_NAMES`)."""
        self._require_bos("encode_document")
        return self.encode(text, bos=True)

    def render_chat(self, messages: Iterable[Mapping[str, str]]) -> np.ndarray:
        """As Tokenizer.render_chat, for a vocabulary that has <|bos|>, <|user|>,
        <|assistant|>, <|system|>, <|end|> and at most 32768 ids; ValueError otherwise."""
        self._require_bos("render_chat")
        need = ["<|bos|>"] + [f"<|{r}|>" for r in CHAT_ROLES] + ["<|end|>"]
        missing = [n for n in need if n not in self._vocab.specials]
        if missing:
            raise ValueError(f"render_chat needs the specials {', '.join(need)}; {self.name} "
                             f"lacks {', '.join(missing)}")
        out = super().render_chat(messages)
        return out.astype(np.uint16)

    # -- decoding

    def _table(self):
        if self._decode_table is None:
            table = self.id_to_bytes()
            valid = np.zeros(self._vocab_size, dtype=bool)
            valid[:self.n_tokens] = True
            valid[list(self._vocab.specials.values())] = True
            lengths = np.fromiter(map(len, table), dtype=np.int64, count=len(table))
            offsets = np.zeros(len(table) + 1, dtype=np.int64)
            np.cumsum(lengths, out=offsets[1:])
            blob = np.frombuffer(b"".join(table) or b"\0", dtype=np.uint8)
            self._decode_table = (valid, offsets, blob)
        return self._decode_table

    def decode_bytes(self, ids: TokenIds) -> bytes:
        """The bytes of ids: each token's bytes, a special's name (MASKBIT stripped first
        when vocab_size <= 32768); ValueError naming the position of an id that is no
        token."""
        arr = np.asarray(ids)
        if arr.size == 0:
            return b""
        if arr.ndim != 1:
            raise ValueError(f"ids must be a flat sequence, got shape {arr.shape}")
        if arr.dtype.kind not in "iu":
            raise TypeError(f"ids must be integers, got dtype {arr.dtype}")
        vals = arr.astype(np.int64)
        if self._vocab_size <= MASKBIT:
            masked = (vals >= MASKBIT) & (vals <= 0xFFFF)
            vals[masked] -= MASKBIT
        valid, offsets, blob = self._table()
        bad = (vals < 0) | (vals >= self._vocab_size)
        bad[~bad] = ~valid[vals[~bad]]
        if bad.any():
            pos = int(np.argmax(bad))
            raise ValueError(f"id {arr[pos]} at position {pos} is not a token of {self.name}")
        starts = offsets[vals]
        lengths = offsets[vals + 1] - starts
        total = int(lengths.sum())
        shift = starts - (np.cumsum(lengths) - lengths)
        idx = np.repeat(shift, lengths) + np.arange(total, dtype=np.int64)
        return blob[idx].tobytes()

    # -- comparison, files

    def __eq__(self, other):
        if not isinstance(other, Tokenizer):
            return NotImplemented
        return (isinstance(other, LoadedTokenizer) and self._pretok == other._pretok
                and self._vocab.whole_chunk == other._vocab.whole_chunk
                and (self._merges is None) == (other._merges is None)
                and self._body == other._body)

    __hash__ = None

    def __repr__(self):
        return (f"Tokenizer(name={self.name!r}, vocab_size={self._vocab_size}, "
                f"pretokenizer={self.pretokenizer!r}, dtype={self.dtype.name}, "
                f"merges_hash=0x{self._hash:016x})")

    def to_bytes(self) -> bytes:
        """The tokenizer.bin version 2 image (harness.tokenizer)."""
        return v2_image(self._vocab, self._body)


def trained_tokenizer(merges, pretokenizer: str, name: str = "asmbpe") -> LoadedTokenizer:
    """The tokenizer of merges asmbpe trained, for vocabularies above 65,535 ids (u32):
    the layout of asmbpe's own tokenizers (ids 0..255 the bytes, merge i makes id
    256 + i, the 16 specials of SPEC §5 on top) as a Vocab with merge_ids, so two
    merges that make the same bytes keep their own ids. Encodes with the merges'
    priorities (lowest first, leftmost first: SPEC §6) through the rank encoder;
    saves as tokenizer.bin version 2 (flags bit 2)."""
    from .tokenizer import N_BYTES, SPECIALS
    pairs = np.asarray(merges).reshape(-1, 2).tolist()
    tokens = [bytes([b]) for b in range(N_BYTES)]
    for k, (a, b) in enumerate(pairs):
        if not (a < N_BYTES + k and b < N_BYTES + k):
            raise ValueError(f"merge {k} ({a}, {b}) references an id not yet defined "
                             f"(must be < {N_BYTES + k})")
        tokens.append(tokens[a] + tokens[b])
    top = len(tokens)
    specials = {s: top + k for k, s in enumerate(SPECIALS)}
    return LoadedTokenizer(Vocab(name=name, tokens=tokens, pretokenizer=pretokenizer,
                                 specials=specials, merges=[(a, b) for a, b in pairs],
                                 whole_chunk=False, merge_ids=True))
