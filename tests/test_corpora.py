"""harness.corpora: one streaming reader per format (iter_documents), batches
(iter_batches), read_documents built on them, estimate_bytes, and errors that name the
file and the line or row."""
from __future__ import annotations

import gzip
import json
import random
from pathlib import Path

import pytest

from harness.corpora import (InputError, estimate_bytes, file_format, iter_batches,
                             iter_documents, read_documents)

DOCS = ["first", "sécond\nwith a newline", "", "third 😀", "x" * 5000]


def jsonl_bytes(docs) -> bytes:
    return "".join(json.dumps({"text": d}) + "\n" for d in docs).encode()


def zstd_compress(data: bytes) -> bytes:
    zstandard = pytest.importorskip("zstandard", reason="zstandard is not installed")
    return zstandard.ZstdCompressor().compress(data)


def test_file_format():
    assert file_format("a.parquet") == ("parquet", None)
    assert file_format("a.JSONL") == ("jsonl", None)
    assert file_format("a.jsonl.gz") == ("jsonl", "gzip")
    assert file_format("a.ndjson.zst") == ("jsonl", "zstd")
    assert file_format("a.txt.gz") == ("text", "gzip")
    assert file_format("a.txt") == ("text", None)
    assert file_format("README") == ("text", None)


@pytest.mark.parametrize("suffix", ["jsonl", "jsonl.gz", "jsonl.zst", "ndjson"])
def test_jsonl_formats(tmp_path, suffix):
    data = jsonl_bytes(DOCS) + b"\n  \n"                       # blank lines are skipped
    if suffix.endswith(".gz"):
        data = gzip.compress(data)
    elif suffix.endswith(".zst"):
        data = zstd_compress(data)
    p = tmp_path / f"d.{suffix}"
    p.write_bytes(data)
    assert list(iter_documents(p)) == [d.encode() for d in DOCS]
    assert read_documents(p) == [d.encode() for d in DOCS]


def test_zstd_multiple_frames(tmp_path):
    p = tmp_path / "d.jsonl.zst"
    p.write_bytes(zstd_compress(jsonl_bytes(DOCS[:2])) + zstd_compress(jsonl_bytes(DOCS[2:])))
    assert list(iter_documents(p)) == [d.encode() for d in DOCS]


def test_zstd_missing_module(tmp_path, monkeypatch):
    import builtins

    real = builtins.__import__

    def no_zstd(name, *a, **kw):
        if name == "zstandard":
            raise ImportError(name)
        return real(name, *a, **kw)

    p = tmp_path / "d.jsonl.zst"
    p.write_bytes(b"\x28\xb5\x2f\xfd whatever")
    monkeypatch.setattr(builtins, "__import__", no_zstd)
    with pytest.raises(InputError, match=r"d\.jsonl\.zst: reading \.zst files needs the "
                                         r"zstandard module"):
        list(iter_documents(p))


def test_plain_text(tmp_path):
    raw = b"one\n\ntwo\xff\r\n---\nthree\n---\n---\nfour"
    p = tmp_path / "a.txt"
    p.write_bytes(raw)
    assert list(iter_documents(p)) == [raw]                    # one document, as it is
    assert list(iter_documents(p, separator="---")) == [b"one\n\ntwo\xff\r\n", b"three\n",
                                                          b"four"]
    assert list(iter_documents(p, separator="")) == [b"one\n", b"two\xff\r\n---\nthree\n"
                                                     b"---\n---\nfour"]
    g = tmp_path / "a.txt.gz"
    g.write_bytes(gzip.compress(raw))
    assert list(iter_documents(g)) == [raw]
    assert list(iter_documents(g, separator=b"---"))[1] == b"three\n"
    with pytest.raises(ValueError, match="one line"):
        iter_documents(p, separator="a\nb")


def test_plain_text_zst(tmp_path):
    p = tmp_path / "a.txt.zst"
    p.write_bytes(zstd_compress(b"hello\n--\nworld\n"))
    assert list(iter_documents(p)) == [b"hello\n--\nworld\n"]
    assert list(iter_documents(p, separator="--")) == [b"hello\n", b"world\n"]


