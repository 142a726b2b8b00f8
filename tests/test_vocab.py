"""harness.vocab (existing vocabularies, SPEC §11) and harness.dev.rank_twin (the naive
twin of rank / merge-priority encoding), held to their owners:

- tiktoken's cl100k_base and o200k_base, built offline from shared/vocabs: the twin's ids
  equal `encode_ordinary` on samples of the shared corpora and on adversarial texts, and
  `encode(allowed_special=...)` with specials in the text; decode round-trips.
- Hugging Face tokenizers: small byte-level BPE tokenizers trained here (ByteLevel GPT-2
  style, and Split on o200k's or nanochat's pattern + ByteLevel), with ignore_merges off
  and on. (cl100k's pattern is refused in a tokenizer.json: tokenizers' Oniguruma reads
  its \\p{N}{1,3}+ otherwise.)
- Every refusal of a tiktoken ranks file (with its offset) and of a tokenizer.json.
- pair_table against a brute force.

The tests that need shared/ (vocabs, corpora) skip with the reason when it is absent.
"""
from __future__ import annotations

import base64
import gzip
import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from harness.corpora import ROOT
from harness.dev import rank_twin
from harness.errors import AsmbpeError
from harness.pretokenizers import EXACT_PATTERNS
from harness.vocab import (
    KNOWN_ENCODINGS, Vocab, VocabError, VocabFileError, byte_ids, bytes_to_unicode, from_hf,
    from_tiktoken, pair_table, read_tiktoken,
)

VOCABS_DIR = ROOT.parent / "shared" / "vocabs"
ENCODINGS = {"cl100k_base": "cl100k", "o200k_base": "o200k"}
SAMPLE_BYTES = 50_000

ADVERSARIAL = [
    "a" * 2000,
    "7" * 2000,
    " " * 2000,
    " " * 2000 + "x",
    "\n" * 1000 + " \n" * 500,
    "😀" * 2000,
    "é" * 2000,
    "ж" * 2000,
    "Pneumonoultramicroscopicsilicovolcanoconiosis" * 40,
    "supercalifragilisticexpialidocious" * 20 + " " + "ThisIsACamelCaseIdentifier" * 40,
    "antidisestablishmentarianism floccinaucinihilipilification " * 30,
    "ab" * 1000 + " " + "xyz" * 600,
    "Ünïcödé wörds ànd ŝtrangé lettèrs " * 50 + "日本語のテキスト" * 100,
    "don't I'LL we've they'RE it'S 's 'ſ " * 40,
    "\t\t  \r\n\r\n  x = [1, 2, 3]  # comment\n" * 50,
]


# ------------------------------------------------------------------------------ fixtures

@pytest.fixture(scope="module")
def vocabs_dir() -> Path:
    if not (VOCABS_DIR / "cl100k_base.tiktoken.gz").is_file():
        pytest.skip(f"published vocabularies not found: {VOCABS_DIR} (shared/ next to the repo)")
    return VOCABS_DIR


@pytest.fixture(scope="module")
def plain_files(vocabs_dir, tmp_path_factory) -> dict[str, Path]:
    """The gunzipped rank files, name -> path."""
    out = tmp_path_factory.mktemp("vocabs")
    paths = {}
    for name in ENCODINGS:
        paths[name] = out / f"{name}.tiktoken"
        paths[name].write_bytes(gzip.decompress((vocabs_dir / f"{name}.tiktoken.gz").read_bytes()))
    return paths


@pytest.fixture(scope="module")
def encodings(plain_files):
    """name -> (Vocab loaded from the .gz, tiktoken.Encoding built offline)."""
    tiktoken = pytest.importorskip("tiktoken")
    from tiktoken.load import load_tiktoken_bpe

    out = {}
    for name, pretok in ENCODINGS.items():
        v = from_tiktoken(VOCABS_DIR / f"{name}.tiktoken.gz")
        enc = tiktoken.Encoding(name, pat_str=EXACT_PATTERNS[pretok],
                                mergeable_ranks=load_tiktoken_bpe(str(plain_files[name])),
                                special_tokens=KNOWN_ENCODINGS[name].specials)
        out[name] = (v, enc)
    return out


