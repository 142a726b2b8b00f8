"""tokenizer.bin version 2 and .tok version 2 (harness.tokenizer, harness.tokfile;
docs/FORMATS.md): round trips, every rejection on a crafted file (offset and problem
named), version 1 still read and written as before."""
from __future__ import annotations

import hashlib
import struct

import numpy as np
import pytest

from harness.tokenizer import MAGIC, Tokenizer, TokenizerFileError
from harness.tokfile import MAGIC as TOK_MAGIC
from harness.tokfile import TokFileError, TokWriter, read_tok
from harness.vocab import Vocab
from loaded_util import loaded


@pytest.fixture(scope="module")
def cl100k():
    return loaded("cl100k_base")

# ------------------------------------------------------------------ a small vocabulary

TOKENS = [bytes([b]) for b in range(256)] + [b"ab", b"abc", b" the", b"<|eot|>"]
SPECIALS = {"<|eot|>": 259, "<|bos|>": 300}        # one inside the vocab (HF), one above


def small_vocab(merges=None, **kw) -> Vocab:
    args = dict(name="small", tokens=list(TOKENS), pretokenizer="gpt2",
                specials=dict(SPECIALS), merges=merges, whole_chunk=True)
    args.update(kw)
    return Vocab(**args)


def craft(*, tokens=None, offsets=None, specials=None, names=None, merges=None,
          name=b"small", version=2, pretok=5, n_tokens=None, n_merges=None, n_special=None,
          token_bytes=None, special_bytes=None, flags=None, name_len=None, reserved=bytes(12),
          hash_=None, tail=b"") -> bytes:
    """A version-2 image written independently of harness.tokenizer (docs/FORMATS.md),
    any field overridden."""
    tokens = list(TOKENS) if tokens is None else tokens
    if offsets is None:
        offsets = [0]
        for t in tokens:
            offsets.append(offsets[-1] + len(t))
    specials = sorted((i, n.encode()) for n, i in SPECIALS.items()) if specials is None \
        else specials
    merges = [] if merges is None else merges
    blob = b"".join(tokens)
    snames = b"".join(n for _, n in specials) if names is None else names
    body = (struct.pack(f"<{len(offsets)}Q", *offsets) + blob
            + b"".join(struct.pack("<II", i, len(n)) for i, n in specials) + snames
            + b"".join(struct.pack("<II", a, b) for a, b in merges))
    fl = (1 | (2 if merges else 0)) if flags is None else flags
    h = int.from_bytes(hashlib.blake2b(struct.pack("<HI", pretok, fl) + body,
                                       digest_size=8).digest(), "little")
    head = struct.pack(
        "<8sHHIIIQQIII12s", MAGIC, version, pretok,
        len(tokens) if n_tokens is None else n_tokens,
        len(merges) if n_merges is None else n_merges,
        len(specials) if n_special is None else n_special,
        h if hash_ is None else hash_,
        len(blob) if token_bytes is None else token_bytes,
        len(snames) if special_bytes is None else special_bytes,
        fl,
        len(name) if name_len is None else name_len, reserved)
    return head + body + name + tail


def rejected(tmp_path, data: bytes, problem: str, offset: int) -> TokenizerFileError:
    path = tmp_path / "tokenizer.bin"
    path.write_bytes(data)
    for load in (lambda: Tokenizer.load(path), lambda: Tokenizer.from_bytes(data, str(path))):
        with pytest.raises(TokenizerFileError) as info:
            load()
        e = info.value
        assert problem in str(e), str(e)
        assert e.offset == offset and f"offset {offset}" in str(e), str(e)
        assert str(path) in str(e) and "\n" not in str(e)
    return e


# ---------------------------------------------------------------- tokenizer.bin v2

def test_v2_round_trip_small(tmp_path):
    tok = Tokenizer.from_bytes(craft())
    assert tok.is_loaded and tok.name == "small" and tok.pretokenizer == "gpt2"
    assert tok.specials == SPECIALS and tok.merges is None and tok.vocab_size == 301
    assert tok.dtype == np.uint16
    assert tok.to_bytes() == craft()                # the writer matches the spec
    tok.save(tmp_path / "t.bin")
    again = Tokenizer.load(tmp_path / "t.bin")
    assert again == tok and again.merges_hash == tok.merges_hash
    assert again.encode(" the abc").tolist() == tok.encode(" the abc").tolist()


