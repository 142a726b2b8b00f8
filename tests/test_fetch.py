"""`asmbpe data fetch` / harness.fetch against a local HTTP server on 127.0.0.1 that
behaves like the Hugging Face Hub (a resolve URL redirects to a CDN URL with
X-Linked-Size and X-Linked-Etag = sha256; the CDN serves byte ranges), with faults on
demand: a dropped connection (the download resumes with a range request), corrupted
bytes (refused and deleted), no range support (starts over). And `asmbpe data prepare`.
"""
from __future__ import annotations

import hashlib
import http.server
import json
import os
import re
import threading
from pathlib import Path

import pytest

from cli_util import invoke, one_line_error

from harness import fetch as F
from harness.corpora import iter_conversations, iter_documents

REPO = "HuggingFaceFW/fineweb-edu"


class Hub:
    """Files by repository path; per-file faults; a log of (method, path, Range)."""

    def __init__(self):
        self.files: dict[str, dict] = {}
        self.log: list[tuple[str, str, str | None]] = []

    def add(self, path, content: bytes, *, lfs=True, drop_after=None, corrupt=False,
            ranges=True):
        self.files[path] = dict(content=content, sha=hashlib.sha256(content).hexdigest(),
                                lfs=lfs, drop_after=drop_after, corrupt=corrupt,
                                ranges=ranges)


def _handler(hub: Hub):
    class H(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *a):
            pass

        def do_GET(self):
            rng = self.headers.get("Range")
            hub.log.append(("GET", self.path, rng))
            m = re.fullmatch(r"/datasets/([^/]+/[^/]+)/resolve/([^/]+)/(.+)", self.path)
            if m:
                f = hub.files.get(m.group(3))
                if f is None:
                    return self._empty(404)
                if f["lfs"]:
                    self.send_response(302)
                    self.send_header("Location", f"/cdn/{m.group(3)}?sig=x")
                    self.send_header("X-Linked-Size", str(len(f["content"])))
                    self.send_header("X-Linked-Etag", f'"{f["sha"]}"')
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                return self._serve(f, rng)
            m = re.fullmatch(r"/cdn/(.+)\?sig=x", self.path)
            if m and m.group(1) in hub.files:
                return self._serve(hub.files[m.group(1)], rng)
            self._empty(404)

        def _empty(self, code):
            self.send_response(code)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def _serve(self, f, rng):
            data = f["content"]
            if f["corrupt"]:
                data = data[:10] + bytes([data[10] ^ 0xFF]) + data[11:]
            start = 0
            if rng and f["ranges"]:
                start = int(re.fullmatch(r"bytes=(\d+)-", rng).group(1))
                if start >= len(data):
                    self.send_response(416)
                    self.send_header("Content-Range", f"bytes */{len(data)}")
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                self.send_response(206)
                self.send_header("Content-Range", f"bytes {start}-{len(data) - 1}/{len(data)}")
            else:
                self.send_response(200)
            body = data[start:]
            self.send_header("Content-Length", str(len(body)))
            self.send_header("Accept-Ranges", "bytes" if f["ranges"] else "none")
            self.end_headers()
            if f["drop_after"] is not None:
                cut = f["drop_after"]
                f["drop_after"] = None              # only the first time
                self.wfile.write(body[:cut])
                self.wfile.flush()
                self.close_connection = True
                return
            self.wfile.write(body)

    return H


@pytest.fixture
def hub():
    h = Hub()
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _handler(h))
    t = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05},
                         daemon=True)
    t.start()
    h.url = f"http://127.0.0.1:{server.server_address[1]}"
    yield h
    server.shutdown()
    server.server_close()


def payload(n: int, seed: int = 0) -> bytes:
    return bytes((i * 131 + seed * 7 + (i >> 8)) & 0xFF for i in range(n))