def _sample(path: Path, n_bytes: int, per_doc: int = 8_000) -> str:
    """About n_bytes of valid UTF-8 text from the first documents of a Parquet corpus:
    up to per_doc bytes of each, joined by blank lines."""
    import pyarrow.parquet as pq

    parts, size = [], 0
    for batch in pq.ParquetFile(path).iter_batches(batch_size=64, columns=["text"]):
        for doc in batch.column("text").to_pylist():
            try:
                raw = doc.encode("utf-8")
            except UnicodeEncodeError:       # lone surrogates: not valid UTF-8
                continue
            part = raw[:per_doc].decode("utf-8", "ignore")
            parts.append(part)
            size += len(part.encode("utf-8"))
            if size >= n_bytes:
                return "\n\n".join(parts)
    return "\n\n".join(parts)


@pytest.fixture(scope="module")
def samples(corpus_files) -> dict[str, str]:
    """corpus name -> about 50 KB of its text."""
    by_name = {p.stem: p for p in corpus_files}
    return {name: _sample(by_name[name], SAMPLE_BYTES)
            for name in ("english", "multilingual", "code") if name in by_name}


# ------------------------------------------------------------------- tiktoken: loading

@pytest.mark.parametrize("name", ENCODINGS)
def test_known_encoding_is_recognised_by_its_bytes(name, vocabs_dir, plain_files, tmp_path):
    pytest.importorskip("tiktoken")
    from tiktoken.load import load_tiktoken_bpe

    known = KNOWN_ENCODINGS[name]
    v = from_tiktoken(vocabs_dir / f"{name}.tiktoken.gz")
    assert (v.name, v.pretokenizer, v.specials) == (name, ENCODINGS[name], known.specials)
    assert len(v.tokens) == known.n_tokens and v.merges is None and v.whole_chunk
    ranks = load_tiktoken_bpe(str(plain_files[name]))
    assert v.tokens == sorted(ranks, key=ranks.get)
    # by content, not by name: a plain copy and a gzip copy with meaningless names
    renamed = tmp_path / "vocab.bin.gz"            # plain bytes despite the name
    shutil.copy(plain_files[name], renamed)
    zipped = tmp_path / "ranks.txt"                # gzip despite the name
    shutil.copy(vocabs_dir / f"{name}.tiktoken.gz", zipped)
    for path in (renamed, zipped):
        assert read_tiktoken(path) == v.tokens
        assert from_tiktoken(path) == v
    # explicit arguments win
    other = from_tiktoken(renamed, pretokenizer=5, special_tokens={"<|x|>": known.n_tokens})
    assert (other.pretokenizer, other.specials) == ("gpt2", {"<|x|>": known.n_tokens})


def test_unknown_file_needs_a_pretokenizer(tmp_path):
    path = _ranks_file(tmp_path, [bytes([b]) for b in range(256)] + [b"ab", b"abc"])
    with pytest.raises(VocabError) as e:
        from_tiktoken(path)
    message = str(e.value)
    assert "cl100k_base" in message and "o200k_base" in message and "pretokenizer=" in message
    assert isinstance(e.value, AsmbpeError) and isinstance(e.value, ValueError)
    v = from_tiktoken(path, pretokenizer="nanochat", special_tokens={"<|bos|>": 300})
    assert (v.name, v.pretokenizer, len(v.tokens), v.specials) == (
        path.name, "nanochat", 258, {"<|bos|>": 300})
    with pytest.raises(AsmbpeError, match="unknown pre-tokenizer"):
        from_tiktoken(path, pretokenizer="llama3")
    with pytest.raises(VocabError, match="is the normal token"):
        from_tiktoken(path, pretokenizer="gpt2", special_tokens={"<|bos|>": 257})
    with pytest.raises(VocabError, match="share id 300"):
        from_tiktoken(path, pretokenizer="gpt2", special_tokens={"<|a|>": 300, "<|b|>": 300})


# ------------------------------------------------------------------- tiktoken: encoding

@pytest.mark.parametrize("name", ENCODINGS)
def test_twin_equals_tiktoken_on_corpora(name, encodings, samples):
    v, enc = encodings[name]
    for corpus, text in samples.items():
        ids = rank_twin.encode(text.encode("utf-8"), v)
        assert ids == enc.encode_ordinary(text), f"{name} differs from tiktoken on {corpus}"
        assert rank_twin.decode(ids, v) == text.encode("utf-8")


@pytest.mark.parametrize("name", ENCODINGS)
def test_twin_equals_tiktoken_on_adversarial_texts(name, encodings):
    v, enc = encodings[name]
    for text in ADVERSARIAL:
        ids = rank_twin.encode(text, v)
        assert ids == enc.encode_ordinary(text), f"{name} differs on {text[:30]!r}..."
        assert rank_twin.decode(ids, v) == text.encode("utf-8")


