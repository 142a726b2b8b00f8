"""The tiktoken and Hugging Face exports (harness.export, SPEC §6, §7).

HF's BPE is the oracle of merge-order encoding: the exported tokenizer.json must encode
exactly as harness.dev.twin.encode. tiktoken merges by the rank of the concatenated bytes;
it must agree too on trained tokenizers, and the hand-built case below shows where it
does not. Tokenizers with two ids spelling the same bytes cannot be exported at all.

The tokenizers here use the seed pre-tokenizer (the twin's default, and the one whose
assembly is held to its oracle); the last test holds a nanochat tokenizer's exports to
asmbpe on every corpus document.
"""
from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import harness
from harness import export
from harness.dev import twin
from harness.corpora import read_documents
from harness.dev.oracle import ORACLE_PATTERN_LITERAL
from harness.tokenizer import SPECIALS, Tokenizer

tokenizers = pytest.importorskip("tokenizers")
tiktoken = pytest.importorskip("tiktoken")

KJV = Path(__file__).resolve().parent.parent / "datasets" / "kjv.txt"
A, B, C = ord("a"), ord("b"), ord("c")


@pytest.fixture(scope="module")
def kjv_tok() -> Tokenizer:
    return harness.train(KJV.read_bytes(), vocab_size=2048, pretokenizer="seed").tokenizer


@pytest.fixture(scope="module")
def corpus_sample(corpus_files) -> dict[str, list[bytes]]:
    """About 6 MB of each corpus (english, multilingual, code), its documents as bytes."""
    return {p.stem: read_documents(p, 6 << 20) for p in corpus_files
            if p.stem in ("english", "multilingual", "code")}


@pytest.fixture(scope="module")
def corpus_tok(corpus_sample) -> Tokenizer:
    """vocab_size 8192, trained by the assembly on the three corpus samples together."""
    docs = [d for docs in corpus_sample.values() for d in docs]
    return harness.train(docs, vocab_size=8192, pretokenizer="seed").tokenizer


@pytest.fixture(scope="module")
def sample_texts(corpus_sample) -> list[str]:
    """Up to 100 KB of text from each corpus, in pieces of at most 10 KB (the twin is
    slow Python), from the last documents of each sample."""
    texts = []
    for docs in corpus_sample.values():
        taken = 0
        for doc in reversed(docs):
            piece = doc[:10_000].decode("utf-8", "ignore")
            texts.append(piece)
            taken += len(piece)
            if taken > 100_000:
                break
    return texts


def hf_ids(hf, text: str) -> list[int]:
    return hf.encode(text, add_special_tokens=False).ids


def exported(tok: Tokenizer, tmp: Path):
    """(HF tokenizer, tiktoken Encoding), each written to tmp and loaded back."""
    export.export_hf(tok, tmp / "tokenizer.json")
    export.export_tiktoken(tok, tmp / "ranks.tiktoken")
    return (export.load_hf(tmp / "tokenizer.json"),
            export.load_tiktoken(tmp / "ranks.tiktoken", tok))


# -------------------------------------------------------------------- against the twin

def test_hf_and_tiktoken_match_the_twin_on_the_corpora(corpus_tok, sample_texts, tmp_path):
    hf, enc = exported(corpus_tok, tmp_path)
    assert len(sample_texts) >= 10
    for k, text in enumerate(sample_texts):
        expected = twin.encode(corpus_tok.merges, text.encode(), pretokenizer=corpus_tok.pretokenizer)
        assert hf_ids(hf, text) == expected, f"HF differs on text {k}"
        assert enc.encode_ordinary(text) == expected, f"tiktoken differs on text {k}"


def test_first_difference_finds_none_on_the_corpora(corpus_tok, sample_texts):
    assert export.first_difference(corpus_tok, sample_texts) is None
    assert export.first_difference(corpus_tok, sample_texts, library="tiktoken") is None


