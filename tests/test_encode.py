"""The assembly encoder (asm/encode.asm) against the twin and against Hugging Face
`tokenizers` loaded from asmbpe's own export.

- checkasm: guard pages, the checked-call trampoline, the edge table and random text,
  on hand-made and learned merge tables (harness.dev.checkasm's asmbpe_encode entry);
- every document of every corpus: asm == the twin's chunk encoder (memoised per
  distinct chunk, over the pre-tokenizer that test_pretok proves equal to the twin's),
  with the cache and without;
- every valid UTF-8 corpus document: asm == `tokenizers` from the exported
  tokenizer.json;
- threads 1, 2, 3, 8 give the same ids; long chunks take the heap path and stay fast.
"""
from __future__ import annotations

import time

import numpy as np
import pytest

import harness
from harness.dev import checkasm, twin
from harness.encoder import encoder_stats
from harness.tokenizer import Tokenizer

from conftest import read_corpus_texts

KJV = harness.__path__[0] + "/../datasets/kjv.txt"


def test_checkasm_encode():
    lines: list[str] = []
    ok = checkasm.run_checks(seed=2026, pattern="asmbpe_encode", n_random=400, out=lines.append)
    assert ok, "\n".join(lines)


def test_checkasm_state_pool():
    lines: list[str] = []
    ok = checkasm.run_checks(seed=2026, pattern="asmbpe_enc_trim", n_random=100, out=lines.append)
    assert ok, "\n".join(lines)


def test_a_new_tokenizer_takes_cleared_states_from_the_pool():
    """A freed encoder's thread states (caches full of its chunks and ids, counters,
    run memos) go to the library's pool; the next Tokenizer's threads take them. Its
    ids must be its own (the twin's, the uncached encoder's), and its counters start
    from zero."""
    import gc
    from harness._lib import lib
    with open(KJV, "rb") as f:
        text = f.read()[:400_000]
    docs = [text[i:i + 20_000] for i in range(0, len(text), 20_000)] + [b" " * 60] * 3
    small = harness.train([text], vocab_size=600, pretokenizer="seed").tokenizer
    big = harness.train([text], vocab_size=2000, pretokenizer="seed").tokenizer
    for threads in (2, 3):
        lib().asmbpe_enc_trim()
        first = Tokenizer(small.merges, pretokenizer="seed")
        first.encode_many(docs, threads=threads)                  # caches filled
        del first
        gc.collect()
        second = Tokenizer(big.merges, pretokenizer="seed")
        got, counts = second.encode_many(docs, threads=threads)
        stats = encoder_stats(second)
        want, want_counts = Tokenizer(big.merges, pretokenizer="seed").encode_many(
            docs, threads=1, cache=False)
        assert got.tolist() == want.tolist() and counts.tolist() == want_counts.tolist()
        assert stats["chunks"] == sum(len(twin.split(d, "seed")) for d in docs)
        del second
        gc.collect()


@pytest.fixture(scope="module")
def kjv_tok() -> Tokenizer:
    with open(KJV, "rb") as f:
        return harness.train([f.read()], vocab_size=4096, pretokenizer="seed").tokenizer


@pytest.fixture(scope="module")
def corpus_tok(corpus_files) -> Tokenizer:
    """One tokenizer learned from a slice of each corpus, so that every corpus has
    long merged tokens to exercise (the seed pre-tokenizer: the one test_pretok holds to
    its twin and oracle)."""
    from harness.corpora import read_documents
    docs = []
    for path in corpus_files:
        docs += read_documents(path, 4 << 20)
    return harness.train(docs, vocab_size=8192, pretokenizer="seed").tokenizer


def _twin_ids(ranks, memo: dict, chunks: list[bytes], bos: list[int]) -> list[int]:
    out = list(bos)
    for c in chunks:
        ids = memo.get(c)
        if ids is None:
            ids = memo[c] = twin.encode_chunk(ranks, c)
        out.extend(ids)
    return out


def test_every_corpus_document_equals_the_twin(corpus_files, corpus_tok):
    ranks = twin.merge_ranks(corpus_tok.merges)
    memo: dict[bytes, list[int]] = {}
    for path in corpus_files:
        docs = [t.encode("utf-8", "surrogatepass") for t in read_corpus_texts(path)]
        for cache in (True, False):
            if not cache:
                docs = docs[::7]                # uncached: a seventh of them
            ids, counts = corpus_tok.encode_many(docs, bos=True, cache=cache)
            ends = np.cumsum(counts)
            starts = ends - counts
            for k, doc in enumerate(docs):
                want = _twin_ids(ranks, memo, harness.split(doc, pretokenizer="seed"),
                                 [corpus_tok.special_id("<|bos|>")])
                got = ids[starts[k]:ends[k]].tolist()
                assert got == want, (f"{path.name} document {k} (cache {cache}): first difference at "
                                     f"id {next(i for i, (a, b) in enumerate(zip(got + [-1], want + [-1])) if a != b)}")


def test_every_valid_corpus_document_equals_hf(corpus_files, corpus_tok, tmp_path):
    pytest.importorskip("tokenizers")
    from harness.export import export_hf, load_hf
    path = tmp_path / "tokenizer.json"
    export_hf(corpus_tok, path)
    hf = load_hf(path)
    for corpus in corpus_files:
        texts = [t for t in read_corpus_texts(corpus) if _valid(t)]
        ids, counts = corpus_tok.encode_many(texts)
        ends = np.cumsum(counts)
        starts = ends - counts
        for k0 in range(0, len(texts), 512):
            block = texts[k0:k0 + 512]
            for k, enc in enumerate(hf.encode_batch(block, add_special_tokens=False), k0):
                got = ids[starts[k]:ends[k]]
                if not np.array_equal(got, np.asarray(enc.ids, dtype=np.uint16)):
                    raise AssertionError(f"{corpus.name} document {k}: asm and tokenizers differ")


