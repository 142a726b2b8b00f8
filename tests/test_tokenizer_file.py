"""harness.tokenizer: the tokenizer.bin format of SPEC §7 (round trip, every rejection
on a crafted file, atomic save), the vocabulary layout of SPEC §5, FNV-1a-64."""
from __future__ import annotations

import os
import struct
import time

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from harness import tokenizer as tk
from harness.dev import twin
from harness.tokenizer import (
    MAGIC, N_SPECIAL, SPECIALS, Tokenizer, TokenizerFileError, fnv1a64)


# ------------------------------------------------------------------------------ helpers

def chain_merges(n: int) -> np.ndarray:
    """n valid, distinct merges: (255, 0), (256, 0), (257, 0), ..."""
    left = np.arange(255, 255 + n, dtype=np.uint16)
    return np.stack([left, np.zeros(n, dtype=np.uint16)], axis=1)


def table_bytes(merges) -> bytes:
    """The merge table as SPEC §7 says: one u32 per merge, left | right << 16."""
    return b"".join(struct.pack("<I", int(a) | int(b) << 16) for a, b in merges)


def craft(merges, *, magic=MAGIC, version=1, pretok=1, vocab_size=None, n_merges=None,
          n_special=16, hash_=None, table=None) -> bytes:
    """A tokenizer.bin image written independently of harness.tokenizer, with any header
    field overridden."""
    table = table_bytes(merges) if table is None else table
    n = len(merges) if n_merges is None else n_merges
    vocab = 256 + len(merges) + 16 if vocab_size is None else vocab_size
    h = fnv1a64(table) if hash_ is None else hash_
    return struct.pack("<8sHHIIIQ", magic, version, pretok, vocab, n, n_special, h) + table


@pytest.fixture
def trained() -> Tokenizer:
    text = "the quick brown fox jumps over the lazy dog; the dog sleeps. " * 30
    r = twin.train(text, 272 + 60, pretokenizer="seed")
    return Tokenizer(r.merges, 256 + r.n_merges + 16, pretokenizer="seed")


def rejected(tmp_path, data: bytes, problem: str, offset: int) -> TokenizerFileError:
    """data must be refused, from a file and from bytes, naming problem and offset."""
    path = tmp_path / "tokenizer.bin"
    path.write_bytes(data)
    with pytest.raises(TokenizerFileError) as info:
        Tokenizer.load(path)
    e = info.value
    assert problem in str(e), str(e)
    assert f"offset {offset}" in str(e), str(e)
    assert str(path) in str(e)
    assert e.offset == offset and e.path == str(path)
    assert isinstance(e, ValueError)
    with pytest.raises(TokenizerFileError) as info2:
        Tokenizer.from_bytes(data)
    assert str(info2.value) == str(e).replace(str(path), "tokenizer.bin")
    return e


# ------------------------------------------------------------------------------- FNV-1a

def test_fnv1a64_reference_vectors():
    from harness.dev import twin

    for f in (fnv1a64, twin.fnv1a64):       # the library's and its twin
        assert f(b"") == 0xCBF29CE484222325
        assert f(b"a") == 0xAF63DC4C8601EC8C
        assert f(b"foobar") == 0x85944171F73967E8
    data = bytes(range(256)) * 40
    assert fnv1a64(data) == twin.fnv1a64(data)
    assert fnv1a64(memoryview(data)[3:]) == twin.fnv1a64(data[3:])


def test_fnv1a64_largest_table_is_fast():
    data = table_bytes(chain_merges(100)) * 653          # ~ the 261 KB of 65,263 merges
    t = time.perf_counter()
    fnv1a64(data)
    assert time.perf_counter() - t < 0.2


# ------------------------------------------------------------------- vocabulary layout

def test_constants():
    assert MAGIC == b"ASMBPETK" and tk.VERSION == 1
    assert N_SPECIAL == 16 and len(SPECIALS) == 16
    assert SPECIALS[:5] == ["<|bos|>", "<|user|>", "<|assistant|>", "<|system|>", "<|end|>"]
    assert SPECIALS[5:] == [f"<|reserved_{k}|>" for k in range(11)]


