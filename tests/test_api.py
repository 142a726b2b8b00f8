"""The public Python API next to tiktoken's (issue 23): tokenizers pickle (and cross
into multiprocessing's spawned workers) after they have encoded; decode_batch,
decode_bytes_batch, n_vocab, token_bytes / decode_single_token_bytes, id_of /
encode_single_token and encode_ordinary agree with tiktoken for cl100k_base (built
offline from ../shared/vocabs) and with the id -> bytes table of a tokenizer asmbpe
trained; the API reference builds with pdoc."""
from __future__ import annotations

import multiprocessing
import pickle
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import harness
from harness.tokenizer import Tokenizer

from loaded_util import loaded, tiktoken_oracle

ROOT = Path(__file__).resolve().parent.parent
KJV = ROOT / "datasets" / "kjv.txt"

DOCS = ["In the beginning God created the heaven and the earth.",
        "  spaces,\ttabs\nand <|endoftext|> <|bos|> specials as text",
        "naïve café 日本語のテキスト 🎉🎉 ∑∫",
        "", "x" * 3000, "1234567890 3.14159 0x1F"]


@pytest.fixture(scope="module")
def own() -> Tokenizer:
    """A tokenizer asmbpe trained (tok100.bin-like, smaller): vocab 2048 on 1 MB of kjv."""
    return harness.train(KJV.read_bytes()[:1 << 20], vocab_size=2048).tokenizer


@pytest.fixture(scope="module")
def cl100k():
    return loaded("cl100k_base")


@pytest.fixture(scope="module")
def enc():
    return tiktoken_oracle("cl100k_base")


def _tokenizer(request, which: str):
    return request.getfixturevalue(which)


# ------------------------------------------------------------------------------ pickling

def test_own_tokenizer_pickles_after_encoding(own):
    before = own.encode(DOCS[1])                     # builds the library's encoder
    own.token_bytes(300), own.id_of("<|bos|>")        # and the lookup tables
    data = pickle.dumps(own)
    assert len(data) < 32 + 4 * own.n_merges + 512   # its tokenizer.bin image, no more
    back = pickle.loads(data)
    assert back == own and back.merges_hash == own.merges_hash
    assert back.pretokenizer == own.pretokenizer
    assert back.encode(DOCS[1]).tolist() == before.tolist()
    assert pickle.loads(pickle.dumps(back)) == own   # again, after its own encode


def test_loaded_tokenizer_pickles_after_encoding(cl100k):
    before = cl100k.encode(DOCS[2])
    data = pickle.dumps(cl100k)
    assert len(data) < len(cl100k.to_bytes())        # less than its tokenizer.bin
    back = pickle.loads(data)
    assert back == cl100k
    assert back.encode(DOCS[2]).tolist() == before.tolist()


@pytest.mark.parametrize("which", ["own", "cl100k"])
def test_spawned_pool_encodes_as_in_process(request, which):
    """datasets.map(num_proc=...) and spawn-based DataLoader workers pickle the
    tokenizer into fresh processes: the ids must be those of the parent."""
    tok = _tokenizer(request, which)
    docs = DOCS * 3
    expected = [tok.encode(d).tolist() for d in docs]      # encoded first: the bug's case
    with multiprocessing.get_context("spawn").Pool(2) as pool:
        got = pool.map(tok.encode, docs, chunksize=2)
    assert [g.tolist() for g in got] == expected


# ------------------------------------------------------------------ tiktoken's calls

def test_n_vocab_is_tiktokens(cl100k, enc, own):
    assert cl100k.n_vocab == enc.n_vocab == 100277        # max id + 1, specials included
    assert own.n_vocab == own.vocab_size == max(own.specials.values()) + 1


def test_token_bytes_equals_tiktoken(cl100k, enc):
    for i in range(cl100k.n_vocab):
        try:
            expected = enc.decode_single_token_bytes(i)
        except KeyError:
            with pytest.raises(KeyError, match=f"id {i} is not a token"):
                cl100k.token_bytes(i)
            continue
        assert cl100k.token_bytes(i) == expected, i
        assert cl100k.decode_single_token_bytes(i) == expected
    for bad in (-1, cl100k.n_vocab, 1 << 40):
        with pytest.raises(KeyError):
            cl100k.token_bytes(bad)


