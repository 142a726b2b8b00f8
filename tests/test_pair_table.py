"""The training pair table's rehash in place (train_pairs.asm pt_grow, log T59) and
its reuse of dead pairs' slots (pt_add, T113): a table forced to start small
(stats[ASMBPE_TS_PT_SLOTS]) doubles several times; at a size that holds the live
pairs, new pairs take the slots of pairs whose count fell to 0, so the table never
fills, and with that reuse turned off (stats[ASMBPE_TS_PT_KEEP_DEAD]) it fills and
is rehashed at its own size. Every training learns the merges and counts of the
default-sized table, u16 and u32 builds, one and several threads, with the
end-of-run recount (ASMBPE_VERIFY) agreeing."""
from __future__ import annotations

import math
import random

import numpy as np
import pytest

from harness._lib import ffi, lib
from harness.buffers import Padded

N_MERGES = 6000


@pytest.fixture(scope="module")
def text() -> Padded:
    """Words over a mixed alphabet (1-3-byte UTF-8): thousands of distinct pairs,
    whose counts fall to 0 as merges eat them."""
    rng = random.Random(7)
    alpha = [c.encode() for c in "abcdefghijklmnopqrstuvwxyzäöüßéèàçñяж中文"]
    words = [b"".join(rng.choice(alpha) for _ in range(rng.randint(2, 9))) for _ in range(6000)]
    return Padded(b" ".join(rng.choice(words) for _ in range(60000)))


def _train(text: Padded, fn: str, threads: int, first_slots: int, flags: int = 0,
           narrow: int = 0, keep_dead: int = 0):
    L = lib()
    t = L.asmbpe_wordtab_new()
    try:
        ends = np.array([text.size], dtype=np.uint64)
        assert L.asmbpe_count_words(t, text.ptr, ffi.from_buffer("uint64_t[]", ends),
                                    1, 1, 256, 1) > 0
        wide = fn == "asmbpe_train32"
        merges = np.zeros((N_MERGES, 2), np.uint32 if wide else np.uint16)
        counts = np.zeros(N_MERGES, np.uint64)
        st = np.zeros(int(L.ASMBPE_TS_COUNT), np.uint64)
        st[L.ASMBPE_TS_PT_SLOTS] = first_slots
        st[L.ASMBPE_TS_NARROW] = narrow
        st[L.ASMBPE_TS_PT_KEEP_DEAD] = keep_dead
        m = getattr(L, fn)(t, N_MERGES, 1, threads, flags | L.ASMBPE_VERIFY,
                           ffi.from_buffer("uint64_t[]" if wide else "uint32_t[]", merges),
                           ffi.from_buffer("uint64_t[]", counts),
                           ffi.from_buffer("uint64_t[]", st))
    finally:
        L.asmbpe_wordtab_free(t)
    assert m > 1000, m
    return (merges[:m].tolist(), counts[:m].tolist(), int(st[L.ASMBPE_TS_PT_SLOTS]),
            int(st[L.ASMBPE_TS_PT_REHASHES]))


@pytest.fixture(scope="module")
def default(text):
    merges, counts, slots, rehashes = _train(text, "asmbpe_train", 1, 0)
    assert slots == 1 << 16 and rehashes == 0           # the first size holds them
    return merges, counts


@pytest.mark.parametrize("threads", [1, 3])
@pytest.mark.parametrize("fn, flags, narrow", [
    ("asmbpe_train", 0, 0),
    ("asmbpe_train32", 0, 500),         # 500 merges on u16 tokens, then widened
    ("asmbpe_train32", 8, 0),           # ASMBPE_WIDE_ONLY
], ids=["u16", "hybrid", "u32"])
@pytest.mark.parametrize("first, keep_dead", [(1024, 0), (1024, 1), (32768, 0), (32768, 1)],
                         ids=["1024", "1024-keep-dead", "32768", "32768-keep-dead"])
def test_small_pair_table_grows_in_place_to_the_same_merges(text, default, threads, fn,
                                                            flags, narrow, first, keep_dead):
    merges, counts, slots, rehashes = _train(text, fn, threads, first, flags, narrow,
                                             keep_dead)
    assert merges == default[0] and counts == default[1]
    doublings = int(math.log2(slots // first))
    if first == 1024:           # 1024 -> 32768 slots: one rehash per doubling
        assert (slots, rehashes) == (32768, 5)
    elif keep_dead:             # at most half live: rehashed once at its own size
        assert (doublings, rehashes) == (0, 1)
    else:                       # the dead pairs' slots taken again: never full
        assert (doublings, rehashes) == (0, 0)
