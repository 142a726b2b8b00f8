"""harness.tokfile: the .tok format (SPEC §7) written atomically and read back, every
malformed file refused with its byte offset, a mismatched tokenizer refused."""
from __future__ import annotations

import struct
import zlib

import numpy as np
import pytest

from harness.tokenizer import Tokenizer
from harness.tokfile import (FLAG_CHAT, FLAG_CHECKSUM, HEADER_SIZE, MAGIC, MASKBIT, TokFile,
                             TokFileError, TokWriter, _pack_header, is_tok_file, read_tok)

# a tiny hand-built tokenizer: merges make 256 = "ab", 257 = "abc"; <|bos|> is 258
TOK = Tokenizer(np.array([[97, 98], [256, 99]], dtype=np.uint16))
OTHER = Tokenizer(np.array([[97, 98]], dtype=np.uint16))
BOS = TOK.special_id("<|bos|>")


def write(path, blocks, chat=False, tokenizer=TOK):
    with TokWriter(path, tokenizer.merges_hash, chat=chat) as w:
        for tokens, docs, nbytes in blocks:
            w.write(np.array(tokens, dtype=np.uint16), docs, nbytes)
    return w


def test_round_trip(tmp_path):
    p = tmp_path / "a.tok"
    w = write(p, [([BOS, 257, 100], 1, 4), ([BOS, 256, BOS], 2, 2), ([], 0, 0)])
    assert (w.tokens, w.documents, w.source_bytes) == (6, 3, 6)
    assert p.stat().st_size == HEADER_SIZE + 12
    assert list(tmp_path.iterdir()) == [p]                      # no temporary file left
    assert is_tok_file(p)
    t = read_tok(p, TOK)
    assert (t.version, t.flags, t.chat) == (1, 0, False)
    assert (t.n_tokens, t.n_documents, t.source_bytes) == (6, 3, 6)
    assert t.merges_hash == TOK.merges_hash
    assert t.tokens.dtype == np.dtype("<u2") and not t.tokens.flags.writeable
    assert t.tokens.tolist() == [BOS, 257, 100, BOS, 256, BOS]
    assert [d.tolist() for d in t.documents()] == [[BOS, 257, 100], [BOS, 256], [BOS]]
    assert [b.tolist() for b in t.blocks(4)] == [[BOS, 257, 100, BOS], [256, BOS]]
    # the header, byte by byte (SPEC §7)
    head = p.read_bytes()[:HEADER_SIZE]
    assert head[:8] == b"ASMBPTOK"
    assert struct.unpack_from("<HHIQQQQ", head, 8) == (1, 0, 0, TOK.merges_hash, 6, 3, 6)
    assert head[48:] == bytes(16)
    # without a tokenizer: header and tokens, no hash check; documents at the first token
    assert read_tok(p).n_tokens == 6
    assert [d.tolist() for d in read_tok(p).documents()] == [[BOS, 257, 100], [BOS, 256],
                                                             [BOS]]


def test_writer_hands_blocks_to_writeback_on_the_way(tmp_path, monkeypatch):
    """Past WRITEBACK_BYTES the writer starts the disk writes of what it has written
    (so the final fsync has little left); the file is the same bytes."""
    from harness import tokfile

    calls = []
    real = getattr(tokfile.os, "posix_fadvise", None)
    if real is None:
        pytest.skip("no posix_fadvise on this platform")

    def fadvise(fd, offset, length, advice):
        calls.append((offset, length))
        return real(fd, offset, length, advice)

    monkeypatch.setattr(tokfile, "WRITEBACK_BYTES", 64)
    monkeypatch.setattr(tokfile.os, "posix_fadvise", fadvise)
    blocks = [np.arange(i * 40, i * 40 + 40, dtype=np.uint16) for i in range(5)]
    p = tmp_path / "w.tok"
    write(p, [(np.concatenate(([BOS], b)), 1, 40) for b in blocks])
    # 82 bytes per block: every block reaches 64 bytes past the last call
    assert calls == [(HEADER_SIZE + 82 * i, 82) for i in range(5)]
    t = read_tok(p, TOK)
    assert t.tokens.tolist() == [x for b in blocks for x in [BOS] + b.tolist()]


