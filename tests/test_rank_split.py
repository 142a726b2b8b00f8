"""Long chunks cut where no token spans (asm/encode_rank_split.asm, ASMBPE_RENC_SPLIT,
log R29). A cut is exact when merging alone decides (no whole-chunk rule), or when every
token's bytes merge to that token (Vocab.regular): the published encodings are checked
here, and the encoder with cuts gives the ids of the encoder without them, of the twin
and of tiktoken on long words of many scripts."""
from __future__ import annotations

import dataclasses
import random

import numpy as np
import pytest
from loaded_util import tiktoken_oracle, vocab_path

from harness.dev import rank_twin
from harness.rank import RENC_RANKS, RENC_SPLIT, RankEncoder, _flags
from harness.vocab import KNOWN_ENCODINGS, Vocab, from_tiktoken, token_digest

# letters of scripts whose words make long chunks (2-4 bytes each in UTF-8)
SCRIPTS = ["абвгдежзийклмнопрстуфхцчшщыьэюя", "αβγδεζηθικλμνξοπρστυφχψω",
           "的一是不了人我在有他这中大来上国个到说们为子和你地出道也时年得就那要下以生会自着去之过家",
           "あいうえおかきくけこさしすせそたちつてとなにぬねのはひふへほまみむめもやゆよらりるれろわをん",
           "가나다라마바사아자차카타파하거너더러머버서어저처커터퍼허고노도로모보소오조초코토포호",
           "अआइईउऊएऐओऔकखगघचछजझटठडढणतथदधनपफबभमयरलवशषसह", "abcdefghijklmnopqrstuvwxyzäöüéèçñ"]


def _long_words(rng: random.Random, n: int) -> list[bytes]:
    """n documents, each a few words of 16..200 bytes of one script (or mixed)."""
    docs = []
    for _ in range(n):
        words = []
        for _ in range(rng.randrange(1, 6)):
            alphabet = rng.choice(SCRIPTS + ["".join(SCRIPTS)])
            w, size = " ", rng.randrange(16, 201)
            while len(w.encode()) < size:
                w += rng.choice(alphabet)
            words.append(w)
        docs.append("".join(words).encode())
    return docs


@pytest.fixture(scope="module", params=["cl100k_base", "o200k_base"])
def published(request) -> Vocab:
    return from_tiktoken(vocab_path(request.param))


def test_published_encodings_are_regular(published):
    """Every token of cl100k_base and o200k_base merges from its bytes to itself (the
    twin, without the whole-chunk rule): what makes cutting exact there. The digest the
    library trusts for them (KNOWN_ENCODINGS, read back from tokenizer.bin) is theirs."""
    assert rank_twin.irregular_tokens(published) == []
    assert published.regular and _flags(published) & RENC_SPLIT
    assert token_digest(published.tokens) == KNOWN_ENCODINGS[published.name].tokens_sha256


def test_a_saved_published_vocabulary_stays_regular(published, tmp_path):
    from harness.loaded import LoadedTokenizer
    from harness.tokenizer import Tokenizer

    path = tmp_path / "v.bin"
    LoadedTokenizer(published).save(path)
    back = Tokenizer.load(path)
    assert back._vocab.regular
    changed = dataclasses.replace(published, tokens=published.tokens[:-1] + [b"\xff" * 9])
    LoadedTokenizer(changed).save(path)
    assert not Tokenizer.load(path)._vocab.regular      # other tokens: not trusted


def test_irregular_vocabulary_is_not_cut():
    """A rank file where 'abcd' (made of 'ab' + 'cd') cannot come from merging its
    bytes ('bc' merges first): whole chunks make it 'abcd', so a piece that is 'abcd'
    would be wrong inside a longer chunk; such a vocabulary is never cut."""
    tokens = [bytes([b]) for b in range(256)] + [b"bc", b"ab", b"cd", b"abcd"]
    v = Vocab("irregular", tokens, "gpt2", {}, None, True)
    assert rank_twin.irregular_tokens(v) == [259]
    assert not _flags(v) & RENC_SPLIT
    assert _flags(dataclasses.replace(v, whole_chunk=False)) & RENC_SPLIT     # (merging only)


