"""Tokenizer.from_tiktoken / from_hf (harness.loaded; SPEC §11) and the command line
with a loaded vocabulary: ids == tiktoken on corpus text, tokenizer.bin version 2
round trip, `asmbpe encode -t *.tiktoken.gz` writing a .tok version 2 whose documents
come back through the index, threads 1/2/3/8, --doc-token, decode, show, stats,
export, and a tokenizer.json trained here with HF's BpeTrainer."""
from __future__ import annotations

import gzip
import json

import numpy as np
import pytest

from cli_util import invoke, one_line_error
from harness.tokenizer import Tokenizer
from harness.tokfile import read_tok
from loaded_util import loaded, tiktoken_oracle, vocab_path

NAMES = ["cl100k_base", "o200k_base"]
CORPUS_BYTES = 300_000          # of each corpus file per vocabulary


def utf8_docs(corpus_files, corpus_texts, per_file: int):
    """Valid UTF-8 documents of every corpus, about per_file bytes of each."""
    out = []
    for path in corpus_files:
        taken = 0
        for doc in corpus_texts(path):
            try:
                n = len(doc.encode("utf-8"))
            except UnicodeEncodeError:
                continue
            out.append(doc)
            taken += n
            if taken >= per_file:
                break
    return out


@pytest.mark.parametrize("name", NAMES)
def test_ids_equal_tiktoken(name, corpus_files, corpus_texts):
    tok, enc = loaded(name), tiktoken_oracle(name)
    assert tok.dtype == np.uint32 and tok.is_loaded and tok.name == name
    docs = utf8_docs(corpus_files, corpus_texts, CORPUS_BYTES)
    got = tok.encode_batch(docs, threads=2)
    want = enc.encode_ordinary_batch(docs)
    for d, g, w in zip(docs, got, want):
        assert g.dtype == np.uint32 and g.tolist() == w, d[:80]
    for d in docs[:50]:
        assert tok.decode(tok.encode(d)) == d
    special = "a <|endoftext|> b"
    assert tok.encode(special).tolist() == enc.encode_ordinary(special)
    assert tok.encode(special, allowed_special="all").tolist() == enc.encode(
        special, allowed_special="all")
    assert tok.encode(special, allowed_special={"<|endoftext|>"}).tolist() == enc.encode(
        special, allowed_special={"<|endoftext|>"})
    with pytest.raises(ValueError, match="not a special token"):
        tok.encode(special, allowed_special={"<|bos|>"})


@pytest.mark.parametrize("name", NAMES)
def test_save_load_round_trip_gives_the_same_ids(name, tmp_path, corpus_files, corpus_texts):
    tok = loaded(name)
    path = tmp_path / "t.bin"
    tok.save(path)
    again = Tokenizer.load(path)
    assert again == tok and again.merges_hash == tok.merges_hash and again.name == name
    docs = utf8_docs(corpus_files, corpus_texts, 30_000)
    a, ca = tok.encode_many(docs)
    b, cb = again.encode_many(docs)
    assert np.array_equal(a, b) and np.array_equal(ca, cb)


def test_properties_and_refusals():
    tok = loaded("cl100k_base")
    assert tok.vocab_size == tok.n_vocab == 100277 and tok.n_tokens == 100256
    assert tok.special_id("<|endoftext|>") == 100257
    assert tok.special_tokens == tok.specials and tok.merges is None and tok.n_merges == 0
    assert tok.bos_id is None
    for call in (lambda: tok.encode("x", bos=True), lambda: tok.encode_document("x"),
                 lambda: tok.render_chat([{"role": "user", "content": "x"}])):
        with pytest.raises(ValueError, match="needs a <\\|bos\\|>-like special"):
            call()
    with pytest.raises(KeyError, match="unknown special token"):
        tok.special_id("<|bos|>")
    with pytest.raises(ValueError, match="id 100256 at position 1 is not a token"):
        tok.decode_bytes([5, 100256])
    assert tok.decode_bytes([100257]) == b"<|endoftext|>"
    ids = tok.id_to_bytes()
    assert len(ids) == 100277 and ids[100256] == b"" and ids[100276] == b"<|endofprompt|>"