def test_chat_flag_and_maskbit(tmp_path):
    p = tmp_path / "c.tok"
    end = TOK.special_id("<|end|>")
    write(p, [([BOS, 257, 256 | MASKBIT, end | MASKBIT], 1, 5)], chat=True)
    t = read_tok(p, TOK)
    assert t.chat and t.flags == FLAG_CHAT
    assert t.ids().tolist() == [BOS, 257, 256, end]
    assert t.tokens[2] == 256 | MASKBIT


def test_empty_file(tmp_path):
    p = tmp_path / "e.tok"
    write(p, [])
    t = read_tok(p, TOK)
    assert t.n_tokens == 0 and t.tokens.size == 0 and list(t.documents()) == []


def test_writer_leaves_nothing_on_failure(tmp_path):
    p = tmp_path / "out.tok"
    with pytest.raises(RuntimeError, match="boom"):
        with TokWriter(p, TOK.merges_hash) as w:
            w.write(np.arange(10, dtype=np.uint16), 1, 10)
            raise RuntimeError("boom")
    assert list(tmp_path.iterdir()) == []
    p.write_bytes(b"old")                                        # an old file stays as it is
    with pytest.raises(ValueError, match="0..65535"):
        with TokWriter(p, TOK.merges_hash) as w:
            w.write([1, 70000])
    assert p.read_bytes() == b"old" and list(tmp_path.iterdir()) == [p]


def _image(**fields) -> bytearray:
    """A valid 3-token .tok image, with header fields overridden."""
    f = dict(magic=MAGIC, version=1, flags=0, reserved=0, hash=TOK.merges_hash, tokens=3,
             documents=1, nbytes=3, tail=bytes(16))
    f.update(fields)
    head = struct.pack("<8sHHIQQQQ16s", f["magic"], f["version"], f["flags"], f["reserved"],
                       f["hash"], f["tokens"], f["documents"], f["nbytes"], f["tail"])
    return bytearray(head + np.array([BOS, 97, 98], dtype="<u2").tobytes())


@pytest.mark.parametrize("image, offset, needle", [
    (_image(magic=b"ASMBPETK"), 0, "bad magic b'ASMBPETK'"),
    (bytearray(b"ASMBP"), 0, "bad magic"),
    (_image()[:40], 40, "file too short: 40 bytes"),
    (_image(version=3), 8, "unknown format version 3, expected 1 or 2"),
    (_image(flags=2), 10, "unknown flags 0x0002"),
    (_image(reserved=5), 12, "reserved field is 0x00000005, must be 0"),
    (_image(tail=bytes(5) + b"\x01" + bytes(10)), 53, "reserved bytes 48..63 must be 0"),
    (_image(tokens=4), 24, "token count 4 needs 72 bytes, the file is 70 bytes"),
    (_image(tokens=2), 24, "token count 2 needs 68 bytes, the file is 70 bytes"),
    (_image() + b"\x00", 70, "token data is 7 bytes, an odd length"),
    (_image(documents=4), 32, "4 documents but only 3 tokens"),
])
def test_malformed_files_refused_with_offset(tmp_path, image, offset, needle):
    p = tmp_path / "bad.tok"
    p.write_bytes(bytes(image))
    with pytest.raises(TokFileError) as e:
        read_tok(p, TOK)
    err = e.value
    assert isinstance(err, ValueError)
    assert err.offset == offset and err.path == str(p)
    assert needle in str(err) and str(p) in str(err) and f"offset {offset}" in str(err)
    assert "\n" not in str(err)


def test_valid_image_reads(tmp_path):
    p = tmp_path / "ok.tok"
    p.write_bytes(bytes(_image()))
    assert read_tok(p, TOK).tokens.tolist() == [BOS, 97, 98]