@pytest.mark.parametrize("name", ENCODINGS)
def test_allowed_special_as_tiktoken(name, encodings):
    v, enc = encodings[name]
    texts = [
        "<|endoftext|>",
        "hello<|endoftext|>world <|endofprompt|> bye<|endoftext|><|endoftext|>",
        " <|endoftext|>  \n<|endofprompt|>\n",
        "<|endoftext|x <|endoftext <|endofprompt|>> <<|endoftext|>>",
        "no specials at all",
    ]
    for text in texts:
        for allowed in [set(), {"<|endoftext|>"}, {"<|endofprompt|>"}, "all"]:
            # tiktoken's default disallowed_special="all" raises on special text that is
            # not allowed; asmbpe takes it as ordinary text, as disallowed_special=() does
            want = enc.encode(text, allowed_special=allowed, disallowed_special=())
            assert rank_twin.encode(text, v, allowed_special=allowed) == want, (text, allowed)
    ids = rank_twin.encode(texts[1], v, allowed_special="all")
    assert rank_twin.decode(ids, v) == texts[1].encode()
    with pytest.raises(ValueError, match="not a special token"):
        rank_twin.encode("x", v, allowed_special={"<|bos|>"})
    with pytest.raises(ValueError, match="not a token"):
        rank_twin.decode([len(v.tokens)], v)        # the gap below the specials


# ------------------------------------------------------------------ tiktoken: refusals

def _ranks_file(tmp_path: Path, tokens: list[bytes], name: str = "ranks.tiktoken") -> Path:
    path = tmp_path / name
    path.write_bytes(b"".join(base64.b64encode(t) + b" %d\n" % i for i, t in enumerate(tokens)))
    return path


GOOD_LINES = [base64.b64encode(t) + b" %d" % i for i, t in enumerate([b"a", b"b", b"ab"])]


@pytest.mark.parametrize("bad_line, problem", [
    (b"Y!== 3", "bad base64"),
    (b"Y2Q 3", "bad base64"),                       # padding missing
    (b"Y2Q=3", "malformed line"),                   # no space
    (b"Y2Q=  3", "malformed line"),                 # two spaces
    (b"Y2Q= 3 4", "malformed line"),
    (b"Y2Q= three", "not a decimal number"),
    (b"Y2Q= -3", "not a decimal number"),
    (b"Y2Q= 3\r", "not a decimal number"),
    (b"", "malformed line"),                        # a blank line
    (b" 3", "empty token"),
    (base64.b64encode(b"ab") + b" 3", "duplicate token b'ab': rank 3 repeats rank 2 at offset 14"),
    (b"Y2Q= 1", "duplicate rank 1 (also at offset 7)"),
])
def test_malformed_tiktoken_line_is_refused_at_its_offset(tmp_path, bad_line, problem):
    data = b"\n".join(GOOD_LINES + [bad_line, b"eA== 4"]) + b"\n"
    offset = data.index(b"\n".join(GOOD_LINES)) + len(b"\n".join(GOOD_LINES)) + 1
    for compress in (False, True):
        path = tmp_path / "bad.tiktoken"
        path.write_bytes(gzip.compress(data) if compress else data)
        with pytest.raises(VocabFileError) as e:
            read_tiktoken(path)
        assert (e.value.offset, e.value.path) == (offset, str(path))
        assert problem in e.value.problem
        assert str(e.value).startswith(f"{path}: offset {offset}: ")
        assert isinstance(e.value, AsmbpeError) and isinstance(e.value, ValueError)


@pytest.mark.parametrize("ranks, missing", [([0, 1, 3], 2), ([1, 2, 3], 0), ([0, 1, 9], 2)])
def test_missing_rank_is_refused_at_the_end(tmp_path, ranks, missing):
    data = b"".join(base64.b64encode(t) + b" %d\n" % r for t, r in zip([b"a", b"b", b"c"], ranks))
    path = tmp_path / "gap.tiktoken"
    path.write_bytes(data)
    with pytest.raises(VocabFileError, match=f"rank {missing} is missing") as e:
        read_tiktoken(path)
    assert e.value.offset == len(data)