def test_hf_and_tiktoken_match_the_twin_on_the_bundled_sample(kjv_tok, tmp_path):
    hf, enc = exported(kjv_tok, tmp_path)
    text = KJV.read_text()[:50_000]
    odd = "naïve café — 日本語のテキスト。 emoji 😀😀 ok\r\n\n  x 123456 don't <|bos|>"
    for t in (text, odd):
        expected = twin.encode(kjv_tok.merges, t.encode(), pretokenizer=kjv_tok.pretokenizer)
        assert hf_ids(hf, t) == expected
        assert enc.encode_ordinary(t) == expected


texts = st.lists(st.sampled_from(["a", "b", "ab", " ", "\n", "1", "é", "日", "'s", "!",
                                  "aa"]), max_size=30).map("".join)


@settings(max_examples=40, deadline=None)
@given(st.lists(texts, min_size=1, max_size=10), st.lists(texts, max_size=5))
def test_random_trained_tokenizers_export_exactly(corpus, samples):
    result = twin.train(corpus, 272 + 30, pretokenizer="seed")
    tok = Tokenizer(result.merges, pretokenizer="seed")
    with tempfile.TemporaryDirectory() as tmp:
        hf, enc = exported(tok, Path(tmp))
    for text in corpus + samples:
        expected = twin.encode(tok.merges, text.encode(), pretokenizer=tok.pretokenizer)
        assert hf_ids(hf, text) == expected
        assert enc.encode_ordinary(text) == expected


# ------------------------------------------------------------ where the algorithms part

def test_tiktoken_merges_a_pair_that_is_not_a_merge(tmp_path):
    # (b, c) is merge 0, (a, b) merge 1, (ab, c) merge 2 = "abc". Merge order turns "abc"
    # into a|bc and stops there, since (a, bc) is no merge; tiktoken joins a and bc
    # because their bytes "abc" have a rank. HF follows the merges.
    tok = Tokenizer([(B, C), (A, B), (257, C)], pretokenizer="seed")
    hf, enc = exported(tok, tmp_path)
    assert twin.encode(tok.merges, b"abc", pretokenizer=tok.pretokenizer) == [A, 256]
    assert hf_ids(hf, "abc") == [A, 256]
    assert enc.encode_ordinary("abc") == [258]
    docs = ["bc", "ab c", "x abc"]
    assert export.first_difference(tok, docs) is None
    assert export.first_difference(tok, docs, library="tiktoken") == 2


def test_trained_tokenizers_have_no_duplicates(corpus_tok, kjv_tok):
    assert export.duplicate_tokens(corpus_tok) == []
    assert export.duplicate_tokens(kjv_tok) == []


def test_duplicates_are_refused_and_nothing_is_written(tmp_path):
    # merge 2 (ab, c) and merge 3 (a, bc) both spell "abc"
    tok = Tokenizer([(A, B), (B, C), (256, C), (A, 257)])
    assert export.duplicate_tokens(tok) == [(259, 258)]
    with pytest.raises(export.DuplicateTokenError, match="259 = 258"):
        export.export_hf(tok, tmp_path / "tokenizer.json")
    with pytest.raises(export.DuplicateTokenError, match="259 = 258"):
        export.export_tiktoken(tok, tmp_path / "ranks.tiktoken")
    assert list(tmp_path.iterdir()) == []


# --------------------------------------------------------------------- the files

def test_hf_file_loads_with_specials_and_decodes(kjv_tok, tmp_path):
    path = tmp_path / "tokenizer.json"
    export.export_hf(kjv_tok, path)
    raw = tokenizers.Tokenizer.from_file(str(path))
    assert raw.get_vocab_size() == kjv_tok.vocab_size
    for name, i in kjv_tok.specials.items():
        assert raw.token_to_id(name) == i
        assert raw.id_to_token(i) == name
    text = "In the beginning 日本語 😀\n"
    ids = hf_ids(raw, text)
    assert ids == kjv_tok.encode(text).tolist()
    assert raw.decode(ids) == text
    # the file alone turns special text into the special; load_hf keeps it text
    assert hf_ids(raw, "x<|bos|>") == [ord("x"), kjv_tok.special_id("<|bos|>")]
    assert hf_ids(export.load_hf(path), "x<|bos|>") == kjv_tok.encode("x<|bos|>").tolist()
    model = json.loads(path.read_text())["model"]
    assert model["type"] == "BPE" and len(model["merges"]) == kjv_tok.n_merges