def test_mismatched_tokenizer_refused(tmp_path):
    p = tmp_path / "a.tok"
    write(p, [([BOS, 97], 1, 1)])
    with pytest.raises(TokFileError) as e:
        read_tok(p, OTHER)
    assert e.value.offset == 16
    assert (f"written by a different tokenizer: hash 0x{TOK.merges_hash:016x}, this "
            f"tokenizer's is 0x{OTHER.merges_hash:016x}") in str(e.value)


def test_chat_file_needs_small_vocab(tmp_path):
    big = Tokenizer(np.array([[97, 98]] + [[256 + i, 97] for i in range(32600)],
                             dtype=np.uint16))
    p = tmp_path / "c.tok"
    write(p, [([big.special_id("<|bos|>")], 1, 0)], chat=True, tokenizer=big)
    with pytest.raises(TokFileError, match="a chat file needs vocab_size <= 32768"):
        read_tok(p, big)


def test_is_tok_file(tmp_path):
    t = tmp_path / "x.txt"
    t.write_bytes(b"ASMBPETK not a tok")
    assert not is_tok_file(t) and not is_tok_file(tmp_path / "missing")
    assert is_tok_file(tmp_path / "named.tok")                # by its name: read_tok tells
    t.write_bytes(MAGIC + bytes(56))
    assert is_tok_file(t)


def test_decode_text_blocks(tmp_path):
    from harness.pipeline import decode_text

    p = tmp_path / "u.tok"
    ids = [BOS, 257] + list("☺".encode()) + [0xFF, BOS, 100]
    write(p, [(ids, 2, 7)])
    t = read_tok(p, TOK)
    for block in (1, 2, 3, 100):                          # ☺ cut between blocks or not
        assert "".join(decode_text(t, TOK, block_tokens=block)) == "<|bos|>abc☺\ufffd<|bos|>d"
    with pytest.raises(UnicodeDecodeError):
        "".join(decode_text(t, TOK, errors="strict"))


# ------------------------------------------------- counts against the data, checksum, verify

def _v1(path, tokens, documents, nbytes, flags=0, hash_=TOK.merges_hash):
    """A version-1 file with the given tokens and header counts."""
    path.write_bytes(_pack_header(flags, hash_, len(tokens), documents, nbytes)
                     + np.array(tokens, dtype="<u2").tobytes())
    return path


USER, ASSISTANT, END = (TOK.special_id(n) for n in ("<|user|>", "<|assistant|>", "<|end|>"))


@pytest.mark.parametrize("tokens, documents, nbytes, flags, offset, needle", [
    ([BOS, 97, 98], 0, 2, 0, 32, "0 documents but 3 tokens"),
    ([], 0, 5, 0, 40, "5 source bytes but no tokens"),
    ([BOS, 97, 98], 1, 0, 0, 40, "0 source bytes, fewer than the text tokens spell"),
    ([BOS, 97, 98, BOS], 2, 1, 0, 40, "1 source bytes, fewer than the text tokens spell"),
    ([BOS], 1, 3, FLAG_CHAT, 40, "3 source bytes but no text tokens"),
    ([97, BOS, 98], 1, 2, 0, 64, "the first token is 97, not <|bos|>"),
    ([USER, 97, END], 1, 1, FLAG_CHAT, 64, "every conversation starts with it"),
])
def test_counts_that_cannot_be_refused_on_open(tmp_path, tokens, documents, nbytes, flags,
                                               offset, needle):
    """read_tok checks the header's counts against each other and the first token
    (issue 23: these were accepted)."""
    p = _v1(tmp_path / "bad.tok", tokens, documents, nbytes, flags)
    with pytest.raises(TokFileError) as e:
        read_tok(p, TOK)
    assert e.value.offset == offset and needle in str(e.value), str(e.value)
    assert str(p) in str(e.value) and f"offset {offset}" in str(e.value)