def test_v2_with_merges(tmp_path):
    merges = [(97, 98), (256, 99)]
    img = craft(merges=merges)
    tok = Tokenizer.from_bytes(img)
    assert tok.merges.tolist() == [[97, 98], [256, 99]] and tok.merges.dtype == np.uint32
    assert Tokenizer.from_bytes(tok.to_bytes()) == tok
    assert tok.merges_hash != Tokenizer.from_bytes(craft()).merges_hash


def test_identity_hash_ignores_the_name_only():
    base = Tokenizer.from_bytes(craft())
    assert Tokenizer.from_bytes(craft(name=b"renamed")).merges_hash == base.merges_hash
    other = [(1000, b"<|x|>")]
    assert Tokenizer.from_bytes(craft(specials=other)).merges_hash != base.merges_hash
    assert Tokenizer.from_bytes(craft(pretok=4)).merges_hash != base.merges_hash
    assert Tokenizer.from_bytes(craft(flags=0)).merges_hash != base.merges_hash


def test_v1_still_read_and_written(tmp_path):
    tok = Tokenizer(np.array([[97, 98]], dtype=np.uint16))
    data = tok.to_bytes()
    assert struct.unpack_from("<H", data, 8)[0] == 1 and len(data) == 32 + 4
    assert Tokenizer.from_bytes(data) == tok and not Tokenizer.from_bytes(data).is_loaded


def test_v2_truncated_at_every_length(tmp_path):
    good = craft(merges=[(97, 98)])
    for n in range(10, len(good)):
        path = tmp_path / "t.bin"
        path.write_bytes(good[:n])
        with pytest.raises(TokenizerFileError) as info:
            Tokenizer.load(path)
        msg = str(info.value)
        assert ("too short" in msg) if n < 64 else ("truncated" in msg), (n, msg)
        assert f"offset {n}" in msg


def test_v2_trailing_bytes(tmp_path):
    good = craft()
    rejected(tmp_path, good + b"\0", "trailing bytes", len(good))


def test_v2_bad_counts(tmp_path):
    n = len(TOKENS)
    rejected(tmp_path, craft(n_tokens=255), "bad n_tokens 255", 12)
    rejected(tmp_path, craft(n_tokens=n + 1), "truncated", len(craft()))
    rejected(tmp_path, craft(n_merges=1, flags=1), "bad n_merges 1", 16)
    rejected(tmp_path, craft(token_bytes=10), "bad token_bytes 10", 32)
    rejected(tmp_path, craft(special_bytes=1), "bad special_bytes 1", 40)
    rejected(tmp_path, craft(n_special=3), "truncated", len(craft()))
    # name lengths that disagree with special_bytes (file length kept right)
    i0, n0 = sorted((i, nm.encode()) for nm, i in SPECIALS.items())[0]
    specials = [(i0, n0), (300, b"<|bos|>")]
    img = bytearray(craft(specials=specials))
    at = 64 + 8 * (n + 1) + sum(map(len, TOKENS)) + 4      # special 0's length
    struct.pack_into("<I", img, at, len(n0) + 1)
    rejected(tmp_path, bytes(img), "special name lengths add up to", 40)


def test_v2_offsets_out_of_range(tmp_path):
    n = len(TOKENS)
    total = sum(map(len, TOKENS))
    off = [0]
    for t in TOKENS:
        off.append(off[-1] + len(t))
    bad = list(off)
    bad[0] = 1
    rejected(tmp_path, craft(offsets=bad), "token offset 0 is 1", 64)
    bad = list(off)
    bad[5] = total + 7
    rejected(tmp_path, craft(offsets=bad), "token offset 5 is", 64 + 8 * 5)
    bad = list(off)
    bad[6] = bad[5]                                      # token 5 empty
    rejected(tmp_path, craft(offsets=bad), "token 5 is empty", 64 + 8 * 6)
    bad = list(off)
    bad[n] = total - 1
    bad[n - 1] = total - 2
    rejected(tmp_path, craft(offsets=bad), f"last token offset {total - 1}", 64 + 8 * n)


def test_v2_duplicate_tokens(tmp_path):
    toks = list(TOKENS)
    toks[257] = b"ab"
    e = rejected(tmp_path, craft(tokens=toks), "duplicate token: id 257", 64 + 8 * 261
                 + 256 + 2)
    assert "of id 256" in str(e)


def test_v2_missing_byte(tmp_path):
    toks = list(TOKENS)
    toks[7] = b"\x07\x07"
    rejected(tmp_path, craft(tokens=toks), "byte 0x07 is not a token", 64 + 8 * 261)


