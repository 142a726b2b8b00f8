"""The pre-tokenizers' plumbing (SPEC §3, §7, §9, §10): the registry (harness.pretokenizers),
the id reaching the library from every path (split, training, every encode), stored in
tokenizer.bin and read back, the command line's --pretokenizer and the views that name it,
the exports carrying the pattern string, and the twin's routing.

Until the exact scanners land (asm/pretok_exact.asm) the library runs the seed for ids
2-5, so nothing here compares nanochat, cl100k, o200k or gpt2 chunks with their oracles
(tests/test_pretok_twin.py and the library's own tests do): what is checked is which id
travels where. Ids are watched on their way into the library by wrapping `lib()`.
"""
from __future__ import annotations

import importlib
import json
import re
import struct
from collections import Counter

import numpy as np
import pytest

from cli_util import invoke

import harness
from harness import pretokenizers as P
from harness._lib import lib
from harness.dev import pretok_twin, twin
from harness.errors import AsmbpeError
from harness.pattern import ORACLE_PATTERN_LITERAL
from harness.tokenizer import Tokenizer

NAMES = ("seed", "nanochat", "cl100k", "o200k", "gpt2")
TEXT = "Hello world, don't 123456 naïve café — 日本語 😀\n\n  x"
MERGES = np.array([[104, 101], [108, 108], [256, 257], [32, 119]], dtype=np.uint16)

# tokenizer.bin of Tokenizer(MERGES) as the code before pre-tokenizer ids wrote it
# (commit 4017bc6: header offset 10 always 1)
OLD_FILE = bytes.fromhex("41534d425045544b01000100140100000400000010000000aaedd18f548693b2"
                         "680065006c006c000001010120007700")


class Watch:
    """The real library, recording the pre-tokenizer id of each call that takes one."""

    def __init__(self):
        self.real = lib()
        self.ids: list[tuple[str, int]] = []

    def __getattr__(self, name):
        fn = getattr(self.real, name)
        if name in ("asmbpe_split_offsets", "asmbpe_count_words"):
            def call(*args):
                self.ids.append((name, int(args[-1])))
                return fn(*args)
            return call
        if name in ("asmbpe_encode", "asmbpe_encode_docs"):
            def call(*args):
                self.ids.append((name, int(args[5]) >> int(self.real.ASMBPE_ENC_PRETOK_SHIFT)
                                 & 0xFF))
                return fn(*args)
            return call
        return fn


@pytest.fixture
def watch(monkeypatch):
    w = Watch()
    for name in ("pretok", "train", "encoder"):     # (harness.train is the function)
        mod = importlib.import_module(f"harness.{name}")
        monkeypatch.setattr(mod, "lib", lambda: w)
    return w


# ------------------------------------------------------------------------- the registry

def test_registry_names_ids_and_patterns():
    assert P.NAMES == NAMES
    assert [p.id for p in P.PRETOKENIZERS] == [1, 2, 3, 4, 5]
    assert P.DEFAULT == "nanochat"
    assert P.resolve("seed").pattern is ORACLE_PATTERN_LITERAL
    for name in NAMES[1:]:
        assert P.resolve(name).pattern is P.EXACT_PATTERNS[name]
    # the exact strings of SPEC §10 (test_pretok_twin.py holds cl100k and o200k to
    # tiktoken's own pat_str)
    assert P.EXACT_PATTERNS["nanochat"] == (
        r"""'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}+|\p{N}{1,2}| ?[^\s\p{L}\p{N}]++"""
        r"""[\r\n]*|\s*[\r\n]|\s+(?!\S)|\s+""")
    assert str(P.resolve("o200k")) == "o200k (id 4)"


def test_registry_ids_are_the_librarys():
    L = lib()
    for name in NAMES:
        assert P.resolve(name).id == getattr(L, f"ASMBPE_PRETOK_{name.upper()}")


def test_pretok_twin_names_come_from_the_registry():
    assert pretok_twin.PATTERNS is P.EXACT_PATTERNS
    assert pretok_twin.PATTERN_IDS == {p.name: p.id for p in P.PRETOKENIZERS}
    assert pretok_twin.GPT2_TIKTOKEN_PATTERN is P.GPT2_TIKTOKEN_PATTERN


def test_resolve_names_ids_and_entries():
    for p in P.PRETOKENIZERS:
        assert P.resolve(p.name) is p
        assert P.resolve(p.id) is p
        assert P.resolve(np.uint16(p.id)) is p
        assert P.resolve(p) is p