def test_redirect_size_and_sha_then_cached(hub, tmp_path):
    data = payload(3_000_000)
    hub.add("sample/10BT/000_00000.parquet", data)
    seen = []
    p = F.fetch_file(REPO, "sample/10BT/000_00000.parquet", base=hub.url, cache=tmp_path,
                     progress=lambda name, done, total: seen.append((done, total)))
    assert p == tmp_path / REPO / "sample/10BT/000_00000.parquet"
    assert p.read_bytes() == data
    assert seen[-1] == (len(data), len(data))
    assert not list(p.parent.glob("*.part"))
    n = len(hub.log)
    assert F.fetch_file(REPO, "sample/10BT/000_00000.parquet", base=hub.url,
                        cache=tmp_path) == p
    assert len(hub.log) == n                        # a cached file: no request at all


def test_interrupted_download_resumes_with_range(hub, tmp_path):
    data = payload(2_500_000, 1)
    hub.add("f.parquet", data, drop_after=1_000_000)
    with pytest.raises(F.FetchError, match="kept in"):
        F.fetch_file(REPO, "f.parquet", base=hub.url, cache=tmp_path, retries=0)
    part = tmp_path / REPO / "f.parquet.part"
    assert part.stat().st_size == 1_000_000
    assert not (tmp_path / REPO / "f.parquet").exists()
    p = F.fetch_file(REPO, "f.parquet", base=hub.url, cache=tmp_path, retries=0)
    assert p.read_bytes() == data and not part.exists()
    assert hub.log[-1][2] == "bytes=1000000-"       # resumed, not started over


def test_dropped_connection_retried_in_one_call(hub, tmp_path):
    data = payload(1_500_000, 2)
    hub.add("g.parquet", data, drop_after=700_000)
    p = F.fetch_file(REPO, "g.parquet", base=hub.url, cache=tmp_path, retries=2, backoff=0)
    assert p.read_bytes() == data
    assert [r for _, _, r in hub.log if r] == ["bytes=700000-", "bytes=700000-"]


def test_corrupted_file_is_refused_and_deleted(hub, tmp_path):
    hub.add("bad.parquet", payload(200_000, 3), corrupt=True)
    with pytest.raises(F.FetchError, match="sha256 mismatch"):
        F.fetch_file(REPO, "bad.parquet", base=hub.url, cache=tmp_path, retries=3, backoff=0)
    assert list((tmp_path / REPO).iterdir()) == []   # neither the file nor a .part


def test_corrupted_resume_is_refused(hub, tmp_path):
    """A .part whose bytes are wrong (a disk error, another file) is caught by the hash."""
    data = payload(300_000, 4)
    hub.add("h.parquet", data)
    part = tmp_path / REPO / "h.parquet.part"
    part.parent.mkdir(parents=True)
    part.write_bytes(b"x" * 1000)
    with pytest.raises(F.FetchError, match="sha256 mismatch"):
        F.fetch_file(REPO, "h.parquet", base=hub.url, cache=tmp_path)
    assert not part.exists() and not (tmp_path / REPO / "h.parquet").exists()
    assert F.fetch_file(REPO, "h.parquet", base=hub.url, cache=tmp_path).read_bytes() == data


def test_no_range_support_starts_over_and_plain_files(hub, tmp_path):
    data = payload(400_000, 5)
    hub.add("n.jsonl", data, lfs=False, ranges=False, drop_after=100_000)
    p = F.fetch_file(REPO, "n.jsonl", base=hub.url, cache=tmp_path, retries=1, backoff=0)
    assert p.read_bytes() == data                    # no hash known: size checked only


def test_missing_file_is_an_error(hub, tmp_path):
    with pytest.raises(F.FetchError, match="HTTP 404"):
        F.fetch_file(REPO, "nope.parquet", base=hub.url, cache=tmp_path)


def test_shard_names():
    assert F.parse_shards("0,2,5-7") == [0, 2, 5, 6, 7]
    assert F.shard_paths("fineweb-edu", [0, 13])[1] == ["sample/10BT/000_00000.parquet",
                                                        "sample/10BT/013_00000.parquet"]
    repo, paths = F.shard_paths("smoltalk", "0-1")
    assert repo == "HuggingFaceTB/smoltalk"
    assert paths == ["data/all/train-00000-of-00009.parquet",
                     "data/all/train-00001-of-00009.parquet"]
    assert F.file_url(REPO, "sample/10BT/000_00000.parquet", base="https://huggingface.co") \
        == ("https://huggingface.co/datasets/HuggingFaceFW/fineweb-edu/resolve/main/"
            "sample/10BT/000_00000.parquet")
    with pytest.raises(F.FetchError, match="does not exist"):
        F.shard_paths("smoltalk", [9])