def test_v2_unknown_pretokenizer_flags_reserved(tmp_path):
    for p in (0, 6, 0xFFFF):
        rejected(tmp_path, craft(pretok=p), f"unknown pre-tokenizer id {p}", 10)
    rejected(tmp_path, craft(flags=8), "unknown flags 0x00000008", 44)
    rejected(tmp_path, craft(flags=4), "bit 2 (merge_ids) needs bit 1", 44)
    rejected(tmp_path, craft(reserved=bytes(3) + b"\1" + bytes(8)), "reserved bytes", 55)
    rejected(tmp_path, craft(version=3), "bad format version 3", 8)


def test_v2_bad_special_ids(tmp_path):
    first = 64 + 8 * 261 + sum(map(len, TOKENS))        # the first special entry
    rejected(tmp_path, craft(specials=[(300, b"<|a|>"), (300, b"<|b|>")]),
             "has id 300, not above the previous special's 300", first + 8)
    rejected(tmp_path, craft(specials=[(301, b"<|a|>"), (300, b"<|b|>")]),
             "not above the previous", first + 8)
    rejected(tmp_path, craft(specials=[(97, b"<|a|>")]),
             "has id 97, which is the ordinary token b'a'", first)
    rejected(tmp_path, craft(specials=[(0xFFFFFFFF, b"<|a|>")]), "never an id", first)
    rejected(tmp_path, craft(specials=[(300, b"<|a|>"), (301, b"<|a|>")]),
             "special name '<|a|>' repeats", first + 16 + 5)
    rejected(tmp_path, craft(specials=[(300, b"\xff")]), "is not UTF-8", first + 8)


def test_v2_bad_merges(tmp_path):
    at = 64 + 8 * 261 + sum(map(len, TOKENS)) + 16 + len(b"<|eot|><|bos|>")
    rejected(tmp_path, craft(merges=[(97, 98), (97, 999)]), "merge 1 references id 999",
             at + 8 + 4)
    rejected(tmp_path, craft(merges=[(120, 121)]), "merge 0 (120, 121) makes b'xy', not a "
             "token", at)


def test_v2_bad_hash_and_name(tmp_path):
    good = craft()
    rejected(tmp_path, craft(hash_=5), "hash mismatch", 24)
    body_end = len(good) - len(b"small")
    rejected(tmp_path, craft(name=b"\xff\xfe"), "name is not UTF-8", body_end)
    flipped = bytearray(good)
    flipped[64 + 8 * 261 + 100] ^= 0x01                 # a token byte: another token
    with pytest.raises(TokenizerFileError):
        Tokenizer.from_bytes(bytes(flipped))


def test_cl100k_save_load_round_trip(tmp_path, cl100k):
    path = tmp_path / "cl100k.bin"
    cl100k.save(path)
    again = Tokenizer.load(path)
    assert again == cl100k and again.merges_hash == cl100k.merges_hash
    assert again.specials == cl100k.specials and again.name == "cl100k_base"
    text = "Hello, world! 12345 ☺ <|endoftext|>"
    assert again.encode(text).tolist() == cl100k.encode(text).tolist()
    assert list(tmp_path.iterdir()) == [path]           # no temporary left


# ------------------------------------------------------------------------ .tok v2

@pytest.fixture(scope="module")
def small():
    return Tokenizer.from_bytes(craft())


def write_v2(path, blocks, tok, width=2):
    with TokWriter(path, tok.merges_hash, version=2, width=width) as w:
        for tokens, counts, nbytes in blocks:
            w.write(tokens, len(counts), nbytes, counts=counts)
    return w


@pytest.mark.parametrize("width", [2, 4])
def test_tok_v2_round_trip(tmp_path, small, width):
    p = tmp_path / "a.tok"
    write_v2(p, [([97, 98, 99], [2, 1], 3), ([], [0], 0), ([257, 0, 1], [3], 5)], small,
             width)
    t = read_tok(p, small)
    assert (t.version, t.width, t.n_tokens, t.n_documents, t.source_bytes) == (
        2, width, 6, 4, 8)
    assert t.index.tolist() == [0, 2, 3, 3]
    assert [d.tolist() for d in t.documents()] == [[97, 98], [99], [], [257, 0, 1]]
    assert t.tokens.dtype == np.dtype("<u2" if width == 2 else "<u4")
    size = 64 + width * 6 + (-(width * 6) % 8) + 8 * 4
    assert p.stat().st_size == size


