"""Reading inputs (harness.corpora, issue 23): compressed files that end early, devices,
standard input as `-`, --column / --field / --lines (harness.corpora.ReadOptions) and
the count of skipped Parquet nulls, through the Python API and the `asmbpe` commands.
Every file is made here (no download, no shared corpora)."""
from __future__ import annotations

import gzip
import io
import json
import os
import struct
import tempfile
import threading
from pathlib import Path

import pytest

from cli_util import invoke, kjv_tokenizer
from cli_util import one_line_error as _one_line_error

from harness.corpora import (InputError, NullsSkipped, ReadOptions, StdinInput, check_file,
                             iter_batches, iter_conversations, iter_documents, read_documents,
                             resolve_inputs)
from harness.tokenizer import Tokenizer
from harness.tokfile import read_tok

zstandard = pytest.importorskip("zstandard")

ROOT = Path(__file__).resolve().parents[1]
KJV = ROOT / "datasets" / "kjv.txt"
LINES = [f"line {i}: and God saw the light, that it was good" for i in range(400)]
TEXT = ("\n".join(LINES) + "\n").encode()
DOCS = [line.encode() for line in LINES]
ENDS_EARLY = "zstd stream ends early (truncated file?)"


def one_line_error(result, needle: str) -> None:
    _one_line_error(result, needle, progress_ok=True)     # progress lines may precede


@pytest.fixture(scope="module")
def tok_path(tmp_path_factory) -> Path:
    """A small tokenizer (vocab 300) trained on the start of the KJV."""
    return kjv_tokenizer(tmp_path_factory.mktemp("tok"), 20_000, 300)