def test_tiktoken_files_load_and_decode(kjv_tok, tmp_path, monkeypatch):
    from tiktoken.load import load_tiktoken_bpe

    path = tmp_path / "ranks.tiktoken"
    export.export_tiktoken(kjv_tok, path)
    lines = path.read_bytes().splitlines()
    assert len(lines) == kjv_tok.vocab_size - len(SPECIALS)
    assert lines[ord("A")] == b"QQ== 65"
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", "")          # no copy in tiktoken's cache
    assert load_tiktoken_bpe(str(path)) == {b: i for i, b in
                                            enumerate(kjv_tok.id_to_bytes()[:-len(SPECIALS)])}
    sidecar = json.loads((tmp_path / "ranks.tiktoken.json").read_text())
    assert sidecar["pat_str"] == ORACLE_PATTERN_LITERAL
    assert sidecar["special_tokens"] == kjv_tok.specials
    enc = export.load_tiktoken(path, kjv_tok)
    assert enc.n_vocab == kjv_tok.vocab_size
    text = "And God said, Let there be light: 日本語 😀"
    ids = enc.encode_ordinary(text)
    assert ids == kjv_tok.encode(text).tolist()
    assert enc.decode(ids) == text
    assert enc.encode("<|end|>", allowed_special="all") == [kjv_tok.special_id("<|end|>")]


def test_load_tiktoken_refuses_another_tokenizers_export(kjv_tok, tmp_path):
    path = tmp_path / "ranks.tiktoken"
    export.export_tiktoken(kjv_tok, path)
    other = Tokenizer(kjv_tok.merges[:-1], pretokenizer="seed")
    with pytest.raises(ValueError, match="not the tiktoken export"):
        export.load_tiktoken(path, other)


@pytest.mark.parametrize("fmt", ["hf", "tiktoken"])
def test_writes_are_atomic(kjv_tok, tmp_path, monkeypatch, fmt):
    write = export.export_hf if fmt == "hf" else export.export_tiktoken
    path = tmp_path / "out"
    path.write_bytes(b"old content")
    real_replace = os.replace

    def failing_replace(src, dst):
        raise OSError("disk full (simulated)")

    monkeypatch.setattr(export.os, "replace", failing_replace)
    with pytest.raises(OSError, match="simulated"):
        write(kjv_tok, path)
    assert path.read_bytes() == b"old content"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]      # no temp files left

    monkeypatch.setattr(export.os, "replace", real_replace)
    write(kjv_tok, path)
    expected = ["out"] if fmt == "hf" else ["out", "out.json"]
    assert sorted(p.name for p in tmp_path.iterdir()) == expected
    assert path.read_bytes() != b"old content"


def test_first_difference_argument_check(kjv_tok):
    with pytest.raises(ValueError, match="library"):
        export.first_difference(kjv_tok, ["x"], library="sentencepiece")


def test_bytes_to_unicode_is_gpt2s_alphabet():
    alphabet = export.bytes_to_unicode()
    assert len(set(alphabet.values())) == 256
    assert alphabet[ord("A")] == "A"
    assert alphabet[ord(" ")] == "Ġ" and alphabet[ord("\n")] == "Ċ"
    assert alphabet[0] == "Ā" and alphabet[0xAD] == "Ń"
    assert np.all([c.isprintable() for c in alphabet.values()])


# ---------------------------------------------- a nanochat tokenizer, every document