@pytest.mark.filterwarnings("ignore::harness.corpora.NullsSkipped")   # nulls on purpose; tests/test_inputs.py checks the note
def test_parquet(tmp_path):
    pa = pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq

    p = tmp_path / "c.parquet"
    pq.write_table(pa.table({"text": ["x" * 10, None, "yé", "", "z"], "n": [1, 2, 3, 4, 5]}),
                   p, row_group_size=2)
    assert list(iter_documents(p)) == [b"x" * 10, "yé".encode(), b"", b"z"]
    assert list(iter_documents(p, batch_rows=1)) == [b"x" * 10, "yé".encode(), b"", b"z"]
    assert estimate_bytes(p) > 0
    b = tmp_path / "b.parquet"
    pq.write_table(pa.table({"text": pa.array([b"\xff\x00", b"ok"], pa.binary())}), b)
    assert list(iter_documents(b)) == [b"\xff\x00", b"ok"]
    n = tmp_path / "n.parquet"
    pq.write_table(pa.table({"text": [1, 2]}), n)
    with pytest.raises(InputError, match="column 'text' holds int64"):
        list(iter_documents(n))


def test_parquet_errors(tmp_path):
    pytest.importorskip("pyarrow")
    p = tmp_path / "bad.parquet"
    p.write_bytes(b"PAR1 this is not parquet at all PAR1")
    with pytest.raises(InputError, match="bad.parquet: cannot read as Parquet"):
        list(iter_documents(p))
    z = tmp_path / "x.parquet.gz"
    z.write_bytes(gzip.compress(b"x"))
    with pytest.raises(InputError, match="compressed Parquet"):
        iter_documents(z)


@pytest.mark.parametrize("content, needle", [
    (b'{"text": "ok"}\n{"text": 1}\n', "x.jsonl:2: no string 'text' field"),
    (b'{"text": "ok"}\n\n[1, 2]\n', "x.jsonl:3: no string 'text' field"),
    (b'{"text": "ok"}\n{"text": "a\xff"}\n', "x.jsonl:2: not valid JSON"),
    (b'{"text": "ok"}\n{"text": "a"\n', "x.jsonl:2: not valid JSON"),
])
def test_jsonl_errors_name_the_line(tmp_path, content, needle):
    p = tmp_path / "x.jsonl"
    p.write_bytes(content)
    with pytest.raises(InputError) as e:
        list(iter_documents(p))
    assert needle in str(e.value) and "\n" not in str(e.value)


def test_compressed_errors(tmp_path):
    p = tmp_path / "x.jsonl.gz"
    p.write_bytes(b"this is not gzip at all\n" * 10)
    with pytest.raises(InputError, match=r"x\.jsonl\.gz:1: not a valid gzip file"):
        list(iter_documents(p))
    t = tmp_path / "t.jsonl.gz"
    t.write_bytes(gzip.compress(jsonl_bytes(DOCS * 200))[:-30])
    with pytest.raises(InputError, match=r"t\.jsonl\.gz:\d+: gzip stream ends early"):
        list(iter_documents(t))
    tx = tmp_path / "t.txt.gz"
    tx.write_bytes(b"garbage")
    with pytest.raises(InputError, match=r"t\.txt\.gz: not a valid gzip file"):
        list(iter_documents(tx))
    z = tmp_path / "x.jsonl.zst"
    z.write_bytes(b"not zstd either\n")
    pytest.importorskip("zstandard")
    with pytest.raises(InputError, match=r"x\.jsonl\.zst:1: not a valid zstd file"):
        list(iter_documents(z))


def test_iter_batches(tmp_path):
    a = tmp_path / "a.jsonl"
    a.write_bytes(jsonl_bytes(["a" * 100] * 10))
    b = tmp_path / "b.txt"
    b.write_bytes(b"b" * 1000)
    batches = list(iter_batches([a, b], batch_bytes=250))
    assert [len(x) for x in batches] == [3, 3, 3, 2]          # a batch may span files
    assert [d for x in batches for d in x] == [b"a" * 100] * 10 + [b"b" * 1000]
    assert list(iter_batches(a)) == [[b"a" * 100] * 10]                     # one path
    assert sum(map(len, iter_batches([a, b], limit_bytes=350))) == 4
    empty = tmp_path / "e.jsonl"
    empty.write_bytes(b"\n\n")
    with pytest.raises(InputError, match="e.jsonl: is empty"):
        list(iter_batches([a, empty]))
    with pytest.raises(InputError, match="no such file"):
        iter_batches([a, tmp_path / "missing"])                          # checked at once
    with pytest.raises(InputError, match="no input files"):
        iter_batches([])