def test_specials_are_the_top_ids():
    t = Tokenizer(chain_merges(32768 - 272), 32768)
    assert t.special_id("<|bos|>") == 32752                # SPEC §5, default size
    assert t.specials["<|reserved_10|>"] == 32767
    assert list(t.specials) == SPECIALS
    assert sorted(t.specials.values()) == list(range(32752, 32768))
    small = Tokenizer(np.zeros((0, 2), np.uint16))
    assert small.vocab_size == 272 and small.special_id("<|bos|>") == 256
    with pytest.raises(KeyError, match="unknown special"):
        t.special_id("<|nope|>")


def test_id_to_bytes(trained):
    table = trained.id_to_bytes()
    assert len(table) == trained.vocab_size
    assert table[:256] == [bytes([b]) for b in range(256)]
    for i, (a, b) in enumerate(trained.merges.tolist()):
        assert table[256 + i] == table[a] + table[b]
    assert table[trained.special_id("<|bos|>")] == b"<|bos|>"
    assert table[-1] == b"<|reserved_10|>"


def test_merges_hash_is_fnv_of_the_u32_table(trained):
    assert trained.merges_hash == fnv1a64(table_bytes(trained.merges))
    # 60 merges asked, the text runs out of pairs first: the vocabulary shrinks with it
    assert trained.n_merges == 37 and trained.vocab_size == 256 + 37 + 16
    assert trained.merges.dtype == np.uint16 and trained.merges.shape == (37, 2)
    assert not trained.merges.flags.writeable


# ------------------------------------------------------------------------------ round trip

def test_round_trip(tmp_path, trained):
    path = tmp_path / "tokenizer.bin"
    trained.save(path)
    data = path.read_bytes()
    assert data == craft(trained.merges)                    # the layout of SPEC §7, exactly
    assert len(data) == 32 + 4 * trained.n_merges
    assert struct.unpack_from("<8sHHIIIQ", data) == (
        MAGIC, 1, 1, trained.vocab_size, trained.n_merges, 16, trained.merges_hash)
    back = Tokenizer.load(path)
    assert back == trained
    assert np.array_equal(back.merges, trained.merges)
    assert back.vocab_size == trained.vocab_size
    assert back.merges_hash == trained.merges_hash
    assert Tokenizer.load(str(path)) == trained
    assert Tokenizer.from_bytes(data) == trained


def test_round_trip_no_merges(tmp_path):
    t = Tokenizer(np.zeros((0, 2), np.uint16), 272)
    t.save(tmp_path / "t.bin")
    assert (tmp_path / "t.bin").stat().st_size == 32
    back = Tokenizer.load(tmp_path / "t.bin")
    assert back.n_merges == 0 and back.vocab_size == 272 and back == t
    assert back.merges_hash == 0xCBF29CE484222325


def test_round_trip_largest(tmp_path):
    t = Tokenizer(chain_merges(65535 - 272), 65535)
    t.save(tmp_path / "big.bin")
    assert Tokenizer.load(tmp_path / "big.bin") == t


@settings(max_examples=60, deadline=None)
@given(st.data())
def test_round_trip_random_merges(tmp_path_factory, data):
    n = data.draw(st.integers(0, 40))
    merges, seen = [], set()
    for i in range(n):
        pair = data.draw(st.tuples(st.integers(0, 255 + i), st.integers(0, 255 + i))
                         .filter(lambda p: p not in seen))
        seen.add(pair)
        merges.append(pair)
    t = Tokenizer(np.array(merges, dtype=np.int64).reshape(n, 2))
    path = tmp_path_factory.mktemp("rt") / "t.bin"
    t.save(path)
    assert path.read_bytes() == craft(merges, pretok=2)         # nanochat, the default
    assert Tokenizer.load(path) == t


def test_every_single_byte_change_is_rejected(tmp_path):
    # FNV-1a's steps are bijections, so any one changed table byte changes the hash; every
    # header byte is checked. So no corrupted byte anywhere may load.
    good = craft([(97, 98), (256, 99), (32, 257), (257, 257)])
    for pos in range(len(good)):
        for flip in (0x01, 0x80, 0xFF):
            bad = bytearray(good)
            bad[pos] ^= flip
            with pytest.raises(TokenizerFileError):
                Tokenizer.from_bytes(bytes(bad))


# ------------------------------------------------------------------------------ rejections

GOOD = [(97, 98), (256, 99), (32, 257)]


def test_reject_bad_magic(tmp_path):
    rejected(tmp_path, craft(GOOD, magic=b"ASMBPTOK"), "bad magic", 0)
    rejected(tmp_path, b"hello, world: not a tokenizer at all", "bad magic", 0)
    rejected(tmp_path, b"PK\x03\x04", "bad magic", 0)