def test_tok_v2_u32_ids(tmp_path, small):
    p = tmp_path / "b.tok"
    write_v2(p, [([70000, 5], [2], 2)], small, 4)
    assert read_tok(p).tokens.tolist() == [70000, 5]
    with pytest.raises(ValueError, match="0..65535"):
        write_v2(tmp_path / "c.tok", [([70000], [1], 1)], small, 2)
    assert not (tmp_path / "c.tok").exists()


def test_tok_v2_writer_needs_counts(tmp_path, small):
    with pytest.raises(ValueError, match="token count of each document"):
        with TokWriter(tmp_path / "d.tok", 0, version=2) as w:
            w.write([1, 2], 1, 2)
    with pytest.raises(ValueError, match="add up to 3"):
        with TokWriter(tmp_path / "d.tok", 0, version=2) as w:
            w.write([1, 2], 1, 2, counts=[3])
    assert list(tmp_path.iterdir()) == []


def image_v2(*, width=2, tokens=(97, 98, 99), index=(0, 2), flags=0, reserved=0,
             hash_=None, n_tokens=None, n_documents=None, pad=None, tail=b"",
             version=2, small_hash=0) -> bytes:
    """A .tok version-2 image written from docs/FORMATS.md, fields overridden."""
    dt = "<u2" if width in (2, 3) else "<u4"
    data = np.array(tokens, dtype=dt).tobytes()
    padding = bytes(-len(data) % 8) if pad is None else pad
    head = struct.pack("<8sHHHHQQQQ16s", TOK_MAGIC, version, flags, width, reserved,
                       small_hash if hash_ is None else hash_,
                       len(tokens) if n_tokens is None else n_tokens,
                       len(index) if n_documents is None else n_documents, 3, bytes(16))
    return head + data + padding + np.array(index, dtype="<u8").tobytes() + tail


def tok_rejected(tmp_path, small, image: bytes, needle: str, offset: int):
    p = tmp_path / "bad.tok"
    p.write_bytes(image)
    with pytest.raises(TokFileError) as e:
        read_tok(p, small)
    err = e.value
    assert err.offset == offset and needle in str(err) and f"offset {offset}" in str(err), \
        str(err)
    assert "\n" not in str(err)


def test_tok_v2_good_image_reads(tmp_path, small):
    p = tmp_path / "ok.tok"
    p.write_bytes(image_v2(small_hash=small.merges_hash))
    t = read_tok(p, small)
    assert [d.tolist() for d in t.documents()] == [[97, 98], [99]]


def test_tok_v2_rejections(tmp_path, small):
    h = small.merges_hash
    good = image_v2(small_hash=h)
    idx_at = 64 + 8                                    # 6 bytes of tokens + 2 of padding
    cases = [
        (image_v2(small_hash=h, width=3), "token width 3, expected 2 or 4", 12),
        (image_v2(small_hash=h, width=8), "token width 8", 12),
        (image_v2(small_hash=h, reserved=1), "reserved field is 0x0001", 14),
        (image_v2(small_hash=h, flags=4), "unknown flags 0x0004", 10),
        (image_v2(small_hash=h, width=4, flags=1), "a chat file needs token width 2", 10),
        (good[:-1], "truncated document index", len(good) - 1),
        (good[:idx_at + 3], "truncated document index", idx_at + 3),
        (good[:66], "token count 3 needs 70 bytes", 24),
        (good + b"\0", "trailing bytes", len(good)),
        (image_v2(small_hash=h, n_documents=3), "truncated document index", len(good)),
        (image_v2(small_hash=h, index=(0, 2, 1)), "document index not increasing: "
         "document 2 starts at token 1", idx_at + 16),
        (image_v2(small_hash=h, index=(0, 4)), "document index past the tokens: document 1 "
         "starts at token 4, there are 3", idx_at + 8),
        (image_v2(small_hash=h, index=(1, 2)), "document index starts at token 1", idx_at),
        (image_v2(small_hash=h, pad=b"\0\1"), "padding before the document index", 71),
        (image_v2(small_hash=h ^ 1), "written by a different tokenizer", 16),
        (image_v2(small_hash=h, version=3), "unknown format version 3, expected 1 or 2", 8),
    ]
    for image, needle, offset in cases:
        tok_rejected(tmp_path, small, image, needle, offset)


def test_tok_v2_empty_and_no_documents(tmp_path, small):
    p = tmp_path / "e.tok"
    write_v2(p, [], small)
    t = read_tok(p, small)
    assert (t.n_tokens, t.n_documents, list(t.documents())) == (0, 0, [])
    assert p.stat().st_size == 64