def test_estimate_bytes(tmp_path):
    a = tmp_path / "a.txt"
    a.write_bytes(b"x" * 1234)
    g = tmp_path / "a.txt.gz"
    g.write_bytes(gzip.compress(b"y" * 5000))
    assert estimate_bytes([a, g]) == 1234 + 5000
    z = tmp_path / "a.txt.zst"
    z.write_bytes(zstd_compress(b"z" * 777))
    assert estimate_bytes(z) == 777


def test_parquet_batches_are_text_batches_with_the_same_documents(corpus_files):
    """iter_batches hands Parquet text on as TextBatch blocks (no Python object per
    document): the same documents, batch boundaries and limit as document by document."""
    from harness.buffers import TextBatch
    from harness.corpora import iter_batches, iter_documents, read_documents
    path = min(corpus_files, key=lambda p: p.stat().st_size)
    docs = list(iter_documents(path))
    batches = list(iter_batches(path, 1 << 20))
    assert all(isinstance(b, TextBatch) for b in batches)
    assert [d for b in batches for d in b] == docs
    for b in batches[:-1]:                  # each batch ends with the doc reaching 1 MB
        sizes = [len(d) for d in b]
        assert sum(sizes) - sizes[-1] < 1 << 20 <= sum(sizes)
        assert b.nbytes == sum(sizes) and len(b.ends) == len(b)
    limited = list(iter_batches(path, 1 << 20, limit_bytes=3 << 20))
    assert [d for b in limited for d in b] == read_documents(path, 3 << 20)
    kjv = Path(__file__).resolve().parent.parent / "datasets" / "kjv.txt"
    mixed = list(iter_batches([kjv, path], 1 << 20))
    assert sum(len(b) for b in mixed) == 1 + len(docs)


def test_arrow_memory_kept_is_scoped():
    """The commands keep Arrow's freed memory only within arrow_memory_kept() (its
    system allocator set once pyarrow is used within); the release that bounded
    streaming and the distributed workers rely on comes back on exit, after an error
    too."""
    import pyarrow as pa

    from harness import corpora

    pool = pa.default_memory_pool().backend_name
    assert corpora.RELEASE_ARROW_MEMORY is True
    with corpora.arrow_memory_kept():
        assert corpora.RELEASE_ARROW_MEMORY is False
        assert pa.default_memory_pool().backend_name == pool
        corpora._arrow()
        assert pa.default_memory_pool().backend_name == "system"
    assert corpora.RELEASE_ARROW_MEMORY is True
    assert pa.default_memory_pool().backend_name == pool
    try:
        with corpora.arrow_memory_kept():
            raise RuntimeError("boom")
    except RuntimeError:
        pass
    assert corpora.RELEASE_ARROW_MEMORY is True
    assert pa.default_memory_pool().backend_name == pool


def test_parallel_row_groups_stream_the_one_handed_on():
    """_in_order (several Parquet readers): the row group being handed on comes out
    item by item as its thread reads it (its second item is read only once the first
    is out), the later ones in order after it, and an error after the items before it."""
    import threading

    from harness import corpora

    first_out = threading.Event()

    def read(g):
        yield g, 0
        if g == 0:
            assert first_out.wait(10), "group 0 was held back until it was read whole"
        yield g, 1
        if g == 2:
            raise ValueError("group 2 is damaged")

    out = []
    with pytest.raises(ValueError, match="group 2 is damaged"):
        for item in corpora._in_order(read, 4, 2):
            out.append(item)
            if item == (0, 0):
                first_out.set()
    assert out == [(0, 0), (0, 1), (1, 0), (1, 1), (2, 0), (2, 1)]


