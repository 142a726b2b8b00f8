"""The naive Python twin of encoding with an existing vocabulary (SPEC §11, §6): tiktoken
ranks and tokenizer.json merges, written for clarity rather than speed. The tests hold it
to tiktoken and to Hugging Face tokenizers, and the library to it.

One chunk (`encode_chunk`):

1. If the vocabulary says `whole_chunk` (tiktoken always; tokenizers with ignore_merges)
   and the chunk is itself a token, it is that token.
2. Otherwise start from the id of each byte and repeatedly merge the adjacent pair with
   the lowest priority in `harness.vocab.pair_table` (for ranks: the rank of the merged
   token; for merges: the merge's number), the leftmost one when several have it, into
   the pair's result, until no adjacent pair is in the table.

A text (`encode`): cut by the vocabulary's pre-tokenizer (`harness.dev.twin.split`), each
chunk encoded on its own. Special-token text is ordinary text unless allowed
(`allowed_special`, as tiktoken's encode): then the text is cut at the allowed specials,
each is its id, and the pieces between are split and encoded on their own.
"""
from __future__ import annotations

from typing import NamedTuple

from ..vocab import Vocab, byte_ids, pair_table
from .twin import split

__all__ = ["Tables", "tables", "encode_chunk", "encode", "decode", "irregular_tokens"]


class Tables(NamedTuple):
    """What encoding looks up: token bytes -> id, byte -> id, and
    (left, right) -> (priority, result)."""

    index: dict[bytes, int]
    byte_id: list[int]
    pairs: dict[tuple[int, int], tuple[int, int]]


_CACHE: list[tuple[Vocab, Tables]] = []      # the last few vocabularies' tables


def tables(v: Vocab) -> Tables:
    """The lookup tables of v (built once for the last few vocabularies seen)."""
    for seen, t in _CACHE:
        if seen is v:
            return t
    left, right, priority, result = pair_table(v)
    t = Tables(
        index={tok: i for i, tok in enumerate(v.tokens)},
        byte_id=[int(i) for i in byte_ids(v)],
        pairs={(int(a), int(b)): (int(p), int(r))
               for a, b, p, r in zip(left, right, priority, result)},
    )
    _CACHE.insert(0, (v, t))
    del _CACHE[4:]
    return t


def encode_chunk(chunk: bytes, v: Vocab, pairs: Tables | None = None) -> list[int]:
    """The ids of one pre-tokenizer chunk. `pairs`: tables(v), if the caller has them."""
    t = pairs if pairs is not None else tables(v)
    if v.whole_chunk and chunk in t.index:
        return [t.index[chunk]]
    ids = [t.byte_id[b] for b in chunk]
    none = (float("inf"), -1)
    # priority[i]: the (priority, result) of the pair ids[i], ids[i + 1]
    priority = [t.pairs.get(pair, none) for pair in zip(ids, ids[1:])]
    while priority:
        best = min(priority)                 # lowest priority ...
        if best == none:
            break
        i = priority.index(best)             # ... leftmost
        ids[i:i + 2] = [best[1]]
        del priority[i]
        if i > 0:
            priority[i - 1] = t.pairs.get((ids[i - 1], ids[i]), none)
        if i < len(priority):
            priority[i] = t.pairs.get((ids[i], ids[i + 1]), none)
    return ids


def irregular_tokens(v: Vocab) -> list[int]:
    """The ids of the tokens (2+ bytes) whose bytes do not merge to that token (step 2
    alone). Where there are none, the whole-chunk rule of step 1 gives what merging
    gives for every piece of a chunk that is a token, so the library may cut long chunks
    where no token spans (Vocab.regular, ASMBPE_RENC_SPLIT)."""
    import dataclasses

    merged = dataclasses.replace(v, whole_chunk=False)
    t = tables(merged)
    return [i for i, tok in enumerate(v.tokens)
            if len(tok) > 1 and encode_chunk(tok, merged, t) != [i]]


def _allowed(v: Vocab, allowed_special) -> list[str]:
    if allowed_special == "all":
        return list(v.specials)
    names = list(allowed_special)
    for name in names:
        if name not in v.specials:
            raise ValueError(f"{name!r} is not a special token of {v.name}")
    return names


def encode(text: bytes, v: Vocab, allowed_special=()) -> list[int]:
    """The ids of text (bytes, or a str taken as UTF-8). allowed_special: the names of
    the specials whose text becomes their id, or "all"; other special text is ordinary
    text. Where two allowed specials start at the same place, the longer one wins."""
    if isinstance(text, str):
        text = text.encode("utf-8")
    t = tables(v)
    specials = [(name.encode("utf-8"), v.specials[name]) for name in _allowed(v, allowed_special)]
    out: list[int] = []
    start = 0
    while True:
        # the next allowed special: the first to start, the longest of those
        found = None                          # (position, -length, id)
        for s, i in specials:
            at = text.find(s, start)
            if at >= 0 and (found is None or (at, -len(s)) < found[:2]):
                found = (at, -len(s), i)
        end = found[0] if found is not None else len(text)
        for chunk in split(text[start:end], v.pretokenizer):
            out.extend(encode_chunk(chunk, v, t))
        if found is None:
            return out
        out.append(found[2])
        start = end - found[1]


def decode(ids, v: Vocab) -> bytes:
    """The bytes of ids: each token's bytes, a special's UTF-8 text; ValueError for an id
    that is neither."""
    special_text = {i: name.encode("utf-8") for name, i in v.specials.items()}
    out = []
    for i in ids:
        i = int(i)
        if 0 <= i < len(v.tokens):
            out.append(v.tokens[i])
        elif i in special_text:
            out.append(special_text[i])
        else:
            raise ValueError(f"id {i} is not a token of {v.name}")
    return b"".join(out)