@pytest.mark.parametrize("threads", [1, 3])
def test_cut_long_words_match_uncut_twin_and_tiktoken(published, threads):
    rng = random.Random(11)
    docs = _long_words(rng, 300)
    cut = RankEncoder(published)
    whole = RankEncoder(published, split=False)
    ids, counts = cut.encode_many(docs, threads)
    ids2, counts2 = whole.encode_many(docs, threads)
    assert np.array_equal(ids, ids2) and np.array_equal(counts, counts2)
    oracle = tiktoken_oracle(published.name)
    at = 0
    for k, (d, c) in enumerate(zip(docs, counts.tolist())):
        want = oracle.encode_ordinary(d.decode())
        assert ids[at:at + c].tolist() == want, (k, d[:60])
        at += c
    for d in docs[:40]:                                     # and the twin
        assert cut.encode_ordinary(d).tolist() == rank_twin.encode(d, published)


def test_cut_corpus_text_matches_uncut(published, corpus_files, corpus_texts):
    """The shared corpora's first 2 MB each: the same ids with and without cuts (a
    first pass, so that the long chunks are met for the first time), then again."""
    cut = RankEncoder(published)
    whole = RankEncoder(published, split=False)
    for path in corpus_files:
        docs, size = [], 0
        for t in corpus_texts(path):
            docs.append(t.encode("utf-8", "surrogatepass"))
            size += len(docs[-1])
            if size > 2_000_000:
                break
        want = whole.encode_many(docs, 2)
        for _ in range(2):
            got = cut.encode_many(docs, 2)
            assert np.array_equal(got[0], want[0]) and np.array_equal(got[1], want[1]), path.name


def test_merges_vocabulary_is_cut_and_matches_twin():
    """Without the whole-chunk rule (tokenizer.json merges) cutting is always exact: the
    checkasm vocabularies' merge one, on checkasm's long words of its letters."""
    from harness.dev.checkasm import _long_words, _rank_vocabs

    rng = random.Random(5)
    (_, v), = [(n, v) for n, v in _rank_vocabs(rng) if n == "merges"]
    assert _flags(v) & RENC_SPLIT
    enc = RankEncoder(v)
    for _ in range(60):
        text = _long_words(rng, v)              # (checkasm's long words)
        assert enc.encode_ordinary(text).tolist() == rank_twin.encode(text, v), text[:80]


def test_vocabulary_too_large_for_the_cut_tables_still_encodes():
    """33,000 3-byte tokens would overfill renc.t3 (2^15 entries): past 3/4 the library
    does not cut (rather than probe a full table forever) and encodes as the twin."""
    rng = random.Random(3)
    tokens = [bytes([b]) for b in range(256)]
    letters = list(range(97, 123)) + list(range(65, 91))
    pairs = [bytes([a, b]) for a in letters for b in letters]          # 2,704
    merges = [(a, b) for a in letters for b in letters]
    tokens += pairs
    index = {t: i for i, t in enumerate(tokens)}
    seen = set(tokens)
    while len(tokens) < 256 + len(pairs) + 33000:
        p, c = rng.choice(pairs), rng.choice(letters)
        t = p + bytes([c])
        if t not in seen:
            seen.add(t)
            merges.append((index[p], c))
            index[t] = len(tokens)
            tokens.append(t)
    v = Vocab("many 3-byte tokens", tokens, "nanochat", {}, merges, False)
    enc = RankEncoder(v)
    for _ in range(50):
        w = b" " + bytes(rng.choice(letters) for _ in range(rng.randrange(16, 100)))
        assert enc.encode_ordinary(w).tolist() == rank_twin.encode(w, v)