def test_id_of_equals_tiktoken(cl100k, enc):
    for i, token in enumerate(cl100k.vocab.tokens):
        assert cl100k.id_of(token) == enc.encode_single_token(token) == i
    assert cl100k.specials                               # (<|endoftext|> and the fims)
    for name, i in cl100k.specials.items():
        assert cl100k.id_of(name) == cl100k.encode_single_token(name) == i
        assert cl100k.id_of(name.encode()) == enc.encode_single_token(name) == i
    assert cl100k.id_of(" hello") == enc.encode_single_token(" hello")
    for bad in (b"hello world, not a token", b"", "<|bos|>"):
        with pytest.raises(KeyError):
            enc.encode_single_token(bad)
        with pytest.raises(KeyError, match="is not a token of cl100k_base"):
            cl100k.id_of(bad)


def test_encode_ordinary_and_decode_batch_equal_tiktoken(cl100k, enc):
    for d in DOCS:
        assert cl100k.encode_ordinary(d).tolist() == enc.encode_ordinary(d)
    batch = [enc.encode_ordinary(d) for d in DOCS]
    assert [a.tolist() for a in cl100k.encode_ordinary_batch(DOCS)] == batch
    # cut inside characters: bytes that are not UTF-8 on their own
    batch += [ids[:k] for ids in batch for k in (1, 3, 5)]
    batch.append([enc.eot_token, 100258])
    assert cl100k.decode_bytes_batch(batch) == enc.decode_bytes_batch(batch)
    assert cl100k.decode_batch(batch) == enc.decode_batch(batch)
    assert cl100k.decode_batch(batch, errors="ignore") == enc.decode_batch(batch,
                                                                           errors="ignore")
    assert cl100k.decode_batch(iter(batch)) == enc.decode_batch(batch)   # any iterable
    assert cl100k.decode_batch([]) == []


def test_own_tokenizer_against_its_id_to_bytes(own):
    table = own.id_to_bytes()
    assert len(table) == own.n_vocab
    for i, b in enumerate(table):
        assert own.token_bytes(i) == own.decode_single_token_bytes(i) == b
        assert own.id_of(b) == own.encode_single_token(b) == i
    for name, i in own.specials.items():
        assert own.id_of(name) == i
    with pytest.raises(KeyError, match=f"id {own.n_vocab} is not a token of asmbpe"):
        own.token_bytes(own.n_vocab)
    with pytest.raises(KeyError, match="not a token"):
        own.id_of(b"no such token at all, surely")
    with pytest.raises(TypeError):
        own.id_of(300)
    batch = own.encode_batch(DOCS)
    assert own.decode_bytes_batch(batch) == [d.encode() for d in DOCS]
    assert own.decode_batch(batch) == DOCS
    assert own.decode_batch([a[:1] for a in batch if len(a)]) == [
        own.decode(a[:1]) for a in batch if len(a)]
    assert [a.tolist() for a in own.encode_ordinary_batch(DOCS)] == [
        own.encode_ordinary(d).tolist() for d in DOCS]
    with pytest.raises(ValueError, match="sequence 1: id 65535 at position 0"):
        own.decode_batch([[1], np.array([65535])])


# ----------------------------------------------------------------------- API reference

def test_api_reference_builds(tmp_path):
    pytest.importorskip("pdoc", reason="pdoc builds the API reference (pip install pdoc, "
                                       "or the test extra)")
    out = tmp_path / "api"
    run = subprocess.run([sys.executable, str(ROOT / "tools" / "apidoc.py"), "-o", str(out)],
                         cwd=ROOT, capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    page = (out / "harness.html").read_text()
    anchors = set(re.findall(r'id="([\w.]+)"', page))
    for name in ("Tokenizer", "train", "TrainResult", "split", "split_offsets", "read_tok",
                 "TokFile", "AsmbpeError", "TokenizerFileError", "TokFileError",
                 "TrainError", "LibraryError", "InputError"):
        assert name in anchors, name
    for method in ("encode", "encode_batch", "encode_ordinary", "decode", "decode_batch",
                   "decode_bytes_batch", "token_bytes", "decode_single_token_bytes",
                   "id_of", "encode_single_token", "n_vocab", "from_tiktoken", "load"):
        assert f"Tokenizer.{method}" in anchors, method
    assert (out / "harness" / "loaded.html").exists()
    assert not (out / "harness" / "dev.html").exists()
    assert not (out / "harness" / "cli.html").exists()