def test_unknown_tiktoken_file_needs_a_pretokenizer(tmp_path):
    data = gzip.decompress(vocab_path("cl100k_base").read_bytes())
    lines = data.splitlines(keepends=True)
    path = tmp_path / "mine.tiktoken"
    path.write_bytes(b"".join(lines[:1000]))           # ranks 0..999: not a known file
    from harness.vocab import VocabError
    with pytest.raises(VocabError, match="pretokenizer="):
        Tokenizer.from_tiktoken(path)
    tok = Tokenizer.from_tiktoken(path, pretokenizer="cl100k")
    assert tok.dtype == np.uint16 and tok.vocab_size == 1000 and tok.specials == {}
    one_line_error(invoke("show", "-t", path, "hello"), "give --pretokenizer NAME")
    r = invoke("show", "-t", path, "--pretokenizer", "cl100k", "--no-color", "hello")
    assert r.exit_code == 0, r.output
    assert "ids              uint16" in r.stderr
    one_line_error(invoke("show", "-t", tmp_path / "none.tiktoken", "x"), "none.tiktoken")


@pytest.fixture(scope="module")
def jsonl(tmp_path_factory, corpus_files, corpus_texts):
    """A JSONL of corpus documents (an empty one and special-token text among them)."""
    docs = utf8_docs(corpus_files, corpus_texts, 40_000)
    docs[3:3] = ["", "text with <|endoftext|> inside"]
    p = tmp_path_factory.mktemp("in") / "docs.jsonl"
    p.write_text("".join(json.dumps({"text": d}) + "\n" for d in docs))
    return p, docs


def test_cli_encode_writes_a_v2_tok(tmp_path, jsonl):
    src, docs = jsonl
    gz = vocab_path("cl100k_base")
    enc = tiktoken_oracle("cl100k_base")
    outs = []
    for threads in (1, 2, 3, 8):
        out = tmp_path / f"t{threads}.tok"
        r = invoke("encode", src, "-t", gz, "-o", out, "--threads", threads, "-q")
        assert r.exit_code == 0, r.output
        outs.append(out.read_bytes())
    assert all(o == outs[0] for o in outs[1:])          # identical files
    tok = loaded("cl100k_base")
    tf = read_tok(tmp_path / "t1.tok", tok)
    assert (tf.version, tf.width, tf.n_documents) == (2, 4, len(docs))
    got = [d.tolist() for d in tf.documents()]
    assert got == enc.encode_ordinary_batch(docs)
    assert tf.source_bytes == sum(len(d.encode()) for d in docs)
    d = invoke("decode", tmp_path / "t1.tok", "-t", gz, "-q")
    assert d.exit_code == 0 and d.stdout == "".join(docs)
    # the wrong tokenizer
    one_line_error(invoke("decode", tmp_path / "t1.tok", "-t", vocab_path("o200k_base")),
                   "written by a different tokenizer")


@pytest.mark.parametrize("at", ["start", "end"])
def test_cli_doc_token(tmp_path, jsonl, at):
    src, docs = jsonl
    gz = vocab_path("cl100k_base")
    enc = tiktoken_oracle("cl100k_base")
    out = tmp_path / "d.tok"
    r = invoke("encode", src, "-t", gz, "-o", out, "--doc-token", "<|endoftext|>",
               "--doc-token-at", at)
    assert r.exit_code == 0, r.output
    assert f"({len(docs):,} special)" in r.stdout
    tf = read_tok(out, loaded("cl100k_base"))
    for doc, ids in zip(docs, tf.documents()):
        want = enc.encode_ordinary(doc)
        want = [100257] + want if at == "start" else want + [100257]
        assert ids.tolist() == want
    text = invoke("decode", out, "-t", gz, "-q").stdout
    eot = "<|endoftext|>"
    assert text == "".join(eot + d if at == "start" else d + eot for d in docs)
    one_line_error(invoke("encode", src, "-t", gz, "-o", tmp_path / "x.tok", "--doc-token",
                          "<|bos|>"), "not a special token of cl100k_base")
    assert not (tmp_path / "x.tok").exists()


def test_cli_show_stats_export(tmp_path, jsonl):
    gz = vocab_path("o200k_base")
    r = invoke("show", "-t", gz, "--no-color", "hello world")
    assert r.exit_code == 0, r.output
    assert r.stdout.splitlines() == ["24912\t'hello'", "2375\t' world'"]
    for needle in ("vocabulary       o200k_base (200,019 ids", "pre-tokenizer    o200k (id 4)",
                   "<|endoftext|> 199999", "ids              uint32"):
        assert needle in r.stderr
    out = tmp_path / "o.tok"
    assert invoke("encode", jsonl[0], "-t", gz, "-o", out, "-q").exit_code == 0
    s = invoke("stats", out, "-t", gz, "--top", "3")
    assert s.exit_code == 0, s.output
    assert f"documents        {len(jsonl[1]):,}" in s.stdout
    assert ", 0 special)" in s.stdout and "vocabulary       o200k_base" in s.stdout
    s2 = invoke("stats", jsonl[0], "-t", gz, "--top", "3")
    assert s2.stdout.splitlines()[:5] == s.stdout.splitlines()[:5]
    # export to tiktoken: tiktoken gives our ids
    tt = tmp_path / "o.tiktoken"
    r = invoke("export", "-t", gz, "--format", "tiktoken", "-o", tt)
    assert r.exit_code == 0, r.output
    from harness import export as ex
    tok = loaded("o200k_base")
    enc = ex.load_tiktoken(tt, tok)
    text = jsonl[1][0]
    assert enc.encode_ordinary(text) == tok.encode(text).tolist()
    assert Tokenizer.from_tiktoken(tt).merges_hash == tok.merges_hash   # known by hash


