"""Training above 65,535 ids (issue 24): the u32 build of the trainer
(asmbpe_train32, asm/train.inc's TOK32) and the tokenizers it makes.

- u32 == u16: forced onto the u32 path, on u32 tokens throughout (`_wide=True`) or
  widened after its first k merges on u16 tokens (`_wide=k`, what it does above
  65,535 ids with k = 65,279), training learns exactly the u16 path's merges and
  counts on every shared corpus, at 1, 2, 3 and 8 threads (8 oversubscribed on small
  machines), with verify on, fast and naive;
- above 65,535: harness.train gives uint32 merges and a LoadedTokenizer with
  merge_ids (merge i makes id 256 + i), whose ids equal the naive twin's encoding
  (SPEC §6) and which saves as tokenizer.bin version 2 (flags bit 2) and loads back;
- a trained vocabulary through the rank encoder (`trained_tokenizer`) gives the ids of
  asmbpe's own u16 encoder, duplicate token bytes included;
- every version-2 rejection that flags bit 2 adds.
(The merges equal rustbpe's above 65,535: tests/test_train_rustbpe.py. The checkasm
entry asmbpe_train32: tests/test_checkasm_train.py.)
"""
from __future__ import annotations

import struct

import numpy as np
import pytest

import harness
from corpus_util import corpus_docs
from harness.dev import twin
from harness.loaded import LoadedTokenizer, trained_tokenizer
from harness.tokenizer import (HEADER2_SIZE, SPECIALS, V2_MERGE_IDS, V2_MERGES, V2_OFF_FLAGS,
                               V2_OFF_NMERGES, Tokenizer, TokenizerFileError, parse_v2)


@pytest.mark.parametrize("name", ["english", "multilingual", "code"])
def test_u32_path_learns_the_u16_merges(name):
    docs = corpus_docs(name, 1_500_000)
    want = harness.train(docs, 4096, threads=2, verify=True, _wide=False)
    assert want.n_merges == 4096 - 272
    runs = [(True, t) for t in (1, 2, 3, 8)] + [(1, 2), (500, 3), (3000, 8), (5000, 2)]
    for mode, threads in runs:
        got = harness.train(docs, 4096, threads=threads, verify=True, _wide=mode)
        what = f"_wide={mode}, {threads} threads"
        assert got.merges.dtype == np.uint16, what     # every id fits: the u16 tokenizer
        assert np.array_equal(got.merges, want.merges), what
        assert np.array_equal(got.counts, want.counts), what
        assert got.tokenizer == want.tokenizer
        assert got.stats["narrow_merges"] == (0 if mode is True else min(mode, 3824)), what


def test_u32_naive_equals_fast():
    docs = corpus_docs("multilingual", 150_000)
    fast = harness.train(docs, 700, threads=2, _wide=True)
    naive = harness.train(docs, 700, naive=True, _wide=True)
    assert np.array_equal(fast.merges, naive.merges)
    assert np.array_equal(fast.counts, naive.counts)


def test_u32_matches_the_twin_on_small_inputs():
    docs = [b"low lower lowest newer newest wider " * 3, "naïve café über façade ".encode() * 2,
            b"aaaa aaa aa a " * 5, b"", bytes(range(256)) * 2]
    want = twin.train(docs, 272 + 120, pretokenizer="seed")
    got = harness.train(docs, 272 + 120, threads=3, pretokenizer="seed", _wide=True)
    assert got.merges.tolist() == [list(m) for m in np.asarray(want.merges).tolist()]
    assert got.counts.tolist() == np.asarray(want.counts).tolist()


@pytest.fixture(scope="module")
def big():
    """5 MB of multilingual text at vocab 70,000: 69,728 merges, ids above 65,535."""
    docs = corpus_docs("multilingual", 5_000_000)
    return docs, harness.train(docs, 70_000, threads=2, verify=True)