@pytest.mark.filterwarnings("ignore::harness.corpora.NullsSkipped")   # nulls on purpose; tests/test_inputs.py checks the note
@pytest.mark.parametrize("kept, readers", [(False, 1), (True, 1), (True, 2), (True, 3)])
def test_parquet_row_groups_read_whole_or_streamed_give_the_same_documents(tmp_path, kept,
                                                                           readers):
    """Without a memory budget (arrow_memory_kept) each row group is streamed batch by
    batch, by one reader or several at once; with one it is read whole and cut: the
    same documents, batches and conversations in the same order every way, and a
    damaged row group names its first row after the documents before it."""
    import contextlib

    pa = pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq

    from harness import corpora

    texts = [None if i % 7 == 3 else f"doc {i} " + "é" * (i % 5) for i in range(23)]
    p = tmp_path / "g.parquet"
    pq.write_table(pa.table({"text": texts}), p, row_group_size=5)
    msgs = [[{"role": "user", "content": f"q{i}"}, {"role": "assistant", "content": f"a{i}"}]
            for i in range(9)]
    c = tmp_path / "c.parquet"
    pq.write_table(pa.table({"messages": msgs}), c, row_group_size=4)
    want = [t.encode() for t in texts if t is not None]
    with corpora.arrow_memory_kept(readers) if kept else contextlib.nullcontext():
        for rows in (1, 3, 256):
            assert list(iter_documents(p, batch_rows=rows)) == want
        assert [d for b in iter_batches(p, 40) for d in b] == want
        assert [len(b) for b in iter_batches(p, 40)] == [5, 4, 4, 4, 3]
        first = [d for b in iter_batches(p, 40, limit_bytes=50) for d in b]
        assert first == want[:len(first)] and 50 <= sum(map(len, first)) < 70
        packed = list(iter_batches(p, 40, packed=True))     # the same cuts, laid out
        assert [_unpacked(b) for b in packed] == [list(b) for b in iter_batches(p, 40)]
        assert [_unpacked(b) for b in iter_batches(p, 40, limit_bytes=50, packed=True)] \
            == [list(b) for b in iter_batches(p, 40, limit_bytes=50)]
        it = iter_documents(p)                           # left early: readers stop
        assert next(it) == want[0]
        it.close()
        assert [[m["content"] for m in conv] for conv in corpora.iter_conversations(c)] == \
            [[f"q{i}", f"a{i}"] for i in range(9)]
        bad = tmp_path / "bad.parquet"
        noise = random.Random(5)
        pq.write_table(pa.table({"text": [bytes(noise.getrandbits(8) for _ in range(3000)).hex()
                                          for _ in range(10)]}),
                       bad, row_group_size=5, compression="zstd", use_dictionary=False)
        raw = bytearray(bad.read_bytes())
        second = pq.ParquetFile(bad).metadata.row_group(1).column(0)
        middle = second.data_page_offset + second.total_compressed_size // 2
        raw[middle:middle + 64] = bytes(64)                # inside its compressed page
        bad.write_bytes(bytes(raw))
        seen = []
        with pytest.raises(InputError, match=r"bad.parquet: row 5: cannot read as Parquet"):
            for doc in iter_documents(bad):
                seen.append(doc)
        assert len(seen) == 5                            # the first row group's
        seen = []
        with pytest.raises(InputError, match=r"bad.parquet: row 5: cannot read as Parquet"):
            for b in iter_batches(bad, 3000, packed=True):
                seen += _unpacked(b)
        assert len(seen) == 5                            # (a batch per document)
        assert corpora.PARQUET_READERS == (readers if kept else 1)
    assert corpora.PARQUET_READERS == 1


@pytest.mark.parametrize("depth", [1, 3, 8])
def test_prefetch_yields_everything_in_order_and_passes_errors_on(depth):
    """prefetch(depth) reads up to `depth` items ahead on its thread: every item comes
    out once, in order; an error of the reader comes out after the items before it;
    a consumer that stops early stops the reader."""
    import threading

    from harness.corpora import prefetch

    assert list(prefetch(iter(range(50)), depth)) == list(range(50))

    def failing():
        yield from range(5)
        raise ValueError("bad row")

    got = []
    with pytest.raises(ValueError, match="bad row"):
        for x in prefetch(failing(), depth):
            got.append(x)
    assert got == list(range(5))

    produced = []

    def counted():
        for i in range(10_000):
            produced.append(i)
            yield i

    for x in prefetch(counted(), depth):
        if x == 2:
            break
    assert len(produced) <= 3 + depth + 1
    assert not any(t.name == "asmbpe-reader" and t.is_alive() for t in threading.enumerate())


def test_prefetch_meanwhile_overlaps_the_first_read():
    """meanwhile runs once, on the consumer's thread, while the reader is already
    reading; an error in it comes out and stops the reader."""
    import threading

    from harness.corpora import prefetch

    started, calls = threading.Event(), []

    def items():
        started.set()
        yield from range(3)

    def meanwhile():
        assert started.wait(5)                  # the reader is running meanwhile
        calls.append(threading.current_thread())

    assert list(prefetch(items(), 2, meanwhile=meanwhile)) == [0, 1, 2]
    assert calls == [threading.current_thread()]

    def failing():
        raise RuntimeError("warm-up failed")

    with pytest.raises(RuntimeError, match="warm-up failed"):
        list(prefetch(iter(range(10_000)), 1, meanwhile=failing))
    for t in threading.enumerate():
        if t.name == "asmbpe-reader":
            t.join(5)
            assert not t.is_alive()