def test_merges_vocabulary_piece_that_is_a_token_is_merged():
    """Without the whole-chunk rule a piece's bytes are merged even where they are a
    token: 'abc' is in this vocabulary (merge ab + c) but 'bc' merges first, so the
    chunk keeps a, bc; a cut piece 'abc' must not come out as the token."""
    tokens = [bytes([b]) for b in range(256)] + [b"bc", b"ab", b"abc"]
    merges = [(ord("b"), ord("c")), (ord("a"), ord("b")), (257, ord("c"))]
    v = Vocab("irregular merges", tokens, "nanochat", {}, merges, False)
    assert rank_twin.irregular_tokens(v) == [258] and _flags(v) & RENC_SPLIT
    enc = RankEncoder(v)
    for text in (b" qqqqqqqqqqqqqqqabcqqqq", b" abcabcabcabcabcabcabc", b"zzzzzzzzzzzzzzzzzzabc"):
        assert enc.encode_ordinary(text).tolist() == rank_twin.encode(text, v), text


def _long_letter_tokens(v: Vocab) -> list[bytes]:
    """The vocabulary's tokens of over 15 bytes that are letters only (one chunk)."""
    out = []
    for t in v.tokens:
        if len(t) > 15:
            try:
                s = t.decode()
            except UnicodeDecodeError:
                continue
            if s.isalpha():
                out.append(t)
    return out


def test_tokens_over_15_bytes_reach_past_their_16_byte_prefix(published):
    """A start whose 4 bytes begin a token of over 15 bytes reaches as far as the
    longest token with its first 16 bytes (renc.reach16), not as far as the longest
    with its first 4: chunks made of such tokens, of their 16-byte prefixes followed
    by other letters, and of near misses, give tiktoken's ids, cut or not."""
    rng = random.Random(17)
    long = _long_letter_tokens(published)
    assert len(long) > 100
    letters = "".join(SCRIPTS)
    docs = []
    for _ in range(400):
        parts = []
        for _ in range(rng.randrange(1, 5)):
            t = rng.choice(long).decode()
            kind = rng.randrange(4)
            if kind == 1:                               # its 16-byte prefix, cut
                t = t.encode()[:16].decode("utf-8", "ignore") + rng.choice(letters)
            elif kind == 2:                             # one letter changed
                k = rng.randrange(len(t))
                t = t[:k] + rng.choice(letters) + t[k + 1:]
            elif kind == 3:                             # shortened by a letter
                t = t[:-1]
            parts.append(t)
            parts.append("".join(rng.choice(letters) for _ in range(rng.randrange(0, 4))))
        docs.append((" " + "".join(parts)).encode())
    cut = RankEncoder(published)
    whole = RankEncoder(published, split=False)
    ids, counts = cut.encode_many(docs, 2)
    ids2, counts2 = whole.encode_many(docs, 2)
    oracle = tiktoken_oracle(published.name)
    at = 0
    for k, (d, c) in enumerate(zip(docs, counts.tolist())):
        assert ids[at:at + c].tolist() == oracle.encode_ordinary(d.decode()), (k, d[:80])
        at += c
    assert np.array_equal(ids, ids2) and np.array_equal(counts, counts2)


def test_too_many_long_token_prefixes_still_cut_exactly():
    """A rank file (RF_RANKS, regular) with 13,000 tokens of 16 bytes, as many 16-byte
    prefixes: they overfill renc.reach16 (2^14 entries, 3/4 at most), so the library
    drops it (a start then reaches as far as reach4's longest token) and still encodes
    as the twin and as without cuts. The tokens are checkasm's regular levels (each
    level two halves from disjoint sets), so that each merges to itself."""
    from harness.dev.checkasm import regular_levels

    v, levels = regular_levels(random.Random(8), "many 16-byte tokens", (16, 16, 40, 300, 13000))
    sixteens = levels[-1]
    assert len(sixteens) == 13000
    v = dataclasses.replace(v, pretokenizer="nanochat")
    rng = random.Random(9)
    assert rank_twin.irregular_tokens(v) == []
    assert _flags(v) & RENC_SPLIT and _flags(v) & RENC_RANKS
    cut, whole = RankEncoder(v), RankEncoder(v, split=False)
    for _ in range(80):
        w = b" " + b"".join(rng.choice(sixteens)[:rng.choice([16, 16, 12, 8])]
                            for _ in range(rng.randrange(1, 8)))
        want = rank_twin.encode(w, v)
        assert cut.encode_ordinary(w).tolist() == want, w
        assert whole.encode_ordinary(w).tolist() == want, w