@pytest.fixture(scope="module")
def nanochat_tok(corpus_sample) -> Tokenizer:
    """vocab_size 8192, the nanochat pre-tokenizer (the default), trained by the
    assembly on the three corpus samples together."""
    docs = [d for docs in corpus_sample.values() for d in docs]
    return harness.train(docs, vocab_size=8192, pretokenizer="nanochat").tokenizer


def _utf8(text: str) -> bool:
    try:
        text.encode("utf-8")
        return True
    except UnicodeEncodeError:                  # a document that is not valid UTF-8
        return False


@pytest.mark.slow
@pytest.mark.parametrize("name", ["english", "multilingual", "code"])
def test_nanochat_exports_equal_asmbpe_on_every_valid_corpus_document(
        corpus_files, corpus_texts, nanochat_tok, tmp_path, name):
    """The tiktoken and tokenizer.json exports of a nanochat tokenizer carry nanochat's
    pattern string and give asmbpe's ids on every valid UTF-8 document of each corpus."""
    path = next((p for p in corpus_files if p.stem == name), None)
    if path is None:
        pytest.skip(f"{name}.parquet not found")
    hf, enc = exported(nanochat_tok, tmp_path)
    texts = [t for t in corpus_texts(path) if _utf8(t)]
    ids, counts = nanochat_tok.encode_many(texts)
    ends = np.cumsum(counts, dtype=np.int64)
    starts = ends - counts.astype(np.int64)
    failures = []
    for k0 in range(0, len(texts), 256):
        block = texts[k0:k0 + 256]
        theirs = zip(hf.encode_batch(block, add_special_tokens=False),
                     enc.encode_ordinary_batch(block))
        for k, (h, t) in enumerate(theirs, k0):
            ours = ids[starts[k]:ends[k]].tolist()
            for library, other in (("tokenizers", h.ids), ("tiktoken", t)):
                if ours != other:
                    at = next((i for i, (a, b) in enumerate(zip(ours, other)) if a != b),
                              min(len(ours), len(other)))
                    failures.append(f"{name} document {k}: {library} differs at id {at}")
    assert not failures, f"{len(failures)} differences; " + "; ".join(failures[:10])


# ---------------------------------------------------------------------- vocabulary dump

TRICKY = [b"plain", b" the", b"", b"\t\n\r", b"back\\slash", b'"quoted"', b"\x00\x1f\x7f",
          "\u00a0nbsp\u2028\u200b\ufeff".encode(), "é日🎉".encode(), b"\xc3", b"\xe6\x97",
          b"\xf0\x9f\x8e", b"\xff\xfe", b"\xed\xa0\x80", "\u0085".encode(), b"\\x41",
          b"\\u0041", "\U000e0001".encode()]


@pytest.mark.parametrize("data", TRICKY + [bytes([b]) for b in range(256)])
def test_token_repr_is_one_quoted_cell_and_parses_back(data):
    shown = export.token_repr(data)
    assert shown[0] == shown[-1] == '"'
    assert not any(c in shown for c in "\t\n\r\x00\x85\u2028\u00a0")
    assert shown.isprintable()
    assert export.parse_token_repr(shown) == data


def test_token_repr_shows_text_as_it_reads():
    assert export.token_repr(b" the") == '" the"'
    assert export.token_repr("日本".encode()) == '"日本"'
    assert export.token_repr(b"\xe6\x97") == r'"\xe6\x97"'          # a partial character
    assert export.token_repr(b"a\tb\\\"") == r'"a\tb\\\""'
    assert export.token_repr("\u00a0".encode()) == r'"\u00a0"'
    for bad in ('x', '"a', '"\\q"', '"\\x4"', '"a"b"', '"\\u12g4"'):
        with pytest.raises(ValueError):
            export.parse_token_repr(bad)


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=40))
def test_token_repr_round_trips_any_bytes(data):
    assert export.parse_token_repr(export.token_repr(data)) == data