def _unpacked(batch) -> list[bytes]:
    """The documents of a PackedBatch, checking its padding (SPEC §2)."""
    from harness.buffers import PAD, PAD_BYTE

    a, ends = batch.array, batch.ends.tolist()
    assert len(a) >= batch.nbytes + 2 * PAD and (not ends or ends[-1] == batch.nbytes)
    assert set(a[:PAD].tolist()) == {PAD_BYTE}
    assert set(a[PAD + batch.nbytes:PAD + batch.nbytes + PAD].tolist()) == {PAD_BYTE}
    text = a[PAD:PAD + batch.nbytes].tobytes()
    return [text[s:e] for s, e in zip([0] + ends[:-1], ends)]


@pytest.mark.filterwarnings("ignore::harness.corpora.NullsSkipped")
@pytest.mark.parametrize("batch_bytes", [1, 100, 5000, 1 << 20])
def test_packed_batches_are_iter_batches_laid_out(tmp_path, batch_bytes):
    """iter_batches(packed=True) (what training counts from) gives the documents of
    iter_batches, each batch ending with the document that reaches the batch size
    (iter_batches also ends one where a file of another format starts), over Parquet read here (pages of one and of many
    documents, a document larger than a batch), Parquet read by pyarrow (a dictionary),
    nulls, plain text and JSONL in one run, and with a limit; an empty file is
    refused as iter_batches refuses it."""
    pa = pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq

    rnd = random.Random(batch_bytes)
    docs = [rnd.randbytes(rnd.choice([0, 5, 300, 4000])).hex().encode() for _ in range(60)]
    docs[17] = b"x" * 300_000
    a = tmp_path / "a.parquet"
    pq.write_table(pa.table({"text": [d.decode() for d in docs]}), a, row_group_size=25,
                   compression="zstd", use_dictionary=False, data_page_size=3000)
    b = tmp_path / "b.parquet"
    pq.write_table(pa.table({"text": ["dict", None, "dict", "other"] * 5}), b,
                   use_dictionary=True)
    t = tmp_path / "t.txt"
    t.write_bytes(b"one\n\ntwo\n")
    j = tmp_path / "j.jsonl"
    j.write_text('{"text": "json doc"}\n')
    files = [a, b, t, j, a]
    for limit in (None, 10_000):
        want = [d for x in iter_batches(files, batch_bytes, limit_bytes=limit) for d in x]
        got = [_unpacked(x) for x in iter_batches(files, batch_bytes, limit_bytes=limit,
                                                  packed=True)]
        assert [d for x in got for d in x] == want
        for x in got[:-1]:              # a batch ends with the document reaching the size
            sizes = list(map(len, x))
            assert sum(sizes) >= batch_bytes > sum(sizes[:-1])
        assert got[-1]
    empty = tmp_path / "e.jsonl"
    empty.write_text("\n")
    with pytest.raises(InputError, match="is empty"):
        list(iter_batches([t, empty], packed=True))


def test_training_reads_parquet_without_pyarrow(tmp_path):
    """`asmbpe train` on a plain zstd Parquet file (the shared corpora's layout) reads it
    with harness.parquet_pages: pyarrow is never imported (0.07 s and 35 MB, T52)."""
    pa = pytest.importorskip("pyarrow")
    import subprocess
    import sys

    import pyarrow.parquet as pq

    p = tmp_path / "d.parquet"
    pq.write_table(pa.table({"text": [f"document {i} " * 50 for i in range(300)]}), p,
                   row_group_size=100, compression="zstd", use_dictionary=False)
    code = ("import sys; from harness.cli import main\n"
            "try:\n    main(sys.argv[1:])\nexcept SystemExit as e:\n"
            "    assert not e.code, e.code\n"
            "print('pyarrow' in sys.modules)\n")
    out = subprocess.run([sys.executable, "-c", code, "train", str(p), "-o",
                          str(tmp_path / "t.bin"), "--vocab-size", "300", "-q"],
                         capture_output=True, text=True, check=True)
    assert out.stdout.strip().splitlines()[-1] == "False", out.stdout + out.stderr
