"""The assembly seed pre-tokenizer (SPEC §3: pretok_next, split_offsets) against the
naive twin and the oracle regex: SPEC examples, checkasm's edge table and 10,000
random inputs (guard pages, checked calls), every corpus document, hypothesis. And the
public split_offsets' own work around the library call (its buffers, threads)."""
from __future__ import annotations

import os
from concurrent.futures import ProcessPoolExecutor

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import harness
from harness.dev import checkasm, twin
from harness._lib import ffi, lib
from harness.buffers import Padded

SPEC_EXAMPLES = [
    ("Hello world", "Hello| world"), ("don't", "don|'t"),
    ("I'll WE'RE they've", "I|'ll| WE|'RE| they|'ve"), ("'sam", "'s|am"),
    ("123456", "12|34|56"), ("$9.99", "$|9|.|99"), ("  hello", " | hello"),
    ("hello!!!", "hello|!!!"), ("(test)", "(test|)"), ("a... b", "a|...| b"),
    ("x  \n\n  y", "x|  \n\n| | y"), ("emoji 😀😀 ok", "emoji| 😀😀| ok"),
    ("日本語のテキスト。", "日本語のテキスト|。"),
]


@pytest.mark.parametrize("text,want", SPEC_EXAMPLES)
def test_spec_examples(text, want):
    chunks = [c.decode() for c in harness.split(text.encode(), pretokenizer="seed")]
    assert "|".join(chunks) == want
    # the same text inside a long one, so the 64-byte window path sees it too
    long = ("The quick brown fox. " * 4 + "\n" + text + " " + "jumps over it " * 5).encode()
    assert harness.split(long, pretokenizer="seed") == twin.split(long)


def test_empty_and_str_input():
    assert harness.split(b"") == []
    assert harness.split_offsets(b"").tolist() == []
    assert harness.split("don't") == [b"don", b"'t"]
    offs = harness.split_offsets(b"Hello world")
    assert offs.dtype == np.uint64 and offs.tolist() == [5, 11]


def _checkasm(function: str, n_random: int, seed: int = 2026) -> None:
    lines: list[str] = []
    ok = checkasm.run_checks(seed=seed, pattern=function, n_random=n_random, out=lines.append)
    assert ok, "\n".join(lines)


def test_split_offsets_checkasm_edge_table_and_10000_random():
    """asm == twin on the edge table (lengths 0..300, alignments 0..63, texts
    touching a guard page at either end, adversarial UTF-8, 1 MB runs) and on
    10,000 random inputs, every call through the checked-call trampoline."""
    _checkasm("asmbpe_split_offsets", 10_000)


def test_pretok_next_checkasm():
    _checkasm("asmbpe_pretok_next", 2_000)


def test_memeq_checkasm():
    _checkasm("asmbpe_memeq", 0)


def test_cpu_flags_checkasm():
    _checkasm("asmbpe_cpu_flags", 0)


def test_long_document_is_split_in_blocks():
    """split_offsets gathers offsets in blocks: the result must not depend on it."""
    data = ("word, 12345 don't\n\t  é " * 5000).encode()
    from harness.pretok import offsets_of
    buf = Padded(data)
    assert (offsets_of(buf, block=7, pretokenizer="seed").tolist()
            == offsets_of(buf, pretokenizer="seed").tolist() == twin.split_offsets(data, "seed"))


def test_public_path_every_input_type_and_no_aliasing():
    """split_offsets takes bytes, bytearray, memoryview (of any item size: its bytes) and
    str (UTF-8, lone surrogates passed through); each result is an array of its own, not
    a view of the thread's buffers that the next call overwrites."""
    text = "naïve café, don't 123456 — 日本語 😀\n\n  x\ud800y"
    raw = text.encode("utf-8", "surrogatepass")
    want = twin.split_offsets(raw, "seed")
    words = np.frombuffer(raw[:32], dtype=np.uint32)
    for form in (raw, bytearray(raw), memoryview(raw), text):
        got = harness.split_offsets(form, pretokenizer="seed")
        assert got.dtype == np.uint64 and got.tolist() == want
    assert harness.split_offsets(words, "seed").tolist() == twin.split_offsets(raw[:32], "seed")
    first = harness.split_offsets(raw, "seed")
    assert first.base is None and first.flags.writeable and first.flags.owndata
    harness.split_offsets(b"x" * 5000, "seed")
    assert first.tolist() == want                     # untouched by the next call
    assert harness.split(text, "seed") == twin.split(raw, "seed")