def test_reject_bad_version(tmp_path):
    # (version 2 is the loaded-vocabulary layout: tests/test_formats_v2.py)
    rejected(tmp_path, craft(GOOD, version=3), "version", 8)
    rejected(tmp_path, craft(GOOD, version=0), "version", 8)


def test_reject_unknown_pretokenizer(tmp_path):
    for pretok in (0, 6, 0x100, 0xFFFF):
        e = rejected(tmp_path, craft(GOOD, pretok=pretok), f"unknown pre-tokenizer id {pretok}", 10)
        assert "seed (id 1)" in str(e) and "gpt2 (id 5)" in str(e)


def test_reject_too_short_for_the_header(tmp_path):
    good = craft(GOOD)
    for n in (0, 5, 8, 31):
        rejected(tmp_path, good[:n], "too short", n)


def test_reject_size_disagreeing_with_file_length(tmp_path):
    good = craft(GOOD)
    rejected(tmp_path, good[:-1], "size mismatch", 16)            # truncated table
    rejected(tmp_path, good[:32], "size mismatch", 16)            # no table at all
    rejected(tmp_path, good + b"\0\0\0\0", "size mismatch", 16)   # trailing bytes
    rejected(tmp_path, craft(GOOD, n_merges=4), "size mismatch", 16)
    e = rejected(tmp_path, craft(GOOD, n_merges=0xFFFFFFFF), "size mismatch", 16)
    assert str(32 + 4 * 0xFFFFFFFF) in str(e)


def test_reject_vocab_size(tmp_path):
    e = rejected(tmp_path, craft(GOOD, vocab_size=32768), "vocab_size", 12)
    assert "256 + n_merges 3 + n_special 16 = 275" in str(e)
    rejected(tmp_path, craft(GOOD, vocab_size=274), "vocab_size", 12)


def test_reject_n_special(tmp_path):
    rejected(tmp_path, craft(GOOD, n_special=15, vocab_size=256 + 3 + 15), "n_special", 20)
    rejected(tmp_path, craft(GOOD, n_special=0, vocab_size=256 + 3), "n_special", 20)


def test_reject_vocab_above_65535(tmp_path):
    # n_merges consistent with the length, but 256 + n + 16 does not fit in u16 ids
    merges = chain_merges(65535 - 272 + 1)
    rejected(tmp_path, craft(merges), "vocab_size", 12)


def test_reject_merge_with_undefined_id(tmp_path):
    # merge 2 may use ids < 258; 258 is its own (not yet defined)
    e = rejected(tmp_path, craft([(97, 98), (256, 99), (258, 1)]), "merge 2", 40)
    assert "references id 258 not yet defined" in str(e) and "must be < 258" in str(e)
    # the right side: offset of the right u16
    e = rejected(tmp_path, craft([(97, 98), (256, 99), (1, 300)]), "merge 2", 42)
    assert "references id 300" in str(e) and "right" in str(e)
    # the first merge may only use bytes
    rejected(tmp_path, craft([(256, 97)]), "not yet defined", 32)
    # a special id, and 0xFFFF
    rejected(tmp_path, craft(GOOD + [(272, 97)]), "references id 272", 44)
    rejected(tmp_path, craft(GOOD + [(97, 0xFFFF)]), "references id 65535", 46)
    e = rejected(tmp_path, craft(chain_merges(20).tolist() + [[400, 1]]), "merge 20", 112)
    assert "must be < 276" in str(e)


def test_reject_repeated_pair(tmp_path):
    e = rejected(tmp_path, craft([(97, 98), (256, 99), (97, 98)]), "merge 2", 40)
    assert "repeats the pair (97, 98) of merge 0" in str(e)


def test_first_problem_in_table_order_is_reported(tmp_path):
    # a repeat at merge 1 comes before an undefined id at merge 2, and the reverse
    rejected(tmp_path, craft([(97, 98), (97, 98), (999, 1)]), "repeats", 36)
    rejected(tmp_path, craft([(97, 98), (999, 1), (97, 98)]), "references id 999", 36)


def test_reject_hash_mismatch(tmp_path):
    good = craft(GOOD)
    h = struct.unpack_from("<Q", good, 24)[0]
    e = rejected(tmp_path, craft(GOOD, hash_=h ^ 1), "hash mismatch", 24)
    assert f"{h:016x}" in str(e)
    # valid merges, but not the ones the hash was taken of
    other = craft([(97, 98), (256, 100), (32, 257)], hash_=h)
    rejected(tmp_path, other, "hash mismatch", 24)