@pytest.mark.parametrize("documents", [1, 3])
def test_document_count_checked_on_first_use(tmp_path, documents):
    """Version 1: n_documents against the <|bos|> tokens, in one pass when the documents
    are first used (not on open: read_tok stays O(1) in the file size)."""
    p = _v1(tmp_path / "d.tok", [BOS, 97, BOS, 98], documents, 3)
    for tokenizer in (TOK, None):
        tf = read_tok(p, tokenizer)                           # the header alone is fine
        for use in (len, list, lambda t: t[0], TokFile.check_counts, TokFile.verify):
            with pytest.raises(TokFileError) as e:
                use(tf)
            assert e.value.offset == 32
            assert (f"{documents} documents in the header, but the tokens hold 2 <|bos|> "
                    f"(id {BOS})") in str(e.value)


def test_source_bytes_respelled_with_the_tokenizer(tmp_path):
    """With a tokenizer, source_bytes must be the bytes the text tokens spell (specials
    none, MASKBIT stripped in chat files)."""
    ok = _v1(tmp_path / "ok.tok", [BOS, 257, 98], 1, 4)       # "abc" + "b"
    read_tok(ok, TOK).check_counts()
    bad = _v1(tmp_path / "bad.tok", [BOS, 257, 98], 1, 3)
    read_tok(bad).check_counts()                              # no tokenizer: not known
    with pytest.raises(TokFileError) as e:
        read_tok(bad, TOK).check_counts()
    assert e.value.offset == 40
    assert "3 source bytes in the header, but the text tokens spell 4 bytes" in str(e.value)
    chat = [BOS, USER, 256, END, ASSISTANT, 257 | MASKBIT, END | MASKBIT]   # ab, abc
    read_tok(_v1(tmp_path / "c.tok", chat, 1, 5, FLAG_CHAT), TOK).check_counts()
    with pytest.raises(TokFileError, match="6 source bytes in the header, but the text "
                                           "tokens spell 5 bytes"):
        read_tok(_v1(tmp_path / "c6.tok", chat, 1, 6, FLAG_CHAT), TOK).check_counts()


def _encoded(tmp_path, version):
    p = tmp_path / f"v{version}.tok"
    docs = ["abcab", "", "ba bab"]
    tokens, counts = TOK.encode_many(docs, bos=True)
    with TokWriter(p, TOK.merges_hash, version=version) as w:
        w.write(tokens, len(docs), sum(map(len, docs)),
                counts=counts if version == 2 else None)
    return p


@pytest.mark.parametrize("version", [1, 2])
def test_every_header_count_edit_is_refused(tmp_path, version):
    """Issue 23: edits of n_documents / source_bytes of an encoded file are refused,
    by read_tok or by the counts check `asmbpe stats` runs (check_counts)."""
    p = _encoded(tmp_path, version)
    image = p.read_bytes()
    tf = read_tok(p, TOK)
    tf.check_counts()
    docs, nbytes = tf.n_documents, tf.source_bytes
    edits = [(32, v) for v in (0, docs - 1, docs + 1, 2 * docs, tf.n_tokens, 2 ** 40)]
    edits += [(40, v) for v in (0, 1, nbytes - 1, nbytes + 1, 2 * nbytes, 2 ** 40)]
    for offset, value in edits:
        bad = bytearray(image)
        struct.pack_into("<Q", bad, offset, value)
        if version == 2:                                      # keep the checksum right
            struct.pack_into("<I", bad, 48, zlib.crc32(bad[HEADER_SIZE:]))
        q = tmp_path / "edited.tok"
        q.write_bytes(bytes(bad))
        with pytest.raises(TokFileError):
            read_tok(q, TOK).check_counts()