def test_vocab_dump_of_an_own_tokenizer(tmp_path):
    """Every id once: bytes (ids 0..255 and their merges) and the 16 specials with their
    names; the ids each merge joined; the winning counts when training's are given."""
    result = harness.train(KJV.read_bytes()[:1 << 19], vocab_size=1024)
    tok = result.tokenizer
    path = tmp_path / "vocab.tsv"
    export.export_vocab(tok, path, counts=result.counts)
    assert path.read_text().splitlines()[0] == "id\ttoken\tleft\tright\tcount\tkind"
    rows = export.read_vocab(path)
    table = tok.id_to_bytes()
    assert [r.id for r in rows] == list(range(tok.vocab_size))
    assert [r.token for r in rows] == table
    merges = tok.merges.tolist()
    for r in rows:
        if r.id < 256:
            assert (r.kind, r.left, r.right, r.count) == ("byte", None, None, None)
        elif r.id < 256 + tok.n_merges:
            assert r.kind == "merge"
            assert [r.left, r.right] == merges[r.id - 256]
            assert table[r.left] + table[r.right] == r.token
            assert r.count == int(result.counts[r.id - 256]) > 0
        else:
            assert r.kind == "special" and r.token.decode() == SPECIALS[r.id - 256 - tok.n_merges]
    with pytest.raises(ValueError, match="counts for"):
        export.export_vocab(tok, tmp_path / "bad.tsv", counts=result.counts[:-1])
    assert not (tmp_path / "bad.tsv").exists()


def test_vocab_dump_command(kjv_tok, tmp_path):
    """`asmbpe export --format vocab`: tokenizer.bin has no counts, so the column is
    empty; the file reads back to the tokenizer's bytes."""
    from cli_util import invoke

    bin_path, out = tmp_path / "tok.bin", tmp_path / "vocab.tsv"
    kjv_tok.save(bin_path)
    run = invoke("export", "--format", "vocab", "-t", bin_path, "-o", out)
    assert run.exit_code == 0, run.output
    rows = export.read_vocab(out)
    assert [r.token for r in rows] == kjv_tok.id_to_bytes()
    assert all(r.count is None for r in rows)
    assert sum(r.kind == "merge" for r in rows) == kjv_tok.n_merges


def test_vocab_dump_of_cl100k(tmp_path):
    """cl100k_base: its tokens (ranks) by id, the ids 100256 and 100261..100275 that
    are no token left out, the specials by name, each merged token's two parts as
    tiktoken's rank order splits it."""
    from loaded_util import loaded

    tok = loaded("cl100k_base")
    path = tmp_path / "cl100k.tsv"
    export.export_vocab(tok, path)
    rows = export.read_vocab(path)
    tokens = tok.vocab.tokens
    by_id = {r.id: r for r in rows}
    assert len(rows) == len(tokens) + len(tok.specials)
    assert 100256 not in by_id and not any(i in by_id for i in range(100261, 100276))
    for i, t in enumerate(tokens):
        r = by_id[i]
        assert r.token == t and r.count is None
        if len(t) == 1:
            assert (r.kind, r.left, r.right) == ("byte", None, None)
        else:
            assert r.kind == "merge" and tokens[r.left] + tokens[r.right] == t
            assert r.left < i and r.right < i                 # lower ranks
    for name, i in tok.specials.items():
        assert (by_id[i].token, by_id[i].kind) == (name.encode(), "special")
    assert by_id[tok.id_of(" hello")].token == b" hello"


def test_vocab_dump_of_a_tokenizer_json_gives_its_merges(kjv_tok, tmp_path):
    """A tokenizer.json vocabulary (merges in priority order): the same rows as the
    asmbpe tokenizer it was exported from."""
    export.export_hf(kjv_tok, tmp_path / "tokenizer.json")
    loaded_tok = Tokenizer.from_hf(tmp_path / "tokenizer.json")
    assert loaded_tok.is_loaded and loaded_tok.n_merges == kjv_tok.n_merges
    assert export.vocab_rows(loaded_tok) == export.vocab_rows(kjv_tok)