def test_load_missing_file(tmp_path):
    with pytest.raises(FileNotFoundError):
        Tokenizer.load(tmp_path / "nope.bin")


# ----------------------------------------------------------------- constructor checks

@pytest.mark.parametrize("merges, vocab_size, match", [
    (GOOD, 300, "vocab_size 300"),
    (GOOD, 274, "vocab_size 274"),
    ([(97, 98), (258, 1)], None, "merge 1 references id 258"),
    ([(97, 98), (1, 257)], None, "merge 1 references id 257"),
    ([(97, 98), (97, 98)], None, "merge 1 repeats the pair"),
    ([(1, 2, 3)], None, "shape"),
    ([(97, 70000)], None, "outside"),
    ([(97, -1)], None, "outside"),
    ([(0.5, 1.0)], None, "integers"),
])
def test_constructor_rejects(merges, vocab_size, match):
    with pytest.raises(ValueError, match=match) as info:
        Tokenizer(merges, vocab_size)
    assert not isinstance(info.value, TokenizerFileError)


def test_constructor_rejects_too_many_merges():
    with pytest.raises(ValueError, match="65535"):
        Tokenizer(chain_merges(65535 - 272 + 1))
    with pytest.raises(TypeError):
        Tokenizer(GOOD, 275.0)


def test_constructor_accepts_lists_and_other_int_dtypes():
    t = Tokenizer(GOOD, 275)
    assert t == Tokenizer(np.array(GOOD, dtype=np.int64))
    assert t == Tokenizer(np.array(GOOD, dtype=np.uint32), np.int64(275))
    assert t.merges.dtype == np.uint16 and t.merges.flags.c_contiguous
    assert Tokenizer([]).n_merges == 0


# ------------------------------------------------------------------------- atomic save

def test_save_leaves_no_tmp_and_replaces(tmp_path, trained):
    path = tmp_path / "tokenizer.bin"
    path.write_bytes(b"old content")
    trained.save(path)
    assert Tokenizer.load(path) == trained
    assert sorted(os.listdir(tmp_path)) == ["tokenizer.bin"]
    other = Tokenizer(GOOD)
    other.save(str(path))
    assert Tokenizer.load(path) == other
    assert sorted(os.listdir(tmp_path)) == ["tokenizer.bin"]


@pytest.mark.parametrize("fail_at", ["fsync", "replace", "write"])
def test_save_failure_keeps_the_old_file(tmp_path, trained, monkeypatch, fail_at):
    path = tmp_path / "tokenizer.bin"
    Tokenizer(GOOD).save(path)
    before = path.read_bytes()

    def boom(*args, **kwargs):
        raise OSError(28, "No space left on device")

    if fail_at == "write":
        # the temporary file (harness.files.write_atomic: mkstemp + os.fdopen) gets half
        # the image, then the disk fills
        real_fdopen = os.fdopen

        class HalfFile:
            def __init__(self, f):
                self.f = f

            def write(self, data):
                self.f.write(data[: len(data) // 2])
                boom()

            def __getattr__(self, name):
                return getattr(self.f, name)

            def __enter__(self):
                return self

            def __exit__(self, *exc):
                return self.f.__exit__(*exc)

        monkeypatch.setattr(os, "fdopen",
                            lambda fd, mode="r", *a, **k: HalfFile(real_fdopen(fd, mode, *a, **k)))
    else:
        monkeypatch.setattr(os, fail_at, boom)
    with pytest.raises(OSError, match="No space"):
        trained.save(path)
    monkeypatch.undo()
    assert path.read_bytes() == before                      # untouched
    assert sorted(os.listdir(tmp_path)) == ["tokenizer.bin"]  # no .tmp left


def test_save_into_missing_directory(tmp_path, trained):
    with pytest.raises(FileNotFoundError):
        trained.save(tmp_path / "no" / "such" / "tokenizer.bin")
    assert os.listdir(tmp_path) == []


def test_save_fresh_file_failure_creates_nothing(tmp_path, trained, monkeypatch):
    monkeypatch.setattr(os, "replace", lambda *a: (_ for _ in ()).throw(OSError("nope")))
    with pytest.raises(OSError, match="nope"):
        trained.save(tmp_path / "tokenizer.bin")
    monkeypatch.undo()
    assert os.listdir(tmp_path) == []