def _valid(text: str) -> bool:
    try:
        text.encode("utf-8")
        return True
    except UnicodeEncodeError:
        return False


def test_thread_counts_and_cache_agree(kjv_tok):
    with open(KJV, "rb") as f:
        data = f.read()
    docs = [data[i:i + 9000] for i in range(0, len(data), 9000)] * 3 + [b""] * 5
    want, want_counts = kjv_tok.encode_many(docs, threads=1, bos=True)
    for threads in (2, 3, 8):
        got, counts = kjv_tok.encode_many(docs, threads=threads, bos=True)
        assert np.array_equal(got, want) and np.array_equal(counts, want_counts), threads
    got, counts = kjv_tok.encode_many(docs, threads=3, bos=True, cache=False)
    assert np.array_equal(got, want) and np.array_equal(counts, want_counts)
    assert int(want_counts.sum()) == len(want)


def test_cache_is_used(kjv_tok):
    with open(KJV, "rb") as f:
        data = f.read()[:200_000]
    before = encoder_stats(kjv_tok)
    kjv_tok.encode(data)
    after = encoder_stats(kjv_tok)
    chunks = after["chunks"] - before["chunks"]
    hits = after["cache_hits"] - before["cache_hits"]
    assert chunks == len(harness.split(data, pretokenizer="seed"))
    assert hits > chunks // 2


def test_long_chunks_take_the_heap_path_and_stay_fast():
    # merges that double runs of 'a' and of spaces, and join 'ab' + 'c'
    merges = [(97, 97), (256, 256), (257, 257), (258, 258), (259, 259), (32, 32), (261, 261),
              (97, 98), (263, 99)]
    tok = Tokenizer(np.array(merges, dtype=np.uint16), pretokenizer="seed")
    ranks = twin.merge_ranks(tok.merges)
    for text in (b"a" * 1000, b"a" * 4099, b" " * 3001 + b"x", b"abc" * 50 + b"ab"):
        got = tok.encode(text, cache=False).tolist()
        assert got == [x for c in twin.split(text, "seed") for x in twin.encode_chunk(ranks, c)]
    before = encoder_stats(tok)["long_chunks"]
    t0 = time.perf_counter()
    ids = tok.encode(b"a" * (1 << 20) + b" " * (1 << 20))
    elapsed = time.perf_counter() - t0
    assert encoder_stats(tok)["long_chunks"] - before == 2
    assert ids.tolist() == [260] * (1 << 15) + [262] * (1 << 18)
    assert elapsed < 2.0, f"2 MB of runs took {elapsed:.2f} s (quadratic?)"


def test_runs_of_one_byte_come_from_the_memo():
    """Chunks longer than the cache's 48 bytes that are one byte repeated (49 spaces,
    a line of 'a') are kept in each thread's run memo (log E72), one entry per
    byte * 17 + length (mod 64): their ids equal the twin's and the uncached
    encoder's, runs that share an entry never mix, and a run of up to 29 ids seen
    just before is not encoded again. Longer ones (a line of '=', which has no
    merge; 300 spaces) and runs broken by one other byte are encoded each time."""
    merges = [(97, 97), (256, 256), (257, 257), (258, 258), (259, 259), (32, 32), (261, 261),
              (33, 33), (263, 263), (264, 264), (265, 265)]
    tok = Tokenizer(np.array(merges, dtype=np.uint16), pretokenizer="seed")
    ranks = twin.merge_ranks(tok.merges)
    runs = []
    for n in (49, 50, 63, 64, 65, 66, 81, 113, 129, 300):  # ('a' and '!' of one length,
        runs += [b" " * n, b"a" * n, b"!" * n]           # 65 spaces and 49 'a': one
                                                         # entry)
    runs += [b"=" * 60, b"a" * 60 + b"b" + b"a" * 60, b"a" * 2000]
    text = b"\n".join(b"x" + r + b"y" if r[0] == 32 else r for r in runs * 3)
    want = [x for c in twin.split(text, "seed") for x in twin.encode_chunk(ranks, c)]
    assert tok.encode(text, cache=False).tolist() == want
    assert tok.encode(text).tolist() == want                # (the memo filled, reused)
    assert tok.encode(text).tolist() == want

    def encoded(data):
        before = encoder_stats(tok)
        assert tok.encode(data).tolist() == [
            x for c in twin.split(data, "seed") for x in twin.encode_chunk(ranks, c)]
        after = encoder_stats(tok)
        return (after["chunks"] - before["chunks"]) - (after["cache_hits"] - before["cache_hits"])

    kept = 0
    for r in runs:
        chunk = r[:-1] if r[0] == 32 else r                 # (x, spaces, " y")
        data = b"x" + r + b"y" if r[0] == 32 else r
        ids = twin.encode_chunk(ranks, chunk)
        encoded(data)
        if len(chunk) <= 48:                                # (the cache's)
            continue
        if len(set(chunk)) == 1 and len(ids) <= 29:
            assert encoded(data) == 0, r[:8]
            kept += 1
        else:
            assert encoded(data) == 1, r[:8]
    assert kept >= 12


def test_bad_threads_refused(kjv_tok):
    for bad in (0, -1, 257, True):
        with pytest.raises(ValueError):
            kjv_tok.encode_many([b"abc"], threads=bad)