def test_stats_refuses_a_header_that_disagrees(tmp_path):
    """`asmbpe stats` printed "documents 0" beside "1 special"; now one error line."""
    from cli_util import invoke, one_line_error

    tok_path = tmp_path / "t.bin"
    TOK.save(tok_path)
    p = _encoded(tmp_path, 1)
    bad = bytearray(p.read_bytes())
    struct.pack_into("<Q", bad, 32, 2)                        # 3 documents -> 2
    p.write_bytes(bytes(bad))
    one_line_error(invoke("stats", p, "-t", tok_path),
                   f"{p}: 2 documents in the header, but the tokens hold 3 <|bos|>")


@pytest.mark.parametrize("width", [2, 4])
def test_v2_checksum_written_and_verified(tmp_path, width):
    p = tmp_path / "c.tok"
    with TokWriter(p, TOK.merges_hash, version=2, width=width) as w:
        w.write([BOS, 97, 98], 2, 2, counts=[2, 1])
        w.write([257], 1, 3, counts=[1])
    image = p.read_bytes()
    flags, = struct.unpack_from("<H", image, 10)
    assert flags == FLAG_CHECKSUM
    crc, = struct.unpack_from("<I", image, 48)
    assert crc == zlib.crc32(image[HEADER_SIZE:]) == w.checksum       # tokens, pad, index
    assert image[52:64] == bytes(12)
    tf = read_tok(p, TOK)
    assert tf.checksum == crc
    v = tf.verify()
    assert f"CRC-32 0x{crc:08x}" in str(v) and "every id a token of asmbpe" in str(v)
    assert (v.tokens, v.documents, v.source_bytes) == (4, 3, 5)
    # an in-range token edit (same length: the counts still agree) and an index edit
    for at, value in ((HEADER_SIZE + width, 98), (len(image) - 8, 2)):
        bad = bytearray(image)
        bad[at] = value
        q = tmp_path / "bad.tok"
        q.write_bytes(bytes(bad))
        tf = read_tok(q, TOK)
        tf.check_counts()
        with pytest.raises(TokFileError) as e:
            tf.verify()
        assert e.value.offset == 48 and "checksum mismatch: the header says CRC-32 " \
            f"0x{crc:08x}" in str(e.value)


def test_v2_without_checksum_still_reads(tmp_path):
    """Version-2 files written before FLAG_CHECKSUM (flag clear, bytes 48..63 zero)."""
    p = tmp_path / "old.tok"
    with TokWriter(p, TOK.merges_hash, version=2) as w:
        w.write([BOS, 97], 1, 1, counts=[2])
    old = bytearray(p.read_bytes())
    struct.pack_into("<H", old, 10, 0)
    struct.pack_into("<I", old, 48, 0)
    p.write_bytes(bytes(old))
    tf = read_tok(p, TOK)
    assert tf.checksum is None and tf.flags == 0
    assert "no checksum (written before FLAG_CHECKSUM)" in str(tf.verify())
    for flags, at, needle in ((0, 49, "reserved bytes 48..63 must be 0"),
                              (FLAG_CHECKSUM, 55, "reserved bytes 52..63 must be 0")):
        bad = bytearray(old)
        struct.pack_into("<H", bad, 10, flags)
        bad[at] = 1
        p.write_bytes(bytes(bad))
        with pytest.raises(TokFileError) as e:
            read_tok(p, TOK)
        assert e.value.offset == at and needle in str(e.value)


def test_verify_finds_ids_that_are_no_token(tmp_path):
    p = _v1(tmp_path / "i.tok", [BOS, 104, 500], 1, 2)       # vocab_size 274
    tf = read_tok(p, TOK)
    with pytest.raises(TokFileError) as e:
        tf.verify()
    assert e.value.offset == HEADER_SIZE + 4
    assert "id 500 at position 2 is not a token of asmbpe (vocab_size 274)" in str(e.value)
    assert "documents recounted" in str(read_tok(p).verify())   # no tokenizer: no id check