def zstd_frames(data: bytes, n: int = 3, **kw) -> bytes:
    """`data` as n zstd frames, one after another."""
    step = -(-len(data) // n)
    c = zstandard.ZstdCompressor(**kw)
    return b"".join(c.compress(data[i:i + step]) for i in range(0, len(data), step))


def jsonl(docs, field: str = "text") -> bytes:
    return b"".join(json.dumps({field: d.decode(), "id": k}).encode() + b"\n"
                    for k, d in enumerate(docs))


def write(path: Path, data: bytes) -> Path:
    path.write_bytes(data)
    return path


def tok_docs(path: Path, tok_path: Path) -> int:
    return read_tok(path, Tokenizer.load(tok_path)).n_documents


# ------------------------------------------------------------ compressed streams

def test_zstd_multi_frame_read_whole(tmp_path):
    """Several frames, a checksum, a skippable frame: all read, nothing refused."""
    skippable = struct.pack("<II", 0x184D2A50, 3) + b"abc"
    data = skippable + zstd_frames(TEXT, write_checksum=True) + skippable
    p = write(tmp_path / "a.txt.zst", data)
    assert list(iter_documents(p)) == [TEXT]
    q = write(tmp_path / "a.jsonl.zst", zstd_frames(jsonl(DOCS)))
    assert list(iter_documents(q)) == DOCS


@pytest.mark.parametrize("name", ["t.txt.zst", "t.jsonl.zst", "t.txt.zstd"])
@pytest.mark.parametrize("cut", [0.3, 0.7, -1])
def test_truncated_zstd_refused_by_iter_documents(tmp_path, name, cut):
    data = zstd_frames(jsonl(DOCS) if "jsonl" in name else TEXT)
    end = len(data) - 1 if cut == -1 else int(len(data) * cut)
    p = write(tmp_path / name, data[:end])
    with pytest.raises(InputError, match=r"zstd stream ends early \(truncated file\?\)") as e:
        list(iter_documents(p))
    assert str(p) in str(e.value)


def test_truncated_zstd_refused_at_every_cut(tmp_path):
    """A stream cut anywhere but between two frames is refused; whole frames are read."""
    payloads = [b"x%d " % k * 40 + bytes(range(60)) for k in range(3)]
    frames = [zstandard.ZstdCompressor(write_checksum=bool(k % 2)).compress(x)
              for k, x in enumerate(payloads)]
    data = b"".join(frames)
    bounds = {sum(map(len, frames[:k])): b"".join(payloads[:k]) for k in range(1, 4)}
    for cut in range(1, len(data) + 1):
        p = write(tmp_path / "c.txt.zst", data[:cut])
        if cut in bounds:
            assert list(iter_documents(p)) == [bounds[cut]]
        else:
            with pytest.raises(InputError, match="zstd"):
                list(iter_documents(p))


def test_garbage_zst_refused(tmp_path):
    p = write(tmp_path / "g.txt.zst", os.urandom(3000))
    with pytest.raises(InputError, match="not a valid zstd file"):
        list(iter_documents(p))
    # zstd data followed by garbage
    q = write(tmp_path / "h.txt.zst", zstd_frames(TEXT, 1) + b"this is not zstd")
    with pytest.raises(InputError, match="not a valid zstd file"):
        list(iter_documents(q))


@pytest.mark.parametrize("name", ["t.txt.gz", "t.jsonl.gz"])
def test_truncated_gzip_refused(tmp_path, name):
    data = gzip.compress(jsonl(DOCS) if "jsonl" in name else TEXT)
    p = write(tmp_path / name, data[:len(data) // 2])
    with pytest.raises(InputError, match="gzip stream ends early"):
        list(iter_documents(p))


@pytest.mark.parametrize("cmd", ["encode", "train", "stats"])
def test_truncated_zstd_refused_by_the_commands(tmp_path, tok_path, cmd):
    data = zstd_frames(TEXT)
    p = write(tmp_path / "t.txt.zst", data[:len(data) * 2 // 3])
    out = tmp_path / "out.bin"
    args = {"encode": ["encode", p, "-t", tok_path, "-o", out, "-q"],
            "train": ["train", p, "-o", out, "--vocab-size", "300", "-q"],
            "stats": ["stats", p, "-t", tok_path]}[cmd]
    r = invoke(*args)
    one_line_error(r, f"{p}: {ENDS_EARLY}")
    assert not out.exists()


# ----------------------------------------------------------------------- devices

@pytest.mark.parametrize("dev", ["/dev/zero", "/dev/urandom"])
def test_character_device_refused(tmp_path, tok_path, dev):
    if not os.path.exists(dev):
        pytest.skip(f"no {dev}")
    with pytest.raises(InputError, match=r"not a regular file \(a character device\)"):
        check_file(dev)
    r = invoke("encode", dev, "-t", tok_path, "-o", tmp_path / "o.tok", "-q")
    one_line_error(r, f"{dev}: not a regular file (a character device)")
    r = invoke("train", dev, "-o", tmp_path / "t.bin", "-q")
    one_line_error(r, f"{dev}: not a regular file (a character device)")


def test_fifo_is_streamed(tmp_path):
    fifo = tmp_path / "docs.jsonl"
    os.mkfifo(fifo)
    assert check_file(fifo) == fifo

    def feed():
        with open(fifo, "wb") as f:
            f.write(jsonl(DOCS))

    t = threading.Thread(target=feed)
    t.start()
    try:
        assert list(iter_documents(fifo)) == DOCS
    finally:
        t.join(10)


# ------------------------------------------------------------------ standard input

def stdin_variants():
    import pyarrow as pa
    import pyarrow.parquet as pq

    buf = io.BytesIO()
    pq.write_table(pa.table({"text": [d.decode() for d in DOCS]}), buf)
    return {"text": TEXT, "jsonl": jsonl(DOCS), "jsonl.gz": gzip.compress(jsonl(DOCS)),
            "txt.zst": zstd_frames(TEXT), "jsonl.zst": zstd_frames(jsonl(DOCS)),
            "parquet": buf.getvalue(), "blank-jsonl": b"\n \n" + jsonl(DOCS)}


@pytest.mark.parametrize("kind", ["text", "jsonl", "jsonl.gz", "txt.zst", "jsonl.zst",
                                  "parquet", "blank-jsonl"])
def test_stdin_format_told_by_its_bytes(kind):
    data = stdin_variants()[kind]
    src = StdinInput(io.BytesIO(data))
    fmt = "text" if kind in ("text", "txt.zst") else kind.split(".")[0].replace("blank-", "")
    assert src.format == fmt
    want = [TEXT] if fmt == "text" else DOCS
    assert list(iter_documents(src)) == want
    if fmt != "parquet":                        # a stream: read once
        with pytest.raises(InputError, match="<stdin>: standard input can be read only once"):
            list(iter_documents(src))


@pytest.mark.parametrize("data", [b"{\n  int x = 1;\n}\n", b"{ not json }\nmore\n",
                                  b"{}}\n", b"{" + b"x" * 70000])
def test_stdin_text_that_starts_with_a_brace_stays_text(data):
    """Code (or any text) whose first byte is "{" is read as text, not refused as bad
    JSONL: JSONL needs a first line that is a JSON object."""
    src = StdinInput(io.BytesIO(data))
    assert src.format == "text"
    assert list(iter_documents(src)) == [data]


def test_stdin_parquet_spool_removed(tmp_path, monkeypatch):
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    src = StdinInput(io.BytesIO(stdin_variants()["parquet"]))
    spool = Path(os.fspath(src))
    assert spool.parent == tmp_path and spool.suffix == ".parquet"
    assert [len(b) for b in iter_batches([src])] == [len(DOCS)]
    del src
    assert not spool.exists()


@pytest.mark.parametrize("kind", ["text", "jsonl.gz", "txt.zst", "parquet"])
def test_encode_stdin_same_as_file(tmp_path, tok_path, kind, monkeypatch):
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    data = stdin_variants()[kind]
    name = {"text": "in.txt", "parquet": "in.parquet"}.get(kind, f"in.{kind}")
    f = write(tmp_path / name, data)
    r = invoke("encode", f, "-t", tok_path, "-o", tmp_path / "file.tok", "-q")
    assert r.exit_code == 0, r.output
    r = invoke("encode", "-", "-t", tok_path, "-o", tmp_path / "stdin.tok", "-q", input=data)
    assert r.exit_code == 0, r.output
    assert (tmp_path / "file.tok").read_bytes() == (tmp_path / "stdin.tok").read_bytes()
    assert not list(tmp_path.glob("asmbpe-stdin-*"))         # the Parquet spool is gone


def test_train_and_stats_read_stdin(tmp_path, tok_path):
    f = write(tmp_path / "in.jsonl", jsonl(DOCS))
    for src, kw in ((f, {}), ("-", {"input": f.read_bytes()})):
        out = tmp_path / f"tok-{src == '-'}.bin"
        r = invoke("train", src, "-o", out, "--vocab-size", "300", "-q", **kw)
        assert r.exit_code == 0, r.output
    assert (tmp_path / "tok-True.bin").read_bytes() == (tmp_path / "tok-False.bin").read_bytes()
    a = invoke("stats", f, "-t", tok_path)
    b = invoke("stats", "-", "-t", tok_path, input=f.read_bytes())
    assert a.exit_code == b.exit_code == 0, b.output
    assert a.output == b.output and "documents        400" in b.output


def test_split_reads_stdin(tmp_path):
    f = write(tmp_path / "a.txt", b"Hello world, 123!")
    a = invoke("split", f)
    b = invoke("split", "-", input=f.read_bytes())
    assert a.exit_code == b.exit_code == 0
    assert a.stdout_bytes == b.stdout_bytes
    assert a.stdout_bytes.startswith(b"Hello| world|,|")


def test_stdin_errors(tmp_path, tok_path):
    out = tmp_path / "o.tok"
    enc = ("encode", "-t", tok_path, "-o", out, "-q")
    one_line_error(invoke(*enc, "-", input=b""), "<stdin>: is empty")
    one_line_error(invoke(*enc, "-", "-", input=TEXT), "standard input can be given only once")
    data = zstd_frames(TEXT)
    one_line_error(invoke(*enc, "-", input=data[:len(data) // 2]), f"<stdin>: {ENDS_EARLY}")
    one_line_error(invoke(*enc, "-", input=b"\x1f\x8b" + os.urandom(100)),
                   "<stdin>: not a valid gzip file")
    one_line_error(invoke(*enc, "-", "--shards", input=TEXT),
                   "standard input cannot be read with --shards")
    one_line_error(invoke(*enc, "-", "--cluster", "local:1", input=TEXT),
                   "standard input cannot be read with --cluster")
    one_line_error(invoke("train", "-", "-o", tmp_path / "t.bin", "--cluster", "local:1",
                          input=TEXT), "standard input cannot be read with --cluster")
    assert not out.exists()
    with pytest.raises(InputError, match="only once"):
        resolve_inputs(["-", "-"], io.BytesIO(TEXT))


# ---------------------------------------------------- --column / --field / --lines

def test_read_options_python_api(tmp_path):
    txt = write(tmp_path / "a.txt", b"one\r\n\ntwo\nthree")
    assert list(iter_documents(txt, read_options=ReadOptions(lines=True))) == \
        [b"one", b"two", b"three"]
    assert list(iter_documents(txt, separator="")) == [b"one\r\n", b"two\nthree"]
    assert read_documents(txt, read_options=ReadOptions(separator="")) == \
        [b"one\r\n", b"two\nthree"]
    js = write(tmp_path / "a.jsonl.zst", zstd_frames(jsonl(DOCS, "body")))
    assert list(iter_documents(js, read_options=ReadOptions(field="body"))) == DOCS
    with pytest.raises(InputError, match=r"a.jsonl.zst:1: no string 'text' field "
                                         r"\(fields: body, id\)"):
        list(iter_documents(js))
    with pytest.raises(ValueError, match="together"):
        ReadOptions(separator="", lines=True)
    with pytest.raises(ValueError, match="not both"):
        list(iter_batches(txt, separator="", read_options=ReadOptions()))
    with pytest.raises(ValueError, match="one line"):
        iter_documents(txt, separator="a\nb")


def test_parquet_column(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    p = tmp_path / "b.parquet"
    pq.write_table(pa.table({"body": [d.decode() for d in DOCS], "id": range(len(DOCS))}), p)
    assert list(iter_documents(p, read_options=ReadOptions(column="body"))) == DOCS
    assert sum(map(len, iter_batches(p, read_options=ReadOptions(column="body")))) == \
        len(DOCS)
    with pytest.raises(InputError, match=r"no 'text' column \(columns: body, id\)"):
        list(iter_documents(p))
    with pytest.raises(InputError, match=r"no 'nope' column \(columns: body, id\)"):
        list(iter_documents(p, read_options=ReadOptions(column="nope")))


def test_chat_column_and_field(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    conv = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]
    p = tmp_path / "c.parquet"
    pq.write_table(pa.table({"conv": [conv, conv]}), p)
    assert list(iter_conversations(p, read_options=ReadOptions(column="conv"))) == [conv] * 2
    with pytest.raises(InputError, match=r"no 'messages' column \(columns: conv\)"):
        list(iter_conversations(p))
    j = write(tmp_path / "c.jsonl", json.dumps({"conv": conv}).encode() + b"\n")
    assert list(iter_conversations(j, read_options=ReadOptions(field="conv"))) == [conv]
    with pytest.raises(InputError, match=r"c.jsonl:1: no 'messages' list \(fields: conv\)"):
        list(iter_conversations(j))


@pytest.mark.parametrize("cmd", ["encode", "train", "stats"])
def test_commands_take_column_field_lines(tmp_path, tok_path, cmd):
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq_file = tmp_path / "b.parquet"
    pq.write_table(pa.table({"body": [d.decode() for d in DOCS], "id": range(len(DOCS))}),
                   pq_file)
    js = write(tmp_path / "b.jsonl", jsonl(DOCS, "body"))
    txt = write(tmp_path / "b.txt", TEXT)
    ref = write(tmp_path / "ref.jsonl", jsonl(DOCS))
    out = tmp_path / "out"

    def run(*args):
        if cmd == "encode":
            return invoke("encode", *args, "-t", tok_path, "-o", out, "-q")
        if cmd == "train":
            return invoke("train", *args, "-o", out, "--vocab-size", "300", "-q")
        return invoke("stats", *args, "-t", tok_path)

    r = run(ref)
    assert r.exit_code == 0, r.output
    want = out.read_bytes() if cmd != "stats" else r.output
    for args in ([pq_file, "--column", "body"], [js, "--field", "body"], [txt, "--lines"]):
        r = run(*args)
        assert r.exit_code == 0, r.output
        if cmd == "encode":
            assert out.read_bytes() == want
        elif cmd == "stats":
            assert r.output == want
        elif cmd == "train":
            assert out.read_bytes() == want
    one_line_error(run(pq_file), f"{pq_file}: no 'text' column (columns: body, id)")
    one_line_error(run(pq_file, "--column", "nope"),
                   f"{pq_file}: no 'nope' column (columns: body, id)")
    one_line_error(run(js), f"{js}:1: no string 'text' field (fields: body, id)")
    one_line_error(run(txt, "--lines", "--separator", ""),
                   "--lines and --separator cannot be used together")


def test_lines_with_memory_budget(tmp_path, tok_path):
    """--lines streams a plain text file larger than a batch (no --separator needed)."""
    big = write(tmp_path / "big.txt", TEXT * 6000)            # about 18 MB
    out = tmp_path / "o.tok"
    r = invoke("encode", big, "--lines", "--memory", "64M", "-t", tok_path, "-o", out, "-q")
    assert r.exit_code == 0, r.output
    assert tok_docs(out, tok_path) == len(DOCS) * 6000


def test_sharded_encode_reads_with_options(tmp_path, tok_path):
    from harness.distributed import count_shard, encode_sharded

    txt = write(tmp_path / "a.txt", TEXT)
    s = encode_sharded(Tokenizer.load(tok_path), [txt], tmp_path / "shards",
                       read_options=ReadOptions(lines=True))
    assert s.documents == len(DOCS)
    r = invoke("encode", txt, "--lines", "--shards", "-t", tok_path, "-o", tmp_path / "sh2",
               "-q")
    assert r.exit_code == 0, r.output
    manifest = json.loads((tmp_path / "sh2" / "manifest.json").read_text())
    assert sum(sh["documents"] for sh in manifest["shards"]) == len(DOCS)
    assert count_shard(str(txt), read_options=ReadOptions(lines=True))[4] == len(DOCS)


# --------------------------------------------------------------- Parquet nulls

@pytest.fixture
def with_nulls(tmp_path) -> Path:
    import pyarrow as pa
    import pyarrow.parquet as pq

    p = tmp_path / "n.parquet"
    texts = [d.decode() for d in DOCS]
    pq.write_table(pa.table({"text": texts[:10] + [None, None] + texts[10:] + [None]}), p,
                   row_group_size=100)
    return p


def test_nulls_counted_python_api(with_nulls):
    with pytest.warns(NullsSkipped) as caught:
        assert list(iter_documents(with_nulls)) == DOCS
    (w,) = [c.message for c in caught if isinstance(c.message, NullsSkipped)]
    assert (w.count, w.column, Path(w.path)) == (3, "text", with_nulls)
    assert str(w) == f"{with_nulls}: 3 null 'text' value(s) skipped"
    with pytest.warns(NullsSkipped, match="3 null 'text'"):
        assert sum(len(b) for b in iter_batches(with_nulls)) == len(DOCS)


@pytest.mark.parametrize("cmd", ["encode", "train", "stats", "shards"])
def test_nulls_noted_by_the_commands(tmp_path, tok_path, with_nulls, cmd):
    args = {"encode": ["encode", with_nulls, "-t", tok_path, "-o", tmp_path / "o.tok"],
            "train": ["train", with_nulls, "-o", tmp_path / "t.bin", "--vocab-size", "300"],
            "stats": ["stats", with_nulls, "-t", tok_path],
            "shards": ["encode", with_nulls, "-t", tok_path, "-o", tmp_path / "sh",
                       "--shards"]}[cmd]
    r = invoke(*args)
    assert r.exit_code == 0, r.output
    note = f"asmbpe: note: {with_nulls}: 3 null 'text' value(s) skipped"
    assert r.stderr.splitlines().count(note) == 1, r.stderr
    assert "NullsSkipped" not in r.stderr                   # no Python warning format
    r = invoke(*args, "-q") if cmd != "stats" else r
    assert note in r.stderr
    if cmd == "shards":
        return
    r = invoke(*args[:1], "-", *args[2:], input=with_nulls.read_bytes())
    assert r.exit_code == 0, r.output
    assert "asmbpe: note: <stdin>: 3 null 'text' value(s) skipped" in r.stderr