def test_lines_that_misalign_the_bulk_parse_are_refused(tmp_path):
    """One line without a space and a later one with two: as many spaces as lines, and
    every field a valid rank or base64 if read in pairs across the lines."""
    data = b"YQ== 0\nAAAA\n1111 2222 1\n"
    path = tmp_path / "shifted.tiktoken"
    path.write_bytes(data)
    with pytest.raises(VocabFileError, match="malformed line") as e:
        read_tiktoken(path)
    assert e.value.offset == data.index(b"AAAA")


@pytest.mark.parametrize("seed", range(4))
def test_bulk_and_line_by_line_parses_agree(seed):
    """harness.vocab parses a well-formed file in bulk; line by line gives the same
    tokens (shuffled ranks, with and without the final newline)."""
    import random

    from harness import vocab as vocab_mod
    rng = random.Random(seed)
    tokens = list(dict.fromkeys(rng.randbytes(rng.randint(1, 12)) for _ in range(500)))
    order = list(range(len(tokens)))
    rng.shuffle(order)
    data = b"\n".join(base64.b64encode(tokens[r]) + b" %d" % r for r in order)
    data += b"\n" if seed % 2 else b""
    fast = vocab_mod._parse_tiktoken_fast(data)
    assert fast == tokens == vocab_mod._parse_tiktoken_checked(data, "x")


def test_rank_order_in_the_file_is_free_and_final_newline_optional(tmp_path):
    path = tmp_path / "shuffled.tiktoken"
    path.write_bytes(b"YWI= 2\nYQ== 0\nYg== 1")
    assert read_tiktoken(path) == [b"a", b"b", b"ab"]


# ----------------------------------------------------------------------- tokenizer.json

def _hf_json(tmp_path: Path, name: str = "tokenizer.json", **changes) -> Path:
    """A minimal byte-level BPE tokenizer.json (the 256 byte symbols, "ab", "abc"),
    with top-level or model-level changes ("model__key": value)."""
    vocab = {c: i for i, c in enumerate(bytes_to_unicode().values())}
    vocab.update({"ab": 256, "abc": 257, "<|end|>": 258})
    j = {
        "version": "1.0", "truncation": None, "padding": None,
        "added_tokens": [{"id": 258, "content": "<|end|>", "single_word": False, "lstrip": False,
                          "rstrip": False, "normalized": False, "special": True}],
        "normalizer": None,
        "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True,
                          "use_regex": True},
        "post_processor": None, "decoder": None,
        "model": {"type": "BPE", "dropout": None, "unk_token": None,
                  "continuing_subword_prefix": None, "end_of_word_suffix": None,
                  "fuse_unk": False, "byte_fallback": False, "ignore_merges": False,
                  "vocab": vocab, "merges": [["a", "b"], ["ab", "c"]]},
    }
    for key, value in changes.items():
        if key.startswith("model__"):
            j["model"][key[len("model__"):]] = value
        else:
            j[key] = value
    path = tmp_path / name
    path.write_text(json.dumps(j), encoding="utf-8")
    return path


def _split_bytelevel(pattern: str, behavior: str = "Isolated", use_regex: bool = False) -> dict:
    return {"type": "Sequence", "pretokenizers": [
        {"type": "Split", "pattern": {"Regex": pattern}, "behavior": behavior, "invert": False},
        {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True,
         "use_regex": use_regex}]}


def test_from_hf_minimal(tmp_path):
    v = from_hf(_hf_json(tmp_path))
    assert (v.name, v.pretokenizer, v.specials, v.whole_chunk) == (
        "tokenizer.json", "gpt2", {"<|end|>": 258}, False)
    assert v.tokens[256:] == [b"ab", b"abc", b"<|end|>"] and v.merges == [(64, 65), (256, 66)]
    assert from_hf(_hf_json(tmp_path, model__merges=["a b", "ab c"])) == v   # older format
    assert byte_ids(v).tolist() == [v.tokens.index(bytes([b])) for b in range(256)]
    left, right, priority, result = pair_table(v)
    assert list(zip(left, right, priority, result)) == [(64, 65, 0, 256), (256, 66, 1, 257)]
    for pattern, name in [(EXACT_PATTERNS["o200k"], "o200k"), (EXACT_PATTERNS["gpt2"], "gpt2")]:
        assert from_hf(_hf_json(tmp_path, pre_tokenizer=_split_bytelevel(pattern))).pretokenizer \
            == name


def _set_added(**flags):
    added = {"id": 258, "content": "<|end|>", "single_word": False, "lstrip": False,
             "rstrip": False, "normalized": False, "special": True}
    added.update(flags)
    return [added]