def test_public_path_bytes_where_they_lie_and_at_page_ends():
    """bytes go to the library where CPython keeps them (id() + 32, checked against
    cffi's view at import) unless they end in the last 64 bytes of a page: both ways,
    and texts with more chunks than the short path's room, give the twin's offsets."""
    import sys

    from harness import pretok

    if sys.implementation.name == "cpython":
        assert pretok._BYTES_DATA == 32
    rng = np.random.default_rng(7)
    alphabet = np.frombuffer(b"ab 1!\n\xc3\xa9'", dtype=np.uint8)
    seen, kept = set(), []
    for _ in range(3000):
        n = int(rng.integers(1, 300))
        data = rng.choice(alphabet, n).tobytes()
        kept.append(data)           # alive: the next ones land elsewhere (page ends too),
        end = id(data) + (pretok._BYTES_DATA or 0) + n          # not in the block just freed
        seen.add((end - 1) // 4096 == (end + 63) // 4096)
        assert harness.split_offsets(data, "nanochat").tolist() == twin.split_offsets(data, "nanochat")
    assert seen == {True, False} or pretok._BYTES_DATA is None
    for data in (b"1!" * 5000, b"\xff" * 777):     # one chunk per byte or two: past the room
        assert harness.split_offsets(data, "nanochat").tolist() == twin.split_offsets(data, "nanochat")


@pytest.mark.parametrize("keep", [None, 64])
def test_public_path_grows_its_buffers(monkeypatch, keep):
    """Texts with more chunks than the first guess (one per 3 bytes) make the offsets
    buffer grow while the library continues after the last chunk; growing and shrinking
    texts, and buffers too large to keep (KEEP_BYTES), give the twin's offsets."""
    from harness import pretok

    if keep is not None:
        monkeypatch.setattr(pretok, "KEEP_BYTES", keep)
    texts = [b"a " * 40_000, b"!", b"", b"1 " * 3 + b"\xff" * 9000, b"ab cd" * 30_000,
             b"x" * 100, "é ".encode() * 20_000]
    for data in texts + texts[::-1]:
        assert harness.split_offsets(data, "seed").tolist() == twin.split_offsets(data)


def test_public_path_threads():
    """Each thread has its own buffers: threads splitting different texts at once all
    get their own text's offsets."""
    from concurrent.futures import ThreadPoolExecutor

    texts = [(b"word %d, " % k) * (1000 + 997 * k) + "日本語 é".encode() * k for k in range(8)]
    want = [twin.split_offsets(t, "seed") for t in texts]
    with ThreadPoolExecutor(4) as pool:
        for _ in range(3):
            got = list(pool.map(lambda t: harness.split_offsets(t, "seed").tolist(), texts))
            assert got == want


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.binary(max_size=400))
def test_tiling_arbitrary_bytes(data):
    chunks = harness.split(data, pretokenizer="seed")
    assert b"".join(chunks) == data
    assert all(chunks)
    assert chunks == twin.split(data, "seed")
    assert b"".join(harness.split(data)) == data        # the default (nanochat) tiles too


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.sampled_from([b"a", b"Z", b" ", b"  ", b"\n", b"\r\n", b"\t", b"1", b"'",
                                 b"s", b"ll", b"!", b"..", b"\xc3\xa9", b"\xe2\x80\x94",
                                 b"\xf0\x9f\x98\x80", b"\xe3\x80\x82", b"\x80", b"\xff"]),
                min_size=60, max_size=300))