def test_tokenizer_json_trained_with_bpetrainer(tmp_path, jsonl):
    """A ByteLevel tokenizer.json trained here with HF's BpeTrainer: -t takes it, ids ==
    tokenizers', saved as tokenizer.bin v2 and exported back to tokenizer.json."""
    tk = pytest.importorskip("tokenizers")
    src, docs = jsonl
    hf = tk.Tokenizer(tk.models.BPE())
    hf.pre_tokenizer = tk.pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    hf.decoder = tk.decoders.ByteLevel()
    trainer = tk.trainers.BpeTrainer(vocab_size=600, show_progress=False,
                                     special_tokens=["<|endoftext|>"],
                                     initial_alphabet=tk.pre_tokenizers.ByteLevel.alphabet())
    hf.train_from_iterator(docs, trainer)
    path = tmp_path / "tokenizer.json"
    hf.save(str(path))
    hf.encode_special_tokens = True         # special text is ordinary text, as asmbpe
    tok = Tokenizer.from_hf(path)
    assert tok.dtype == np.uint16 and tok.merges is not None and tok.pretokenizer == "gpt2"
    assert tok.special_id("<|endoftext|>") == 0
    for d in docs[::4]:
        assert tok.encode(d).tolist() == hf.encode(d).ids
    out = tmp_path / "h.tok"
    r = invoke("encode", src, "-t", path, "-o", out, "--doc-token", "<|endoftext|>", "-q")
    assert r.exit_code == 0, r.output
    tf = read_tok(out, tok)
    assert (tf.version, tf.width) == (2, 2)
    for d, ids in zip(docs, tf.documents()):
        assert ids.tolist() == [0] + hf.encode(d).ids
    # tokenizer.bin v2 and back out to tokenizer.json
    binp = tmp_path / "h.bin"
    tok.save(binp)
    assert invoke("decode", out, "-t", binp, "-q").stdout == "".join(
        "<|endoftext|>" + d for d in docs)
    again = tmp_path / "again.json"
    assert invoke("export", "-t", binp, "--format", "hf", "-o", again).exit_code == 0
    back = Tokenizer.from_hf(again)
    assert back.merges_hash == tok.merges_hash
    from harness.export import load_hf
    hf2 = load_hf(again)
    for d in docs[::5]:
        assert hf2.encode(d, add_special_tokens=False).ids == hf.encode(d).ids
    # its specials sit among the ordinary ids: no exact tiktoken export
    one_line_error(invoke("export", "-t", binp, "--format", "tiktoken", "-o",
                          tmp_path / "h.tiktoken"), "sits among the ordinary tokens")


def test_own_tokenizers_unchanged(tmp_path, jsonl):
    """asmbpe's own tokenizer: .tok version 1, <|bos|> at each start, as before; a
    --doc-token other than that writes version 2."""
    from harness.dev import twin
    r = twin.train("the quick brown fox jumps over the lazy dog " * 20, 256 + 40 + 16)
    tok = Tokenizer(r.merges)
    assert not tok.is_loaded and tok.dtype == np.uint16
    bin_path = tmp_path / "own.bin"
    tok.save(bin_path)
    assert bin_path.read_bytes()[8:10] == b"\x01\x00"
    out = tmp_path / "own.tok"
    assert invoke("encode", jsonl[0], "-t", bin_path, "-o", out, "-q").exit_code == 0
    tf = read_tok(out, tok)
    assert tf.version == 1 and tf.tokens[0] == tok.bos_id
    out2 = tmp_path / "own2.tok"
    assert invoke("encode", jsonl[0], "-t", bin_path, "-o", out2, "-q", "--doc-token",
                  "<|end|>", "--doc-token-at", "end").exit_code == 0
    tf2 = read_tok(out2, tok)
    assert tf2.version == 2 and tf2.width == 2
    docs = list(tf2.documents())
    assert len(docs) == len(jsonl[1]) and all(d[-1] == tok.special_id("<|end|>") for d in docs)
    assert tok.encode("a <|bos|>", allowed_special="all")[-1] == tok.bos_id