@pytest.mark.parametrize("bad", ["foo", "Nanochat", "", 0, 6, -1, True, None, 2.0, b"seed"])
def test_resolve_refuses_the_unknown_listing_the_names(bad):
    with pytest.raises(P.PretokenizerError) as info:
        P.resolve(bad)
    e = info.value
    assert isinstance(e, AsmbpeError) and isinstance(e, ValueError)
    assert repr(bad) in str(e)
    for p in P.PRETOKENIZERS:
        assert f"{p.name} (id {p.id})" in str(e)


# ---------------------------------------------------------------------------- split

def test_split_default_is_nanochat(watch):
    data = TEXT.encode()
    assert harness.split(data) == harness.split(data, pretokenizer="nanochat")
    assert harness.split_offsets(data).tolist() == harness.split_offsets(data, 2).tolist()
    assert [i for _, i in watch.ids] == [2, 2, 2, 2]


def test_split_passes_each_id(watch):
    for p in P.PRETOKENIZERS:
        watch.ids.clear()
        chunks = harness.split(TEXT, pretokenizer=p.name)
        assert b"".join(chunks) == TEXT.encode()
        harness.split_offsets(TEXT, p.id)
        assert watch.ids == [("asmbpe_split_offsets", p.id)] * 2


def test_split_refuses_an_unknown_pretokenizer(watch):
    for bad in ("bpe", 9):
        with pytest.raises(P.PretokenizerError, match="nanochat"):
            harness.split(b"abc", pretokenizer=bad)
        with pytest.raises(P.PretokenizerError):
            harness.split_offsets(b"abc", bad)
    assert watch.ids == []


# -------------------------------------------------------------------------- training

@pytest.mark.parametrize("name", NAMES)
def test_train_records_the_pretokenizer(watch, name):
    r = harness.train([TEXT] * 20, 300, pretokenizer=name)
    assert r.tokenizer.pretokenizer == name and r.stats["pretokenizer"] == name
    assert {i for f, i in watch.ids if f == "asmbpe_count_words"} == {P.resolve(name).id}
    watch.ids.clear()
    r.tokenizer.encode(TEXT)
    assert watch.ids == [("asmbpe_encode_docs", P.resolve(name).id)]


def test_train_default_is_nanochat(watch):
    r = harness.train([TEXT] * 20, 300)
    assert r.tokenizer.pretokenizer == "nanochat"
    assert watch.ids == [("asmbpe_count_words", 2)]
    assert harness.train([TEXT] * 20, 300, pretokenizer=2).tokenizer == r.tokenizer


def test_train_refuses_an_unknown_pretokenizer_before_reading(tmp_path):
    with pytest.raises(P.PretokenizerError, match="'o100k'"):
        harness.train(tmp_path / "does-not-exist.txt", 300, pretokenizer="o100k")


def test_word_tables_count_with_their_pretokenizer(watch):
    from harness.train import WordTable, train_words

    t = WordTable("gpt2")
    t.count([TEXT.encode()] * 5, threads=1)
    assert t.pretokenizer == "gpt2" and watch.ids == [("asmbpe_count_words", 5)]
    assert train_words(t, 300).tokenizer.pretokenizer == "gpt2"
    assert WordTable().pretokenizer == "nanochat"


# ------------------------------------------------------------------------ tokenizer.bin

@pytest.mark.parametrize("p", P.PRETOKENIZERS, ids=NAMES)
def test_file_round_trip_keeps_the_pretokenizer(tmp_path, p):
    t = Tokenizer(MERGES, pretokenizer=p.name)
    assert t.pretokenizer == p.name and f"pretokenizer={p.name!r}" in repr(t)
    data = t.to_bytes()
    assert struct.unpack_from("<H", data, 10) == (p.id,)
    assert data[:10] + b"\x01\x00" + data[12:] == OLD_FILE       # nothing else differs
    t.save(tmp_path / "t.bin")
    back = Tokenizer.load(tmp_path / "t.bin")
    assert back.pretokenizer == p.name and back == t
    assert Tokenizer.from_bytes(data) == t
    assert Tokenizer(MERGES, pretokenizer=p.id) == t