def test_above_u16_gives_a_u32_tokenizer(big):
    docs, r = big
    assert r.n_merges == 70_000 - 272
    assert r.merges.dtype == np.uint32 and r.merges.shape == (r.n_merges, 2)
    tok = r.tokenizer
    assert isinstance(tok, LoadedTokenizer) and tok.vocab.merge_ids
    assert tok.dtype == np.uint32 and tok.vocab_size == tok.n_vocab == 70_000
    assert tok.specials == {s: 70_000 - 16 + k for k, s in enumerate(SPECIALS)}
    assert tok.pretokenizer == "nanochat"
    assert np.array_equal(tok.merges, r.merges)
    assert (r.merges.max(axis=1) < 256 + np.arange(r.n_merges)).all()
    assert int(r.merges.max()) > 65_535                 # the wide ids are used


def test_above_u16_encodes_as_the_twin(big):
    docs, r = big
    tok = r.tokenizer
    sample = [docs[k] for k in range(0, len(docs), max(1, len(docs) // 40))][:40]
    got = tok.encode_batch(sample, threads=2)
    for doc, ids in zip(sample, got):
        assert ids.dtype == np.uint32
        want = twin.encode(r.merges, doc, splitter=harness.split)
        assert ids.tolist() == want
        assert tok.decode_bytes(ids) == doc
    assert int(max(int(i.max()) for i in got if len(i))) > 65_535


def test_above_u16_saves_and_loads(big, tmp_path):
    _, r = big
    path = tmp_path / "t.bin"
    r.tokenizer.save(path)
    data = path.read_bytes()
    assert struct.unpack_from("<H", data, 8)[0] == 2
    assert struct.unpack_from("<I", data, V2_OFF_FLAGS)[0] == V2_MERGES | V2_MERGE_IDS
    back = Tokenizer.load(path)
    assert back == r.tokenizer and back.merges_hash == r.tokenizer.merges_hash
    assert back.vocab.merge_ids
    text = "Ein kleiner Test — 小さなテスト, prueba pequeña."
    assert back.encode(text).tolist() == r.tokenizer.encode(text).tolist()


def test_trained_vocab_through_the_rank_encoder_gives_the_u16_ids():
    docs = corpus_docs("english", 1_000_000) + corpus_docs("code", 300_000)
    r = harness.train(docs, 3000, threads=2)
    loaded = trained_tokenizer(r.merges, r.tokenizer.pretokenizer)
    sample = docs[::25][:200]
    for want, got in zip(r.tokenizer.encode_batch(sample), loaded.encode_batch(sample)):
        assert got.tolist() == want.tolist()


def test_duplicate_token_bytes_keep_their_ids(tmp_path):
    # (a, a) -> 256 "aa"; (256, a) -> 257 "aaa"; (a, 256) -> 258 "aaa" again
    merges = np.array([(97, 97), (256, 97), (97, 256), (98, 258)], dtype=np.uint32)
    own = Tokenizer(merges.astype(np.uint16), pretokenizer="seed")
    loaded = trained_tokenizer(merges, "seed")
    assert loaded.token_bytes(257) == loaded.token_bytes(258) == b"aaa"
    for text in [b"aaaa", b"aaa", b"baaa", b"a aa aaa aaaa aaaaa baaaa", b"b" + b"a" * 40]:
        assert loaded.encode(text).tolist() == own.encode(text).tolist() == \
            twin.encode(merges, text, pretokenizer="seed")
    path = tmp_path / "dup.bin"
    loaded.save(path)
    assert Tokenizer.load(path) == loaded


def _image(merges) -> bytes:
    return trained_tokenizer(np.array(merges, dtype=np.uint32), "seed").to_bytes()


def _patch(data: bytes, offset: int, fmt: str, *values) -> bytes:
    out = bytearray(data)
    struct.pack_into(fmt, out, offset, *values)
    return bytes(out)


def _rehash(data: bytes) -> bytes:
    """The image with its identity hash made right again (so the check under test is
    the one that fires)."""
    from harness.tokenizer import V2_OFF_HASH, identity_hash
    pretok = struct.unpack_from("<H", data, 10)[0]
    flags = struct.unpack_from("<I", data, V2_OFF_FLAGS)[0]
    name_len = struct.unpack_from("<I", data, 48)[0]
    return _patch(data, V2_OFF_HASH, "<Q",
                  identity_hash(pretok, flags, data[HEADER2_SIZE:len(data) - name_len]))


def test_v2_merge_ids_rejections():
    good = _image([(97, 97), (256, 97), (97, 256)])
    assert parse_v2(good, "good").merge_ids
    # bit 2 without bit 1
    bad = _rehash(_patch(good, V2_OFF_FLAGS, "<I", V2_MERGE_IDS))
    with pytest.raises(TokenizerFileError, match="needs bit 1"):
        parse_v2(bad, "bad")
    # duplicates refused without bit 2
    bad = _rehash(_patch(good, V2_OFF_FLAGS, "<I", V2_MERGES))
    with pytest.raises(TokenizerFileError, match="duplicate token"):
        parse_v2(bad, "bad")
    # n_merges is n_tokens - 256 under bit 2
    bad = _rehash(_patch(good, V2_OFF_NMERGES, "<I", 2))
    with pytest.raises(TokenizerFileError) as e:
        parse_v2(bad, "bad")
    assert e.value.offset == V2_OFF_NMERGES
    # a merge whose bytes are not its token's
    swapped = _image([(97, 97), (97, 256), (256, 97)])      # same tokens, merges 1, 2 fine
    n_tokens = 256 + 3
    o_merges = len(swapped) - len("asmbpe") - 3 * 8
    bad = _rehash(_patch(swapped, o_merges + 8, "<II", 98, 98))    # merge 1 = (b, b)
    with pytest.raises(TokenizerFileError, match="does not make token 257") as e:
        parse_v2(bad, "bad")
    assert e.value.offset == o_merges + 8
    # a merge naming an id not yet made
    bad = _rehash(_patch(swapped, o_merges, "<II", 257, 97))
    with pytest.raises(TokenizerFileError, match="does not make token 256"):
        parse_v2(bad, "bad")
    assert n_tokens == struct.unpack_from("<I", good, 12)[0]


def test_vocab_size_bounds():
    with pytest.raises(ValueError):
        harness.train([b"abc"], (1 << 20) + 1)
    with pytest.raises(ValueError, match="u16 trainer"):
        harness.train([b"abc"], 70_000, _wide=False)
    r = harness.train([b"ab ab ab"], 1 << 20)    # stops early: (a, b), (" ", ab)
    assert r.n_merges == 2 and r.merges.dtype == np.uint16
    assert r.stopped_early


@pytest.mark.parametrize("library", ["hf", "tiktoken"])
def test_above_u16_exports_give_the_same_ids(big, library):
    from harness import export
    pytest.importorskip("tokenizers" if library == "hf" else "tiktoken")
    _, r = big
    held_out = corpus_docs("multilingual", 7_000_000)[-300:]
    assert export.first_difference(r.tokenizer, held_out, library) is None


@pytest.mark.parametrize("library", ["hf", "tiktoken"])
def test_duplicate_bytes_refuse_the_exports(library):
    from harness import export
    dup = trained_tokenizer(np.array([(97, 97), (256, 97), (97, 256)]), "seed")
    with pytest.raises(export.DuplicateTokenError, match="258 = 257"):
        export.first_difference(dup, ["aaa"], library)


def test_above_u16_through_the_commands(tmp_path):
    """`asmbpe train --vocab-size 70000` writes tokenizer.bin version 2; `encode` with it
    writes a .tok of u32 ids that `decode` turns back into the text and `stats
    --verify` accepts."""
    from cli_util import invoke
    docs = corpus_docs("multilingual", 5_000_000)
    src = tmp_path / "docs.jsonl"
    import json as _json
    src.write_text("".join(_json.dumps({"text": d.decode()}) + "\n" for d in docs))
    tok = tmp_path / "t.bin"
    r = invoke("train", src, "-o", tok, "--vocab-size", 70_000, "--threads", 2, "-q")
    assert r.exit_code == 0, r.output
    assert struct.unpack_from("<H", tok.read_bytes(), 8)[0] == 2
    out = tmp_path / "docs.tok"
    r = invoke("encode", src, "-t", tok, "-o", out, "--threads", 2, "-q")
    assert r.exit_code == 0, r.output
    tf = harness.read_tok(out)
    assert tf.tokens.dtype == np.uint32 and int(tf.tokens.max()) > 65_535
    r = invoke("stats", out, "-t", tok, "--verify", "-q")
    assert r.exit_code == 0, r.output
    r = invoke("decode", out, "-t", tok, "-q")
    assert r.exit_code == 0, r.output
    assert r.stdout_bytes.decode() == "".join(d.decode() for d in docs)