def _without_byte(b: int) -> dict:
    alphabet = bytes_to_unicode()
    vocab = {c: i for i, c in enumerate(alphabet.values()) if c != alphabet[b]}
    vocab = {c: i for i, c in enumerate(vocab)}
    vocab.update({"ab": 255, "abc": 256, "<|end|>": 257})
    return vocab


def _with_entry(s: str) -> dict:
    """The minimal vocab with one more entry, s (its id after the others)."""
    vocab = {c: i for i, c in enumerate(bytes_to_unicode().values())}
    vocab.update({"ab": 256, "abc": 257, "<|end|>": 258, s: 259})
    return vocab


@pytest.mark.parametrize("changes, problem", [
    ({"normalizer": {"type": "NFC"}}, "normalizer NFC is not supported (asmbpe needs none)"),
    ({"model__type": "WordPiece"}, "model 'WordPiece' is not supported"),
    ({"model__type": "Unigram"}, "model 'Unigram' is not supported"),
    ({"model__dropout": 0.1}, "dropout 0.1 is not supported"),
    ({"model__byte_fallback": True}, "byte_fallback is not supported"),
    ({"model__continuing_subword_prefix": "##"}, "continuing_subword_prefix '##'"),
    ({"model__end_of_word_suffix": "</w>"}, "end_of_word_suffix '</w>'"),
    ({"pre_tokenizer": {"type": "Whitespace"}}, "pre_tokenizer Whitespace is not supported"),
    ({"pre_tokenizer": None}, "pre_tokenizer None is not supported"),
    ({"pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": True, "use_regex": True}},
     "add_prefix_space=true is not supported"),
    ({"pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": False, "use_regex": False}},
     "use_regex=false is not supported"),
    ({"pre_tokenizer": _split_bytelevel(r"\s+|\S+")}, "is not one of asmbpe's pre-tokenizers"),
    ({"pre_tokenizer": _split_bytelevel(EXACT_PATTERNS["o200k"], behavior="Removed")},
     "Split behavior 'Removed'"),
    ({"pre_tokenizer": _split_bytelevel(EXACT_PATTERNS["o200k"], use_regex=True)},
     "use_regex=true is not supported"),
    ({"pre_tokenizer": {"type": "Sequence", "pretokenizers": [{"type": "ByteLevel"}]}},
     "Sequence of ['ByteLevel'] is not supported"),
    ({"truncation": {"max_length": 10}}, "truncation is not supported"),
    ({"added_tokens": _set_added(special=False)}, "is not special"),
    ({"added_tokens": _set_added(lstrip=True)}, "lstrip=true"),
    ({"added_tokens": _set_added(id=257)}, "which the vocab gives to 'abc'"),
    ({"model__vocab": {"a": 0, "b": 2}}, "vocab id 2 of 'b' is outside 0..1"),
    ({"model__vocab": _without_byte(0x41)}, "(first: byte 0x41); asmbpe needs all 256"),
    ({"model__merges": [["a", "b"], ["b", "c"]]}, "makes 'bc', which is not in the vocab"),
    ({"model__merges": [["a", "q!"]]}, "names a token that is not in the vocab"),
    ({"model__merges": ["a b c"]}, "is not 'left right'"),
    ({"model__merges": [{"a": 1, "b": 2}]}, "is not 'left right'"),
    ({"model__vocab": _with_entry("a c")}, "has the character ' ', which is not in the byte"),
    ({"model__vocab": _with_entry("a\u4e2d")}, "has the character '\u4e2d', which is not"),
])
def test_unsupported_tokenizer_json_is_refused(tmp_path, changes, problem):
    path = _hf_json(tmp_path, **changes)
    with pytest.raises(VocabError) as e:
        from_hf(path)
    assert problem in str(e.value)
    assert str(e.value).startswith(f"{path}: ")


def test_cl100k_pattern_in_tokenizer_json_is_refused(tmp_path):
    """tokenizers (Oniguruma) reads cl100k's \\p{N}{1,3}+ as (?:\\p{N}{1,3})+: a digit
    run stays one chunk, so such a tokenizer.json does not cut as cl100k does."""
    tokenizers = pytest.importorskip("tokenizers")
    split = tokenizers.pre_tokenizers.Split(tokenizers.Regex(EXACT_PATTERNS["cl100k"]),
                                            behavior="isolated")
    assert [c for c, _ in split.pre_tokenize_str("x 12345")] == ["x", " ", "12345"]
    path = _hf_json(tmp_path, pre_tokenizer=_split_bytelevel(EXACT_PATTERNS["cl100k"]))
    with pytest.raises(VocabError, match=r"Split pattern cl100k is not supported .*Oniguruma"):
        from_hf(path)


