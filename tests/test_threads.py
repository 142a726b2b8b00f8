"""The library's threads under stress: many short trainings with more threads
than cores (barriers at every merge, spurious futex wakes, sleepers), each
result identical to the one-thread run.  Runs in a subprocess with a timeout,
so a deadlock fails the test instead of hanging the suite."""
from __future__ import annotations

import subprocess
import sys
import textwrap

SCRIPT = textwrap.dedent("""
    import numpy as np
    from harness._lib import lib, ffi
    from harness.buffers import Padded
    L = lib()
    text = (b"the quick brown fox jumps over the lazy dog; " * 40
            + b"tokenizers tokenize tokens, aaaa bbbb abab " * 30)
    buf = Padded(text)
    ends = np.array([len(text)], dtype=np.uint64)

    def run(threads):
        t = L.asmbpe_wordtab_new()
        assert L.asmbpe_count_words(t, buf.ptr, ffi.from_buffer("uint64_t[]", ends), 1, threads, 256, 1) > 0
        merges = np.zeros(300, np.uint32)
        counts = np.zeros(300, np.uint64)
        stats = np.zeros(32, np.uint64)
        m = L.asmbpe_train(t, 300, 1, threads, 2, ffi.from_buffer("uint32_t[]", merges),
                           ffi.from_buffer("uint64_t[]", counts), ffi.from_buffer("uint64_t[]", stats))
        L.asmbpe_wordtab_free(t)
        assert m > 0, m
        return merges[:m].tolist(), counts[:m].tolist()

    want = run(1)
    for i in range(150):
        for threads in (16, 7, 2):
            assert run(threads) == want, (i, threads)
    print("ok")
""")


def test_many_oversubscribed_trainings_finish_and_agree():
    r = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=240)
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stdout + r.stderr


BARRIER = textwrap.dedent("""
    from harness._lib import checkasm_lib
    T = checkasm_lib()
    print([T.asmbpe_test_barrier(n, 3000) for n in (2, 3, 5, 9, 17)])
""")


def test_barrier_holds_under_spurious_wakes():
    """One thread floods the barrier's futex with wakes while the others pass
    3000 rounds: no thread may leave a round before all have arrived.  (A
    barrier that recomputed its futex address from a moved register after a
    spurious wake released threads early here, thousands of times.)"""
    r = subprocess.run([sys.executable, "-c", BARRIER], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "[0, 0, 0, 0, 0]", r.stdout


def test_library_frees_what_it_maps():
    """Counting, training (fast, naive, verify, several threads) and encoding and
    decoding hand back every byte they map: the library's count of mapped bytes
    returns to where it was."""
    import harness
    from harness._lib import lib
    L = lib()
    import gc
    gc.collect()                                # encoders earlier tests left, and
    L.asmbpe_enc_trim()                         # the states they gave to the pool

    def mapped_now() -> int:
        L.asmbpe_mapped_peak(1)                 # the peak restarts from what is mapped
        return int(L.asmbpe_mapped_peak(0))

    before = mapped_now()
    text = open(harness.__file__.replace("harness/__init__.py", "datasets/kjv.txt"), "rb").read()
    for kw in ({"threads": 2}, {"threads": 3, "verify": True}, {"threads": 1, "naive": True}):
        tok = harness.train(text[:200_000], vocab_size=700, **kw).tokenizer
    assert mapped_now() == before
    # the encoder: pair table, caches of 3 threads, long-chunk arrays, id -> bytes table
    ids, _ = tok.encode_many([text[:100_000], b"a" * 5000, text[:50_000]], threads=3)
    assert tok.decode_bytes(ids) == text[:100_000] + b"a" * 5000 + text[:50_000]
    del tok, ids
    gc.collect()                                # frees the encoder (ffi.gc): its
    assert mapped_now() > before                # threads' states go to the pool,
    assert L.asmbpe_enc_trim() >= 3             # which hands them back
    assert mapped_now() == before