def test_window_path_on_texty_bytes(pieces):
    """Long texty inputs, so the 64-byte window path runs on every shape."""
    data = b"".join(pieces)
    assert harness.split(data, pretokenizer="seed") == twin.split(data)


# ----------------------------------------------------------------- corpora

def _asm_offsets_per_document(docs: list[bytes]) -> list[list[int]]:
    starts = np.cumsum([0] + [len(d) for d in docs])
    buf = Padded(b"".join(docs))
    out = np.empty(max([len(d) for d in docs] + [1]), dtype=np.uint64)
    op = ffi.from_buffer("uint64_t[]", out)
    L = lib()
    result = []
    for i, d in enumerate(docs):
        n = L.asmbpe_split_offsets(buf.ptr + int(starts[i]), len(d), 0, op, len(out), 1)
        result.append(out[:n].tolist())
    return result


def _twin_job(args):
    index, data, asm = args
    ref = twin.split_offsets(data, "seed")
    if ref == asm:
        return None
    return index, checkasm.first_difference(asm, ref)


def test_asm_equals_twin_on_every_corpus_document(corpus_files, corpus_texts):
    """Every document of every corpus file: asm == twin (the twin in a pool of
    processes; ~420 MB of pure Python takes a few minutes)."""
    failures = []
    workers = max(1, min(os.cpu_count() or 1, 8))
    for path in corpus_files:
        docs = [t.encode("utf-8", "surrogatepass") for t in corpus_texts(path)]
        asm = _asm_offsets_per_document(docs)
        with ProcessPoolExecutor(workers) as pool:
            jobs = ((i, d, a) for i, (d, a) in enumerate(zip(docs, asm)))
            for res in pool.map(_twin_job, jobs, chunksize=16):
                if res is not None:
                    failures.append(f"{path.name} document {res[0]}: {res[1]}")
    assert not failures, "\n".join(failures[:10])


def test_asm_equals_oracle_on_every_valid_corpus_document(corpus_files, corpus_texts):
    regex_mod = pytest.importorskip("regex")
    del regex_mod
    from harness.dev.oracle import compiled
    rx = compiled()
    failures = []
    for path in corpus_files:
        texts = corpus_texts(path)
        docs = [t.encode("utf-8", "surrogatepass") for t in texts]
        asm = _asm_offsets_per_document(docs)
        for i, (text, data, offs) in enumerate(zip(texts, docs, asm)):
            try:
                data.decode("utf-8")
            except UnicodeDecodeError:
                continue            # only valid UTF-8 is the oracle's
            ends = np.cumsum([len(m.encode()) for m in rx.findall(text)]).tolist()
            if ends != offs:
                failures.append(f"{path.name} document {i}: {checkasm.first_difference(offs, ends)}")
    assert not failures, "\n".join(failures[:10])


def test_error_in_the_call_leaves_no_buffer_export(tmp_path):
    """A library call that raises (here: the library missing) inside split_offsets, its
    traceback kept in a reference cycle, then a garbage collection: the text's buffer
    export must have ended with the call (a memoryview still exported when the
    collector clears it crashed the interpreter). In a subprocess, so that a crash
    fails this test only."""
    import subprocess
    import sys
    code = (
        "import gc, pathlib\n"
        "from harness import _lib, pretok\n"
        "_lib.LIB_PATH = pathlib.Path('/nonexistent/libasmbpe.so'); _lib.lib.cache_clear()\n"
        "kept = []\n"
        "for data in (b'hello world', bytearray(b'hello'), memoryview(b'abc def'), 'x y'):\n"
        "    try:\n"
        "        pretok.split_offsets(data)\n"
        "    except Exception as e:\n"
        "        kept.append(e); e.cycle = e\n"
        "del kept\n"
        "gc.collect()\n"
        "print('ok')\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stderr[-2000:]