def test_not_a_tokenizer_json(tmp_path):
    path = tmp_path / "tokenizer.json"
    path.write_text("{not json")
    with pytest.raises(VocabError, match="not valid JSON"):
        from_hf(path)
    vocab = {c: i for i, c in enumerate(bytes_to_unicode().values())}
    vocab["ĠþĀ"] = 256
    vocab["日本"] = 257
    with pytest.raises(VocabError, match="not in the byte-level alphabet"):
        from_hf(_hf_json(tmp_path, model__vocab=vocab, model__merges=[], added_tokens=[]))


def test_repeated_merge_keeps_its_last_priority_as_tokenizers_does(tmp_path):
    tokenizers = pytest.importorskip("tokenizers")
    vocab = {c: i for i, c in enumerate(bytes_to_unicode().values())}
    vocab.update({"ab": 256, "bc": 257})
    for merges in ([["a", "b"], ["b", "c"], ["a", "b"]], [["b", "c"], ["a", "b"], ["b", "c"]]):
        path = _hf_json(tmp_path, model__vocab=vocab, model__merges=merges, added_tokens=[])
        v = from_hf(path)
        hf = tokenizers.Tokenizer.from_file(str(path))
        for text in ("abc", "abcabc ab bc"):
            assert rank_twin.encode(text, v) == hf.encode(text, add_special_tokens=False).ids
        assert len(pair_table(v)[0]) == 2


# -------------------------------------------------- tokenizer.json: tokenizers as oracle

@pytest.fixture(scope="module")
def hf_training_text(corpus_files) -> list[str]:
    """About 200 KB of english + multilingual, in pieces of 2 KB."""
    by_name = {p.stem: p for p in corpus_files}
    text = "".join(_sample(by_name[name], 100_000, per_doc=4_000)
                   for name in ("english", "multilingual") if name in by_name)
    return [text[k:k + 2000] for k in range(0, len(text), 2000)]


def _gpt2_style(pre_tokenizers, Regex):
    return pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)


