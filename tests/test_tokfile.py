"""harness.tokfile: the .tok format (SPEC §7) written atomically and read back, every
malformed file refused with its byte offset, a mismatched tokenizer refused."""
from __future__ import annotations

import struct

import numpy as np
import pytest

from harness.tokenizer import Tokenizer
from harness.tokfile import (FLAG_CHAT, HEADER_SIZE, MAGIC, MASKBIT, TokFileError, TokWriter,
                             is_tok_file, read_tok)

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
    # without a tokenizer: header and tokens, no hash check, no documents()
    assert read_tok(p).n_tokens == 6
    with pytest.raises(ValueError, match="needs the tokenizer"):
        next(read_tok(p).documents())


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