def test_tokenizers_differ_by_pretokenizer():
    assert Tokenizer(MERGES) == Tokenizer(MERGES, pretokenizer="nanochat")
    assert Tokenizer(MERGES, pretokenizer="seed") != Tokenizer(MERGES, pretokenizer="gpt2")
    with pytest.raises(P.PretokenizerError):
        Tokenizer(MERGES, pretokenizer="nope")
    with pytest.raises(AttributeError):
        Tokenizer(MERGES).pretokenizer = "seed"               # read-only


def test_a_file_of_the_old_code_loads_as_seed_and_encodes_with_it(tmp_path, watch):
    path = tmp_path / "old.bin"
    path.write_bytes(OLD_FILE)
    tok = Tokenizer.load(path)
    assert tok.pretokenizer == "seed" and tok.n_merges == 4
    assert tok.encode(b"hello world").tolist() == [258, 111, 259, 111, 114, 108, 100]
    assert tok.to_bytes() == OLD_FILE
    assert watch.ids == [("asmbpe_encode_docs", 1)]


def test_every_encode_path_passes_the_tokenizers_id(tmp_path, watch):
    from harness.pipeline import encode_to_tok

    for p in P.PRETOKENIZERS:
        tok = Tokenizer(MERGES, pretokenizer=p.name)
        watch.ids.clear()
        tok.encode(TEXT)
        tok.encode_document(TEXT)
        tok.encode_batch([TEXT, "x"], threads=2)
        tok.encode_many([b"a", b"b"] * 200, threads=2, cache=False)
        tok.render_chat([{"role": "user", "content": "hi"}])
        src = tmp_path / "in.txt"
        src.write_text(TEXT)
        encode_to_tok(tok, [src], tmp_path / f"{p.name}.tok")
        ids = [i for f, i in watch.ids if f.startswith("asmbpe_encode")]
        assert len(ids) >= 6 and set(ids) == {p.id}, (p, watch.ids)


# ----------------------------------------------------------------------------- exports

@pytest.mark.parametrize("p", P.PRETOKENIZERS, ids=NAMES)
def test_exports_carry_the_pattern_string(tmp_path, p):
    pytest.importorskip("tokenizers")
    pytest.importorskip("tiktoken")
    from harness import export

    tok = Tokenizer(MERGES, pretokenizer=p.name)
    export.export_tiktoken(tok, tmp_path / "ranks.tiktoken")
    sidecar = json.loads((tmp_path / "ranks.tiktoken.json").read_text())
    assert sidecar["pat_str"] == p.pattern
    enc = export.load_tiktoken(tmp_path / "ranks.tiktoken", tok)     # tiktoken compiles it
    assert enc.decode(enc.encode_ordinary(TEXT)) == TEXT
    export.export_hf(tok, tmp_path / "tokenizer.json")
    doc = json.loads((tmp_path / "tokenizer.json").read_text())
    split, level = doc["pre_tokenizer"]["pretokenizers"]
    assert split["type"] == "Split" and split["pattern"] == {"Regex": p.pattern}
    assert level["type"] == "ByteLevel"
    hf = export.load_hf(tmp_path / "tokenizer.json")               # tokenizers compiles it
    assert hf.decode(hf.encode(TEXT, add_special_tokens=False).ids) == TEXT
    # another pre-tokenizer's export of the same merges is not this tokenizer's
    other = Tokenizer(MERGES, pretokenizer="gpt2" if p.name != "gpt2" else "seed")
    with pytest.raises(ValueError, match="pat_str"):
        export.load_tiktoken(tmp_path / "ranks.tiktoken", other)


def test_tokenizers_reads_cl100k_digits_otherwise():
    """A known difference, not asmbpe's: Hugging Face `tokenizers` (Oniguruma, Ruby
    syntax) reads cl100k's `\\p{N}{1,3}+` as a repeated group, `(?:\\p{N}{1,3})+`, not as a
    possessive quantifier: a run of digits stays one chunk. tiktoken and the `regex`
    module cut it every three digits. So a cl100k tokenizer's tokenizer.json export cuts
    numbers longer than three digits differently from asmbpe and tiktoken; the other
    patterns have no such construct."""
    tokenizers = pytest.importorskip("tokenizers")
    regex = pytest.importorskip("regex")
    pattern = P.EXACT_PATTERNS["cl100k"]
    split = tokenizers.pre_tokenizers.Split(tokenizers.Regex(pattern), behavior="isolated")
    assert [c for c, _ in split.pre_tokenize_str("x 1234567")] == ["x", " ", "1234567"]
    assert regex.findall(pattern, "x 1234567") == ["x", " ", "123", "456", "7"]
    counted_then_plus = re.compile(r"\{\d+(,\d*)?\}\+")            # x{n,m}+
    assert counted_then_plus.search(pattern)
    for name in ("nanochat", "o200k", "gpt2"):
        assert not counted_then_plus.search(P.EXACT_PATTERNS[name])