def _split_style(name):
    def style(pre_tokenizers, Regex):
        return pre_tokenizers.Sequence([
            pre_tokenizers.Split(Regex(EXACT_PATTERNS[name]), "isolated"),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    return style


# cl100k's pattern is not among them: tokenizers reads it otherwise and from_hf refuses it
# (test_cl100k_pattern_in_tokenizer_json_is_refused)
HF_STYLES = {"gpt2": _gpt2_style, "o200k": _split_style("o200k"),
             "nanochat": _split_style("nanochat")}


@pytest.fixture(scope="module")
def hf_trained(hf_training_text) -> dict[str, str]:
    """style -> tokenizer.json text of a BPE tokenizer trained here (vocab 600)."""
    tokenizers = pytest.importorskip("tokenizers")
    from tokenizers import decoders, models, pre_tokenizers, trainers

    out = {}
    for style, make_pre in HF_STYLES.items():
        tok = tokenizers.Tokenizer(models.BPE())
        tok.pre_tokenizer = make_pre(pre_tokenizers, tokenizers.Regex)
        tok.decoder = decoders.ByteLevel()
        trainer = trainers.BpeTrainer(vocab_size=600, show_progress=False,
                                      initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                      special_tokens=["<|endoftext|>"])
        tok.train_from_iterator(hf_training_text, trainer)
        out[style] = tok.to_str()
    return out


@pytest.mark.parametrize("gappy", [False, True], ids=["merges", "gappy"])
@pytest.mark.parametrize("ignore_merges", [False, True])
@pytest.mark.parametrize("style", HF_STYLES)
def test_twin_equals_tokenizers(style, ignore_merges, gappy, hf_trained, samples, tmp_path):
    """gappy: every 5th merge is dropped from the file (its token stays in the vocab), so
    that some tokens are reached only as whole chunks and ignore_merges matters; in a
    trained file every token is also reached by its merges."""
    import tokenizers

    j = json.loads(hf_trained[style])
    j["model"]["ignore_merges"] = ignore_merges
    if gappy:
        j["model"]["merges"] = [m for k, m in enumerate(j["model"]["merges"]) if k % 5 != 4]
    path = tmp_path / "tokenizer.json"
    path.write_text(json.dumps(j), encoding="utf-8")
    hf = tokenizers.Tokenizer.from_file(str(path))
    v = from_hf(path)
    assert (v.pretokenizer, v.whole_chunk, v.specials) == (style, ignore_merges,
                                                           {"<|endoftext|>": 0})
    assert len(v.tokens) == 600 and len(v.merges) == len(j["model"]["merges"])
    texts = [text[:20_000] for text in samples.values()] + ADVERSARIAL[:9]
    whole = 0          # chunks that whole_chunk encodes differently
    other = Vocab(v.name, v.tokens, v.pretokenizer, v.specials, v.merges, not v.whole_chunk)
    for text in texts:
        ids = rank_twin.encode(text, v)
        assert ids == hf.encode(text, add_special_tokens=False).ids, (style, text[:40])
        assert rank_twin.decode(ids, v) == text.encode("utf-8")
        whole += ids != rank_twin.encode(text, other)
    assert (whole > 0) == gappy, whole      # the gappy files do test whole_chunk
    # tokenizers always cuts special text out of the input: allowed_special="all"
    text = "one<|endoftext|>two <|endoftext|> three<|endoftext|"
    assert rank_twin.encode(text, v, allowed_special="all") == hf.encode(text).ids


# ----------------------------------------------------------------------------- pair_table

def test_pair_table_of_cl100k(encodings):
    v, _ = encodings["cl100k_base"]
    left, right, priority, result = pair_table(v)
    assert all(a.dtype == np.uint32 for a in (left, right, priority, result))
    assert (priority == result).all()
    key = left.astype(np.uint64) << np.uint64(32) | right
    assert (np.diff(key.astype(np.int64)) > 0).all()        # sorted, each pair once
    for a, b, r in zip(left.tolist(), right.tolist(), result.tolist()):
        assert v.tokens[a] + v.tokens[b] == v.tokens[r]
    # brute force on the first 2,000 tokens: every (a, b) whose concatenation is a token
    small = Vocab("prefix", v.tokens[:2000], "cl100k", {}, None, True)
    index = {t: i for i, t in enumerate(small.tokens)}
    brute = {(a, b): index[ta + tb] for a, ta in enumerate(small.tokens)
             for b, tb in enumerate(small.tokens) if ta + tb in index}
    got = pair_table(small)
    assert len(got[0]) == len(brute)
    assert {(a, b): r for a, b, _, r in zip(*(x.tolist() for x in got))} == brute


@pytest.mark.parametrize("name", ENCODINGS)
def test_library_pair_table_equals_the_twin(name, encodings):
    """harness.rank.rank_pairs (asmbpe_rank_pairs, what RankEncoder loads a rank file
    with) gives pair_table's rows, in token order."""
    from harness.rank import rank_pairs
    v, _ = encodings[name]
    offsets = np.zeros(len(v.tokens) + 1, dtype=np.uint64)
    np.cumsum([len(t) for t in v.tokens], out=offsets[1:])
    rows = rank_pairs(b"".join(v.tokens), offsets)
    assert (np.diff(rows[:, 2].astype(np.int64)) >= 0).all()      # token order
    rows = rows[np.lexsort((rows[:, 1], rows[:, 0]))]
    assert np.array_equal(rows, np.stack(pair_table(v), axis=1))


@pytest.mark.parametrize("name", ENCODINGS)
def test_every_token_merges_to_itself(name, encodings):
    """In cl100k_base and o200k_base, every token is also what rank merging makes of its
    bytes: tiktoken's whole-chunk lookup changes no result there."""
    v, _ = encodings[name]
    merges_only = Vocab(v.name, v.tokens, v.pretokenizer, v.specials, None, False)
    tables = rank_twin.tables(v)
    for i, token in enumerate(v.tokens):
        assert rank_twin.encode_chunk(token, merges_only, tables) == [i], token


def test_byte_ids_of_o200k_and_a_missing_byte(encodings):
    v, enc = encodings["o200k_base"]
    assert byte_ids(v).tolist() == [enc.encode_single_token(bytes([b])) for b in range(256)]
    with pytest.raises(VocabError, match="byte 0x00 is not a token"):
        byte_ids(Vocab("x", [b"a", b"b"], "gpt2", {}, None, True))