def test_cli_fetch_env_base_url(hub, tmp_path, monkeypatch):
    a, b = payload(100_000, 6), payload(50_000, 7)
    hub.add("sample/10BT/000_00000.parquet", a)
    hub.add("sample/10BT/001_00000.parquet", b)
    monkeypatch.setenv("ASMBPE_HF_ENDPOINT", hub.url)
    monkeypatch.setenv("ASMBPE_CACHE", str(tmp_path))
    r = invoke("data", "fetch", "fineweb-edu", "--shards", "0-1")
    assert r.exit_code == 0, r.output
    paths = r.stdout.split()
    assert [Path(p).read_bytes() for p in paths] == [a, b]
    assert "fetched 2 file(s)" in r.stderr


def test_cli_fetch_errors(hub, tmp_path):
    hub.add("data/all/train-00000-of-00009.parquet", payload(1000), corrupt=True)
    r = invoke("data", "fetch", "smoltalk", "--shards", "0", "--base-url", hub.url,
               "--cache-dir", tmp_path, "-q")
    one_line_error(r, "sha256 mismatch")
    r = invoke("data", "fetch", "smoltalk", "--shards", "12", "--base-url", hub.url,
               "--cache-dir", tmp_path, "-q")
    one_line_error(r, "shard 12 does not exist")
    r = invoke("data", "fetch", "smoltalk", "--shards", "x", "--cache-dir", tmp_path)
    one_line_error(r, "bad shard list")


# --------------------------------------------------------------------------- prepare

def test_prepare_text_and_jsonl_to_parquet(tmp_path):
    pytest.importorskip("pyarrow")
    docs = [f"document {i}: " + "word " * (i % 50) + "ünï ☺" for i in range(300)]
    txt = tmp_path / "a.txt"
    txt.write_text("\n---\n".join(docs[:100]) + "\n")
    jl = tmp_path / "b.jsonl"
    jl.write_text("".join(json.dumps({"text": d}) + "\n" for d in docs[100:]))
    out = tmp_path / "out"
    r = invoke("data", "prepare", txt, jl, "-o", out, "--separator", "---",
               "--shard-mb", "0.005", "--row-group-mb", "0.002", "-q")
    assert r.exit_code == 0, r.output
    shards = sorted(out.glob("*.parquet"))
    assert len(shards) > 1 and not list(out.glob(".*"))
    import pyarrow.parquet as pq

    assert pq.ParquetFile(shards[0]).metadata.num_row_groups > 1
    got = [d.decode() for s in shards for d in iter_documents(s)]
    want = [d + "\n" for d in docs[:99]] + [docs[99] + "\n"] + docs[100:]
    assert got == want


def test_prepare_chat_and_bad_utf8(tmp_path):
    pytest.importorskip("pyarrow")
    convs = [[{"role": "user", "content": f"q{i}"}, {"role": "assistant", "content": f"a{i}"}]
             for i in range(20)]
    jl = tmp_path / "c.jsonl"
    jl.write_text("".join(json.dumps({"messages": c}) + "\n" for c in convs))
    r = invoke("data", "prepare", jl, "-o", tmp_path / "chat", "--chat", "-q")
    assert r.exit_code == 0, r.output
    assert list(iter_conversations(tmp_path / "chat" / "shard-00000.parquet")) == convs
    bad = tmp_path / "bad.txt"
    bad.write_bytes(b"fine\n\n\xff\xfe not utf-8\n")
    r = invoke("data", "prepare", bad, "-o", tmp_path / "b", "--separator", "", "-q")
    one_line_error(r, "not valid UTF-8")
    assert os.listdir(tmp_path / "b") == []
    r = invoke("data", "prepare", bad, "-o", tmp_path / "b", "--separator", "", "--binary",
               "-q")
    assert r.exit_code == 0, r.output
    assert list(iter_documents(tmp_path / "b" / "shard-00000.parquet")) == \
        [b"fine\n", b"\xff\xfe not utf-8\n"]