# -------------------------------------------------------------------------------- twin

def test_twin_routes_the_exact_pretokenizers_to_pretok_twin():
    data = TEXT.encode()
    assert twin.split(data) == twin.split(data, "seed") == twin.split(data, 1)
    for name in NAMES[1:]:
        want = pretok_twin.split(data, name)
        assert twin.split(data, pretokenizer=name) == want
        assert twin.split_offsets(data, name) == pretok_twin.split_offsets(data, name)
        assert twin.count_words([data] * 3, pretokenizer=name) == Counter(want * 3)
        r = twin.train([data] * 3, 300, pretokenizer=name)
        assert r.words == Counter(want * 3)
        assert (twin.encode(r.merges, data, pretokenizer=name)
                == twin.encode(r.merges, data, splitter=lambda d: pretok_twin.split(d, name)))
    with pytest.raises(P.PretokenizerError):
        twin.split(data, "bpe")


# ----------------------------------------------------------------------- command line

def test_cli_split(tmp_path):
    f = tmp_path / "a.txt"
    f.write_bytes(TEXT.encode())
    default = invoke("split", f)
    assert default.exit_code == 0, default.output
    assert default.stdout_bytes == b"|".join(harness.split(TEXT, "nanochat")) + b"\n"
    for name in NAMES:
        r = invoke("split", "--pretokenizer", name, f)
        assert r.exit_code == 0, r.output
        assert r.stdout_bytes == b"|".join(harness.split(TEXT, name)) + b"\n"
    r = invoke("split", "--pretokenizer", "o100k", f)
    assert r.exit_code == 2 and "o100k" in r.output and "nanochat" in r.output
    assert "--pretokenizer" in invoke("split", "--help").output


def test_cli_train_show_and_stats(tmp_path):
    src = tmp_path / "in.txt"
    src.write_text(TEXT * 30)
    for args, name in (([], "nanochat"), (["--pretokenizer", "cl100k"], "cl100k")):
        out = tmp_path / f"{name}.bin"
        r = invoke("train", src, "-o", out, "--vocab-size", 300, "-q", *args)
        assert r.exit_code == 0, r.output
        assert f"pre-tokenizer {name})" in r.stdout.splitlines()[0]
        tok = Tokenizer.load(out)
        assert tok.pretokenizer == name
        line = f"pre-tokenizer: {name} (id {P.resolve(name).id})"
        for color in ("--color", "--no-color"):
            s = invoke("show", "-t", out, color, "don't")
            assert s.exit_code == 0, s.output
            assert s.stderr.splitlines()[-1] == line
        st = invoke("stats", src, "-t", out)
        assert st.exit_code == 0, st.output
        assert f"pre-tokenizer    {name} (id {P.resolve(name).id})" in st.stdout.splitlines()
    r = invoke("train", src, "-o", tmp_path / "x.bin", "--pretokenizer", "bpe")
    assert r.exit_code == 2 and "bpe" in r.output and not (tmp_path / "x.bin").exists()


def test_cli_bench_pretok_names_the_pretokenizer(tmp_path):
    pytest.importorskip("regex", reason="the oracle needs the regex module")
    pytest.importorskip("pyarrow", reason="reading the Parquet corpora needs pyarrow")
    from harness.corpora import available, corpora_dir

    if not corpora_dir().is_dir() or not available():
        pytest.skip(f"no corpus in {corpora_dir()} (shared/ next to the repository)")
    name = available()[0]
    for pretok in ("gpt2", None):
        out = tmp_path / "rows.json"
        args = ["--pretokenizer", pretok] if pretok else []
        r = invoke("bench", "pretok", "--corpus", name, "--limit-mb", "0.02",
                   "--twin-mb", "0.005", "--runs", "1", "--json", out, *args)
        assert r.exit_code == 0, r.output
        want = pretok or "nanochat"
        assert f"pre-tokenizer {P.resolve(want)} speed" in r.output
        assert f"{name}, {want}:" in r.output
        rows = json.loads(out.read_text())
        assert [row["pretokenizer"] for row in rows] == [want] * 4     # asm public oracle twin
