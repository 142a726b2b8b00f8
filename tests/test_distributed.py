"""Distributed counting and encoding on Dask (harness.distributed, `--cluster`), with a
LocalCluster of 2 worker processes: the same merges as harness.train and the same .tok
bytes as one process, on english and multilingual subsets; a worker killed mid-shard
is replaced and the output is still identical and complete; a failure leaves no shard,
temporary file or manifest behind."""
from __future__ import annotations

import json
import os
import signal
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from cli_util import invoke, one_line_error, open_files

import harness
from harness.corpora import InputError, read_documents

pytest.importorskip("dask.distributed", reason="needs dask[distributed]")
pytest.importorskip("pyarrow")

from harness import distributed as D  # noqa: E402
from harness.pipeline import encode_to_tok  # noqa: E402
from harness.tokfile import read_tok  # noqa: E402

MB = 10 ** 6


@pytest.fixture(scope="module")
def client():
    c, close = D.connect("local:2")
    yield c
    close()


def corpus(corpus_files, name) -> Path:
    p = next((f for f in corpus_files if f.name == f"{name}.parquet"), None)
    if p is None:
        pytest.skip(f"{name}.parquet not found")
    return p


def make_shards(src: Path, out: Path, n: int, total: int) -> list[Path]:
    """The first `total` bytes of documents of src, dealt round-robin into n Parquet
    shards (with row groups of 50 documents)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    docs = read_documents(src, total)
    out.mkdir(parents=True, exist_ok=True)
    files = []
    for k in range(n):
        f = out / f"{src.stem}-{k:03d}.parquet"
        pq.write_table(pa.table({"text": [d.decode("utf-8", "surrogatepass")
                                          for d in docs[k::n]]}), f, row_group_size=50)
        files.append(f)
    return files


@pytest.fixture(scope="module")
def shards(tmp_path_factory, corpus_files):
    root = tmp_path_factory.mktemp("shards")
    return {name: make_shards(corpus(corpus_files, name), root / name, n, total)
            for name, n, total in (("english", 5, 4 * MB), ("multilingual", 3, 3 * MB))}


@pytest.fixture(scope="module")
def tok(shards):
    return harness.train(shards["english"][:2], 4096).tokenizer


def listing(d: Path) -> list[str]:
    return sorted(p.name for p in d.iterdir())


@pytest.mark.parametrize("name", ["english", "multilingual"])
def test_train_same_merges(client, shards, name):
    ref = harness.train(shards[name], 2048)
    got = D.train_distributed(shards[name], 2048, client)
    assert got.tokenizer == ref.tokenizer and got.tokenizer.pretokenizer == "nanochat"
    assert np.array_equal(got.merges, ref.merges)
    assert np.array_equal(got.counts, ref.counts)
    assert (got.stats["bytes_in"], got.stats["documents"]) == \
        (ref.stats["bytes_in"], ref.stats["documents"])
    deep = D.train_distributed(shards[name], 2048, client, fan_in=2)   # a deeper tree
    assert deep.stats["tree_depth"] > got.stats["tree_depth"]
    assert np.array_equal(deep.merges, ref.merges)


@pytest.mark.parametrize("name", ["english", "multilingual"])
def test_encode_same_bytes(client, shards, tok, tmp_path, name):
    files = shards[name]
    one = encode_to_tok(tok, files, tmp_path / "one.tok")
    local = D.encode_sharded(tok, files, tmp_path / "local")
    D.encode_sharded(tok, files, tmp_path / "dist", client=client)
    names = [e["file"] for e in local.shards]
    assert listing(tmp_path / "dist") == sorted(names + ["manifest.json"])
    for n in names:
        assert (tmp_path / "local" / n).read_bytes() == (tmp_path / "dist" / n).read_bytes()
    assert (tmp_path / "local" / "manifest.json").read_bytes() == \
        (tmp_path / "dist" / "manifest.json").read_bytes()
    tf = read_tok(tmp_path / "one.tok", tok)
    assert np.array_equal(D.shard_tokens(tmp_path / "dist"), np.asarray(tf.tokens))
    m = json.loads((tmp_path / "dist" / "manifest.json").read_text())
    assert (m["tokens"], m["documents"], m["source_bytes"]) == \
        (one.tokens, one.documents, one.source_bytes)
    assert m["tokenizer_hash"] == f"0x{tok.merges_hash:016x}"
    assert [e["input"] for e in m["shards"]] == [str(f) for f in files]


def writes_shard(pid: int, out: Path) -> bool:
    """Whether process pid has a shard open in out's staging directory (an unnamed
    O_TMPFILE file, or a named temporary where the file system has none)."""
    return any(t.startswith(f"{out}/.staging-") and (t.endswith("(deleted)") or ".tok.tmp-" in t)
               for t in open_files(pid))
    for fd in fds:
        try:
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        if target.startswith(f"{out}/.staging-") and (
                target.endswith("(deleted)") or ".tok.tmp-" in target):
            return True
    return False


def test_worker_killed_mid_shard_is_retried(client, corpus_files, tok, tmp_path):
    big = make_shards(corpus(corpus_files, "english"), tmp_path / "in", 6, 24 * MB)
    ref = D.encode_sharded(tok, big, tmp_path / "ref")
    out = tmp_path / "dist"
    box: dict = {}

    def run():
        try:
            box["summary"] = D.encode_sharded(tok, big, out, client=client)
        except BaseException as e:          # reported below
            box["error"] = e

    workers = set(client.run(os.getpid).values())
    t = threading.Thread(target=run)
    t.start()
    killed = None
    deadline = time.monotonic() + 60
    while killed is None and t.is_alive() and time.monotonic() < deadline:
        for pid in workers:
            if writes_shard(pid, out):
                os.kill(pid, signal.SIGKILL)     # a worker dies mid-shard
                killed = pid
                break
        time.sleep(0.002)
    t.join(120)
    assert killed is not None, "no shard was caught mid-write"
    assert "error" not in box, box.get("error")
    for e in ref.shards:
        assert (out / e["file"]).read_bytes() == (tmp_path / "ref" / e["file"]).read_bytes()
    assert (out / "manifest.json").read_bytes() == \
        (tmp_path / "ref" / "manifest.json").read_bytes()
    assert listing(out) == listing(tmp_path / "ref")     # no staging dir, no temp file
    client.wait_for_workers(2, timeout=60)


def test_failure_leaves_nothing(client, shards, tok, tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"text": "fine"}\n' * 1000 + "not json\n" + '{"text": "x"}\n')
    files = shards["english"][:2] + [bad] + shards["english"][2:]
    out = tmp_path / "out"
    with pytest.raises(InputError, match="not valid JSON"):
        D.encode_sharded(tok, files, out, client=client)
    assert listing(out) == []
    with pytest.raises(InputError, match="not valid JSON"):
        D.encode_sharded(tok, files, out)
    assert listing(out) == []
    # an earlier complete output keeps its manifest only while it is complete
    D.encode_sharded(tok, shards["english"], out, client=client)
    assert "manifest.json" in listing(out)


def test_cli_cluster(client, shards, tok, tmp_path):
    tok_path = tmp_path / "tok.bin"
    tok.save(tok_path)
    files = shards["multilingual"]
    address = client.scheduler.address
    r = invoke("train", *files, "-o", tmp_path / "t.bin", "--vocab-size", 1024,
               "--cluster", address, "-q", "--pretokenizer", "seed")
    assert r.exit_code == 0, r.output
    assert "3 shard(s) on 2 worker(s)" in r.stdout
    ref = harness.train(files, 1024, pretokenizer="seed")
    assert harness.Tokenizer.load(tmp_path / "t.bin") == ref.tokenizer      # seed, too
    r = invoke("encode", *files, "-t", tok_path, "-o", tmp_path / "d", "--cluster", "local:2",
               "-q")
    assert r.exit_code == 0, r.output
    r2 = invoke("encode", *files, "-t", tok_path, "-o", tmp_path / "s", "--shards", "-q")
    assert r2.exit_code == 0, r2.output
    assert listing(tmp_path / "d") == listing(tmp_path / "s")
    for n in listing(tmp_path / "s"):
        assert (tmp_path / "d" / n).read_bytes() == (tmp_path / "s" / n).read_bytes()
    (tmp_path / "f").write_text("x")
    r = invoke("encode", *files, "-t", tok_path, "-o", tmp_path / "f", "--shards")
    one_line_error(r, "not a directory")


def test_encode_with_a_loaded_vocabulary(client, shards, tmp_path):
    """A published vocabulary (o200k_base: u32 ids, .tok version 2, its <|endoftext|>
    delimiting documents) through the cluster: the same shard bytes as one process, and
    the tokens of one encode_to_tok."""
    gz = Path(__file__).resolve().parents[2] / "shared" / "vocabs" / "o200k_base.tiktoken.gz"
    if not gz.is_file():
        pytest.skip(f"{gz} not found (shared/ next to the repository)")
    tok = harness.Tokenizer.from_tiktoken(gz)
    assert tok.dtype == np.uint32
    files = shards["multilingual"]
    kw = dict(doc_token="<|endoftext|>", doc_token_at="end")
    one = encode_to_tok(tok, files, tmp_path / "one.tok", **kw)
    local = D.encode_sharded(tok, files, tmp_path / "local", **kw)
    D.encode_sharded(tok, files, tmp_path / "dist", client=client, **kw)
    for e in local.shards:
        assert (tmp_path / "local" / e["file"]).read_bytes() == \
            (tmp_path / "dist" / e["file"]).read_bytes()
    tokens = D.shard_tokens(tmp_path / "dist")
    assert tokens.dtype.itemsize == 4 and tokens.max() >= 1 << 16
    assert np.array_equal(tokens, np.asarray(read_tok(tmp_path / "one.tok", tok).tokens))
    assert int((tokens == 199999).sum()) == one.documents