def test_verify_with_a_loaded_vocabulary(tmp_path):
    """Ids in a loaded vocabulary's gap are no token; a special that is also an ordinary
    token (a tokenizer.json's) may spell its bytes or none."""
    from harness.loaded import LoadedTokenizer
    from harness.vocab import Vocab

    tokens = [bytes([b]) for b in range(256)] + [b"ab", b"<|eot|>"]
    tok = LoadedTokenizer(Vocab(name="small", tokens=tokens, pretokenizer="gpt2",
                                specials={"<|eot|>": 257, "<|bos|>": 300}, merges=None,
                                whole_chunk=True))

    def tok_file(ids, nbytes, counts):
        p = tmp_path / "l.tok"
        with TokWriter(p, tok.merges_hash, version=2) as w:
            w.write(ids, len(counts), nbytes, counts=counts)
        return read_tok(p, tok)

    for nbytes in (3, 3 + 7):                 # <|eot|> as a delimiter (0 bytes) or text (7)
        tok_file([256, 97, 257], nbytes, [3]).verify()
    for nbytes in (2, 11):                    # outside the bounds
        with pytest.raises(TokFileError, match="the text tokens spell 3 to 10 bytes"):
            tok_file([256, 97, 257], nbytes, [3]).check_counts()
    with pytest.raises(TokFileError, match="id 280 at position 1 is not a token of small"):
        tok_file([97, 280], 2, [2]).verify()


def test_v2_chat_conversations_start_at_bos(tmp_path):
    p = tmp_path / "c.tok"
    with TokWriter(p, TOK.merges_hash, version=2, chat=True) as w:
        w.write([BOS, 97, BOS, 98], 2, 2, counts=[1, 3])     # the 2nd starts at 97
    with pytest.raises(TokFileError) as e:
        read_tok(p).check_counts()
    assert e.value.offset == HEADER_SIZE + 8 + 8             # index entry 1
    assert f"conversation 1 starts at token 1, which is not <|bos|> (id {BOS})" in str(e.value)


@pytest.mark.parametrize("version", [1, 2])
def test_public_reader(tmp_path, version):
    """harness.read_tok without a tokenizer: len, tf[k] (a read-only view into the
    memmap), iteration, dtype."""
    import harness

    p = _encoded(tmp_path, version)
    tf = harness.read_tok(p)
    assert isinstance(tf, harness.TokFile) and isinstance(tf.tokens, np.memmap)
    assert tf.dtype == np.dtype("<u2") and len(tf) == 3
    want = [d.tolist() for d in TOK.encode_batch(["abcab", "", "ba bab"], bos=True)]
    assert [d.tolist() for d in tf] == want
    assert [tf[k].tolist() for k in range(3)] == want and tf[-1].tolist() == want[2]
    doc = tf[2]
    assert np.shares_memory(doc, tf.tokens) and not doc.flags.writeable
    with pytest.raises(IndexError, match="document 3 out of range"):
        tf[3]
    # the nanoGPT idiom with the header skipped (README)
    raw = np.memmap(p, dtype=np.uint16, mode="r", offset=64, shape=(tf.n_tokens,))
    assert raw.tolist() == tf.tokens.tolist()


def test_stats_verify(tmp_path):
    from cli_util import invoke, one_line_error

    tok_path = tmp_path / "t.bin"
    TOK.save(tok_path)
    p = _encoded(tmp_path, 2)
    r = invoke("stats", "--verify", p, "-t", tok_path)
    assert r.exit_code == 0, r.output
    assert r.stdout.startswith(f"verified: {p}: 10 tokens, 3 documents, 11 source bytes; "
                               "CRC-32 0x")
    bad = bytearray(p.read_bytes())
    bad[HEADER_SIZE + 2] ^= 1                                 # a token: 97 -> 96
    p.write_bytes(bytes(bad))
    one_line_error(invoke("stats", "--verify", p, "-t", tok_path),
                   f"{p}: checksum mismatch")
    text = tmp_path / "a.txt"
    text.write_text("abc")
    one_line_error(invoke("stats", "--verify", text, "-t", tok_path),
                   "--verify checks .tok files")
