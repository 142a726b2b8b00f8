"""checkasm for asmbpe, after dav1d's and FFmpeg's (see STYLE.md).

Every exported assembly function has an entry here: a Python twin to compare
with, and inputs — seeded random ones (the seed is printed and can be set) and
an edge table (lengths 0..300, start alignments 0..63, texts whose padding
touches a PROT_NONE page at either end, adversarial UTF-8, 1 MB runs).

Every call goes through the test-only trampoline `asmbpe_checked_call`
(asm/test/checkasm.asm), which fills rbx, rbp, r12-r15 with random values and
reports any not preserved, DF left set, stack canaries overwritten and a
missing vzeroupper.  Output buffers carry margins filled with 0x99 that must
come back untouched.

Each function's checks run in a forked child that tells the parent, before
every call, which input it is on: a fault (SIGSEGV on a guard page, say) is
reported as a failure naming the function and the input, not a crash.
"""
from __future__ import annotations

import fnmatch
import json
import os
import random
import signal
import sys
import time
from dataclasses import dataclass
from typing import Callable, Iterator

import numpy as np

from . import twin
from .._lib import checkasm_lib, ffi, fn_address, lib
from ..buffers import PAD, GuardedArena, Padded

REG_BITS = [(1, "rbx"), (2, "rbp"), (4, "r12"), (8, "r13"), (16, "r14"), (32, "r15"),
            (64, "direction flag left set"), (128, "missing vzeroupper"),
            (256, "stack canaries overwritten")]
MARGIN = 8                  # u64 margin each side of output arrays
MARGIN_FILL = 0x9999999999999999
MB = 1 << 20
DOCS = 1 << 16              # _asm_encode: through asmbpe_encode_docs (not a library flag)
INTERNAL = 1 << 8           # the library's internal flag: asmbpe_encode must ignore it


class CheckFailure(Exception):
    pass


# --------------------------------------------------------------------------- context

class Ctx:
    """What a check function gets: the rng, the checked caller, reporting."""

    def __init__(self, seed: int, pipe, n_random: int):
        self.rng = random.Random(seed)
        self.seed = seed
        self.pipe = pipe
        self.n_random = n_random
        self.calls = 0
        self.failures = 0
        self.L = lib()
        self.T = checkasm_lib()
        self.check_ymm = 1 if self.L.asmbpe_cpu_flags() & 16 else 0
        self._args = ffi.new("uint64_t[10]")
        self._fill = ffi.new("uint64_t[6]")
        self._ret = ffi.new("uint64_t *")
        self.case = ""

    def send(self, **msg) -> None:
        self.pipe.write(json.dumps(msg) + "\n")
        self.pipe.flush()

    def on(self, case: str) -> None:
        """Name the input about to be used (reported if the call faults)."""
        self.case = case
        self.send(case=case)

    def fail(self, msg: str) -> None:
        self.failures += 1
        self.send(fail=msg, case=self.case)
        if self.failures >= 20:
            raise CheckFailure("too many failures, stopping this function")

    def call(self, name: str, *args) -> int:
        """fn(*args) through the checked-call trampoline; returns rax (uint64)."""
        fn = fn_address(self.L, name)
        if len(args) > 10:
            raise ValueError("the trampoline passes at most 10 arguments")
        for i in range(10):
            a = args[i] if i < len(args) else self.rng.getrandbits(64)
            if isinstance(a, ffi.CData):
                a = int(ffi.cast("uintptr_t", a))
            self._args[i] = a & 0xFFFFFFFFFFFFFFFF
        for i in range(6):
            self._fill[i] = self.rng.getrandbits(64)
        bad = self.T.asmbpe_checked_call(fn, self._args, self._fill, self._ret, self.check_ymm)
        self.calls += 1
        if bad:
            what = ", ".join(name_ for bit, name_ in REG_BITS if bad & bit)
            self.fail(f"{name}: ABI violation: {what}")
        return int(self._ret[0])


def out_array(n: int) -> tuple[np.ndarray, np.ndarray]:
    """A uint64 output array of n entries inside margins of MARGIN_FILL."""
    full = np.full(n + 2 * MARGIN, MARGIN_FILL, dtype=np.uint64)
    return full, full[MARGIN:MARGIN + n]


def margins_intact(full: np.ndarray, n_written: int) -> bool:
    return bool(np.all(full[:MARGIN] == MARGIN_FILL)
                and np.all(full[MARGIN + n_written:] == MARGIN_FILL))


def hexwindow(data: bytes, at: int, width: int = 16) -> str:
    lo = max(0, at - width)
    return f"bytes [{lo}:{at + width}] = {data[lo:at + width].hex(' ')}"


def first_difference(a: list[int], b: list[int]) -> str:
    """Where two ascending chunk-end lists first disagree, as a text offset."""
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return f"chunk {i}: asm ends at {x}, twin at {y} (chunk starts at {a[i - 1] if i else 0})"
    return f"asm gave {len(a)} chunks, twin {len(b)}"


# --------------------------------------------------------------------------- inputs

TEXTY = [b"a", b"Z", b"q", b" ", b" ", b"  ", b"\n", b"\r", b"\r\n", b"\t", b"\x0b", b"\x0c",
         b"1", b"9", b"'", b"s", b"t", b"L", b"l", b"e", b"v", b"r", b"D", b"!", b".", b"$",
         b"\x00", b"\x80", b"\x9f", b"\xbf", b"\xc0", b"\xc1", b"\xc2", b"\xc2\xa0", b"\xc3\xa9",
         b"\xe2", b"\xe2\x80\x94", b"\xe3", b"\xe3\x80", b"\xe3\x80\x82", b"\xe3\x81\x82",
         b"\xf0", b"\xf0\x9f", b"\xf0\x9f\x98\x80", b"\xf0\x90\x8d\x88", b"\xf5", b"\xf8",
         b"\xff", "日本".encode(), "привет".encode(), "ſ".encode()]


def texty(rng: random.Random, n_bytes: int) -> bytes:
    out = bytearray()
    while len(out) < n_bytes:
        out += rng.choice(TEXTY)
    return bytes(out[:n_bytes])


def random_text(rng: random.Random, n: int) -> bytes:
    r = rng.random()
    if r < 0.45:
        return texty(rng, n)
    if r < 0.7:
        return rng.randbytes(n)
    words = []
    while sum(map(len, words)) < n:
        w = rng.choice([b"the", b"don't", b"I'LL", b"x", b"12345", b"\xc3\xa9t\xc3\xa9", b"...",
                        b"(a)", b"\xe2\x80\x94", b"\xf0\x9f\x98\x80\xf0\x9f\x98\x80", b"\n\n",
                        b"\t", b"   "])
        words.append(rng.choice([b"", b" ", b"  ", b"\n"]) + w)
    return b"".join(words)[:n]


def edge_texts(rng: random.Random) -> Iterator[tuple[str, bytes]]:
    """The edge table: named texts."""
    for n in range(0, 301):
        yield f"texty len {n}", texty(rng, n)
        yield f"random bytes len {n}", rng.randbytes(n)
    adversarial = {
        "stray continuation bytes": b"ab\x80\x81cd \xbf\xbf!",
        "lead cut at end (E3)": b"abc \xe3",
        "lead cut at end (E3 80)": b"abc \xe3\x80",
        "lead cut at end (F0)": b"x\xf0",
        "lead cut at end (F0 9F)": b"x \xf0\x9f",
        "lead cut at end (F0 9F 98)": b"x \xf0\x9f\x98",
        "lead cut at end (C3)": b"caf\xc3",
        "overlong C0/C1": b"\xc0\xaf\xc1\xbf a\xc0 \xc1",
        "F5-FF": bytes(range(0xF5, 0x100)) + b" x" + bytes(range(0xF5, 0x100)),
        "NUL bytes": b"\x00a\x00 \x00\x00b 1\x00",
        "lead swallows ASCII": b"\xe3A bc \xf0' x \xc3 d",
        "contractions at end": b"x'",
        "apostrophe + long s (C5 BF)": "x'\u017fa '\u017f'\u017f".encode(),
        "apostrophe + E5 BF (not a long s)": b"'\xe5\xbf\x80x '\xc5",
        "contraction cut": b"x'l",
        "contraction cut 2": b"x'v",
        "only whitespace": b" \t\r\n\x0b\x0c ",
        "whitespace then end": b"abc   ",
        "crlf runs": b"a\r\n\r\n  b \r \n\tc\n",
    }
    for name, data in adversarial.items():
        yield name, data
    runs = {
        "1 MB of 'a'": b"a" * MB,
        "1 MB of spaces": b" " * MB,
        "1 MB of newlines": b"\n" * MB,
        "1 MB of digits": b"7" * MB,
        "1 MB of '!'": b"!" * MB,
        "1 MB of U+00E9": "\u00e9".encode() * (MB // 2),
        "1 MB of U+3000": "\u3000".encode() * (MB // 3),
        "1 MB of 0x80": b"\x80" * MB,
        "1 MB with no whitespace": bytes(rng.choice(b"abcXYZ019!.,'\xc3\xa9") for _ in range(MB)),
    }
    for name, data in runs.items():
        yield name, data


def placements(n: int, i: int) -> list[tuple[str, int | None]]:
    """Where to place the i-th edge text of length n: touching the back guard
    and the front guard exactly, and at a start alignment that cycles 0..63."""
    return [("end", None), ("start", None), ("end", (i * 7) % 64), ("start", (i * 13 + 1) % 64)]


# --------------------------------------------------------------------------- checks

@dataclass
class Entry:
    name: str
    run: Callable[[Ctx], None]


REGISTRY: dict[str, Entry] = {}


def register(name: str):
    def deco(fn):
        REGISTRY[name] = Entry(name, fn)
        return fn
    return deco


@register("asmbpe_cpu_flags")
def check_cpu_flags(ctx: Ctx) -> None:
    ctx.on("no input")
    flags = ctx.call("asmbpe_cpu_flags") & 0xFFFFFFFF
    if flags != ctx.L.asmbpe_cpu_flags():
        ctx.fail("cpu_flags differs between calls")
    for bit, name in ((1, "AVX2"), (2, "BMI1"), (4, "BMI2"), (32, "SSE4.2")):
        if not flags & bit:
            ctx.fail(f"cpu_flags: {name} missing (the library cannot run here)")


def _split_cases(ctx: Ctx) -> Iterator[tuple[str, bytes]]:
    yield from edge_texts(ctx.rng)
    for k in range(ctx.n_random):
        n = ctx.rng.choice([ctx.rng.randrange(0, 64), ctx.rng.randrange(0, 600)])
        yield f"random #{k} (len {n})", random_text(ctx.rng, n)


# The pre-tokenizers: (id, the twin's split_offsets) by the name the checks carry.
# The seed's entries keep their plain names; the exact ones (SPEC §10) are
# asmbpe_split_offsets:nanochat etc., with harness.dev.pretok_twin as reference.
def _exact_twin(name: str) -> Callable[[bytes], list[int]]:
    def ref(data: bytes) -> list[int]:
        from . import pretok_twin
        return pretok_twin.split_offsets(data, name)
    return ref


PRETOKENIZERS: dict[str, tuple[int, Callable[[bytes], list[int]]]] = {
    "seed": (1, lambda data: twin.split_offsets(data, pretokenizer="seed")),
    "nanochat": (2, _exact_twin("nanochat")),
    "cl100k": (3, _exact_twin("cl100k")),
    "o200k": (4, _exact_twin("o200k")),
    "gpt2": (5, _exact_twin("gpt2")),
}


def _checked_name(fn: str, pretok: str) -> str:
    return fn if pretok == "seed" else f"{fn}:{pretok}"


def check_split_offsets(ctx: Ctx, pretok: str = "seed") -> None:
    pid, reference = PRETOKENIZERS[pretok]
    arena = GuardedArena(MB + 4096)
    for i, (name, data) in enumerate(_split_cases(ctx)):
        if pretok != "seed" and len(data) > 70_000:
            continue            # the exact twins are slow: the long runs are the seed's
        ref = reference(data)
        n = len(data)
        for anchor, align in placements(n, i):
            ptr, _ = arena.place(data, anchor, align)
            case = f"{name}, {anchor}-anchored, align {align if align is not None else (arena_off(ptr) % 64)}"
            ctx.on(case)
            full, out = out_array(max(n, 1))
            got = ctx.call("asmbpe_split_offsets", ptr, n, 0, ffi.from_buffer("uint64_t[]", out), max(n, 1),
                           pid)
            asm = out[:got].tolist()
            fname = _checked_name("asmbpe_split_offsets", pretok)
            if asm != ref:
                ctx.fail(f"{fname}: {case}: {first_difference(asm, ref)}; "
                         + hexwindow(data, _diff_at(asm, ref)))
            elif not margins_intact(full, max(n, 1)):     # (out[got..cap): scratch)
                ctx.fail(f"{fname}: {case}: wrote outside out[0..cap)")
            if n > 4096:
                break           # the long runs: one placement each is enough
        if 0 < n <= 300 and i % 3 == 0:
            _check_resume(ctx, arena, data, ref, name, pid)
    arena.close()


def _check_resume(ctx: Ctx, arena: GuardedArena, data: bytes, ref: list[int], name: str,
                  pid: int = 1) -> None:
    """Small caps: the split must resume from out[cap - 1] with the same result (caps
    under 64 and around it: a window then goes through the stack buffer and is cut).
    Caps of 64 and more are also tried with bit 63 set, the encoder's mode: it may
    stop with fewer than cap ends (never fewer than cap - 63) while text is left, and
    the caller resumes from the last end until that is the length."""
    cap = ctx.rng.choice([1, 2, 3, 5, 63, 64, 65, 100])
    short = cap >= 64 and ctx.rng.random() < 0.5
    ptr, _ = arena.place(data, "end")
    ctx.on(f"{name}, resumed with cap {cap}{' (bit 63)' if short else ''}")
    got_all, pos = [], 0
    while True:
        full, out = out_array(cap)
        got = ctx.call("asmbpe_split_offsets", ptr, len(data), pos, ffi.from_buffer("uint64_t[]", out),
                       cap | (1 << 63 if short else 0), pid)
        if not margins_intact(full, cap) or got > cap:
            ctx.fail(f"asmbpe_split_offsets: {name}: cap {cap}: wrote outside out[0..cap)")
            return
        got_all += out[:got].tolist()
        if short:
            if not got or got_all[-1] >= len(data):
                break
            if got <= cap - 64:
                ctx.fail(f"asmbpe_split_offsets: {name}: cap {cap} (bit 63): stopped at {got} ends")
                return
        elif got < cap:
            break
        pos = got_all[-1]
    if got_all != ref:
        ctx.fail(f"asmbpe_split_offsets: {name}: resumed with cap {cap}: {first_difference(got_all, ref)}")


def _diff_at(a: list[int], b: list[int]) -> int:
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return min(x, y)
    return min(a[-1] if a else 0, b[-1] if b else 0)


def arena_off(ptr) -> int:
    return int(ffi.cast("uintptr_t", ptr))


def check_pretok_next(ctx: Ctx, pretok: str = "seed") -> None:
    pid, reference = PRETOKENIZERS[pretok]
    fname = _checked_name("asmbpe_pretok_next", pretok)
    arena = GuardedArena(MB + 4096)
    for i, (name, data) in enumerate(_split_cases(ctx)):
        n = len(data)
        if n > 4096 and i % 2:
            continue            # the chunk-by-chunk walk is slow; half the long runs
        if pretok != "seed" and n > 70_000:
            continue
        ref = reference(data)
        anchor, align = placements(n, i)[i % 4]
        ptr, _ = arena.place(data, anchor, align)
        case = f"{name}, {anchor}-anchored, align {arena_off(ptr) % 64}"
        ctx.on(case)
        asm, pos = [], 0
        fn = ctx.L.asmbpe_pretok_next
        while pos < n:
            # the first chunks through the trampoline, the rest directly (speed)
            nxt = ctx.call("asmbpe_pretok_next", ptr, n, pos, pid) if len(asm) < 64 else fn(ptr, n, pos, pid)
            if not pos < nxt <= n:
                ctx.fail(f"{fname}: {case}: from {pos} returned {nxt}")
                break
            asm.append(nxt)
            pos = nxt
        if ctx.call("asmbpe_pretok_next", ptr, n, n, pid) != n:
            ctx.fail(f"{fname}: {case}: pos == len must return len")
        if asm != ref:
            ctx.fail(f"{fname}: {case}: {first_difference(asm, ref)}; "
                     + hexwindow(data, _diff_at(asm, ref)))
    arena.close()


for _name in PRETOKENIZERS:
    register(_checked_name("asmbpe_split_offsets", _name))(
        lambda ctx, _p=_name: check_split_offsets(ctx, _p))
    register(_checked_name("asmbpe_pretok_next", _name))(
        lambda ctx, _p=_name: check_pretok_next(ctx, _p))


@register("asmbpe_memeq")
def check_memeq(ctx: Ctx) -> None:
    A, B = GuardedArena(8192), GuardedArena(8192)
    rng = ctx.rng

    def one(a: bytes, b: bytes, case: str, anchor: str = "end", align_a=None, align_b=None) -> None:
        pa, _ = A.place(a, anchor, align_a)
        pb, _ = B.place(b, anchor, align_b)
        ctx.on(case)
        got = ctx.call("asmbpe_memeq", pa, pb, len(a)) & 0xFFFFFFFF
        want = int(a == b)
        if got != want:
            where = next((i for i in range(len(a)) if a[i] != b[i]), None)
            ctx.fail(f"asmbpe_memeq: {case}: returned {got}, want {want}"
                     + (f" (first differing offset {where})" if where is not None else ""))

    for n in range(0, 301):
        for anchor in ("end", "start"):
            aligns = [(None, None), (rng.randrange(64), rng.randrange(64)), (n % 64, (n * 5 + 3) % 64)]
            for ala, alb in aligns:
                a = rng.randbytes(n)
                one(a, a, f"equal len {n} {anchor} align {ala}/{alb}", anchor, ala, alb)
                if n:
                    k = rng.randrange(n)
                    b = bytearray(a)
                    b[k] ^= 1 << rng.randrange(8)
                    one(a, bytes(b), f"len {n} differing at {k} {anchor}", anchor, ala, alb)
        if n:
            for k in (0, n - 1):            # first and last byte
                b = bytearray(rng.randbytes(n))
                c = bytearray(b)
                c[k] ^= 0x80
                one(bytes(b), bytes(c), f"len {n} differing at byte {k}")
    # the regression the original bug missed: what precedes a short range must not count
    for n in range(1, 8):
        chunk = rng.randbytes(n)
        pa, _ = A.place(b"\x01" * 7 + chunk, "end")
        pb, _ = B.place(b"\x02" * 7 + chunk, "end")
        ctx.on(f"equal len {n} after different bytes")
        if ctx.call("asmbpe_memeq", pa + 7, pb + 7, n) & 0xFFFFFFFF != 1:
            ctx.fail(f"asmbpe_memeq: equal {n}-byte ranges preceded by different bytes compare unequal")
        other = bytes((x + 1) & 0xFF for x in chunk)
        pa, _ = A.place(b"\x05" * 7 + chunk, "end")
        pb, _ = B.place(b"\x05" * 7 + other, "end")
        ctx.on(f"different len {n} after the same bytes")
        if ctx.call("asmbpe_memeq", pa + 7, pb + 7, n) & 0xFFFFFFFF != 0:
            ctx.fail(f"asmbpe_memeq: different {n}-byte ranges preceded by the same bytes compare equal")
    A.close()
    B.close()


@register("asmbpe_fnv1a64")
def check_fnv1a64(ctx: Ctx) -> None:
    """FNV-1a 64 == the twin, lengths 0..300 at every alignment; and with the text
    touching each guard page (no padding: it reads exactly the n bytes)."""
    A = GuardedArena(8192)
    rng = ctx.rng
    for n in range(0, 301):
        for anchor in ("end", "start"):
            for align, pad in ((None, 0), (rng.randrange(64), PAD), (n % 64, PAD)):
                data = rng.randbytes(n)
                ptr, _ = A.place(data, anchor, align, pad=pad)
                ctx.on(f"len {n} {anchor} align {align} pad {pad}")
                got = ctx.call("asmbpe_fnv1a64", ptr, n) & 0xFFFFFFFFFFFFFFFF
                want = twin.fnv1a64(data)
                if got != want:
                    ctx.fail(f"asmbpe_fnv1a64: {n} bytes {anchor} align {align} pad {pad}: "
                             f"0x{got:016x}, want 0x{want:016x}")
    A.close()


def _docs_text(ctx: Ctx, n_docs: int, doc_len: int) -> list[bytes]:
    return [random_text(ctx.rng, ctx.rng.randrange(0, doc_len + 1)) for _ in range(n_docs)]


def _asm_count(ctx: Ctx, arena: GuardedArena, docs: list[bytes], threads: int, maxw: int,
               anchor: str, case: str) -> dict[bytes, int] | None:
    """Count `docs` (one guarded buffer) with the library, every call checked;
    returns word -> count, or None after reporting a failure."""
    ptr, _ = arena.place(b"".join(docs), anchor)
    ends = np.cumsum([len(d) for d in docs], dtype=np.uint64)
    full, out = out_array(len(ends))
    out[:] = ends
    ctx.on(case)
    tab = ctx.call("asmbpe_wordtab_new")
    if not tab:
        ctx.fail(f"asmbpe_wordtab_new: {case}: returned NULL")
        return None
    n = ctx.call("asmbpe_count_words", tab, ptr, ffi.from_buffer("uint64_t[]", out),
                 len(docs), threads, maxw, 1)
    n = n - (1 << 64) if n >> 63 else n
    if n < 0:
        ctx.fail(f"asmbpe_count_words: {case}: status {n}")
        return None
    if ctx.call("asmbpe_wordtab_size", tab) != n:
        ctx.fail(f"asmbpe_wordtab_size: {case}: differs from count_words' {n}")
    nbytes = ctx.call("asmbpe_wordtab_key_bytes", tab)
    wb_full = np.full(nbytes + 128, 0x99, dtype=np.uint8)
    e_full, e = out_array(max(n, 1))
    c_full, c = out_array(max(n, 1))
    got = ctx.call("asmbpe_wordtab_export", tab, ffi.from_buffer("uint8_t[]", wb_full[64:]),
                   ffi.from_buffer("uint64_t[]", e), ffi.from_buffer("uint64_t[]", c))
    if got != n or not margins_intact(e_full, n) or not margins_intact(c_full, n) \
            or np.any(wb_full[:64] != 0x99) or np.any(wb_full[64 + nbytes:] != 0x99):
        ctx.fail(f"asmbpe_wordtab_export: {case}: wrote {got} words or outside its arrays")
    total = ctx.call("asmbpe_wordtab_total", tab)
    ctx.call("asmbpe_wordtab_free", tab)
    raw = wb_full[64:64 + nbytes].tobytes()
    ends_l = e[:n].tolist()
    words = {raw[s:t]: int(k) for s, t, k in zip([0] + ends_l[:-1], ends_l, c[:n].tolist())}
    if total != sum(words.values()):
        ctx.fail(f"asmbpe_wordtab_total: {case}: {total}, words add up to {sum(words.values())}")
    return words


@register("asmbpe_count_words")
def check_count_words(ctx: Ctx) -> None:
    arena = GuardedArena(MB + 4096)
    cases = []
    for i, (name, data) in enumerate(edge_texts(ctx.rng)):
        if len(data) <= 4096 and i % 7:
            continue                    # a sample of the small edge texts
        cuts = sorted(ctx.rng.randrange(len(data) + 1) for _ in range(ctx.rng.randrange(4)))
        docs = [data[s:t] for s, t in zip([0] + cuts, cuts + [len(data)])]
        cases.append((name, docs))
    for k in range(max(1, ctx.n_random // 50)):
        cases.append((f"random documents #{k}", _docs_text(ctx, ctx.rng.randrange(1, 9), 400)))
    for i, (name, docs) in enumerate(cases):
        maxw = [256, 0, 1, 5, 3000][i % 5]
        threads = [1, 2, 3, 8][i % 4]
        want = twin.count_words(docs, max_word_bytes=maxw, pretokenizer="seed")
        anchor = ("end", "start")[i % 2]
        case = f"{name}: {len(docs)} documents, max_word_bytes {maxw}, {threads} threads, {anchor}-anchored"
        got = _asm_count(ctx, arena, docs, threads, maxw, anchor, case)
        if got is not None and got != dict(want):
            diff = next((w for w in set(got) | set(want) if got.get(w) != want.get(w)), None)
            ctx.fail(f"asmbpe_count_words: {case}: word {diff!r} counted {got.get(diff)}, twin {want.get(diff)}")
    ctx.on("threads = 0 is refused")
    tab = ctx.call("asmbpe_wordtab_new")
    ptr, _ = arena.place(b"abc", "end")
    ends = np.array([3], dtype=np.uint64)
    st = ctx.call("asmbpe_count_words", tab, ptr, ffi.from_buffer("uint64_t[]", ends), 1, 0, 256, 1)
    if st != (1 << 64) - 1:
        ctx.fail(f"asmbpe_count_words: threads 0 gave {st}, want ASMBPE_EINVAL")
    ctx.call("asmbpe_wordtab_free", tab)
    arena.close()


@register("asmbpe_train")
def check_train(ctx: Ctx) -> None:
    _check_train(ctx, "asmbpe_train", 16)


@register("asmbpe_train32")
def check_train32(ctx: Ctx) -> None:
    """The u32 build of the trainer (train.inc's TOK32): the same cases, merges as
    u64 left | right << 32; its default first learns on u16 tokens and widens W, so
    ASMBPE_WIDE_ONLY (8) runs u32 tokens throughout, and stats[ASMBPE_TS_NARROW]
    moves the widening to after 3 merges."""
    _check_train(ctx, "asmbpe_train32", 32)


def _check_train(ctx: Ctx, fn: str, shift: int) -> None:
    arena = GuardedArena(MB + 4096)
    mtype, ctype = (np.uint32, "uint32_t[]") if shift == 16 else (np.uint64, "uint64_t[]")
    cases = [("one repeated byte", [b"a" * 50, b"aaa aaaa aa"]),
             ("no pairs", [b"a b c d e f"]),
             ("single word", [b"tokenization"]),
             ("empty", [b""])]
    for k in range(max(1, ctx.n_random // 100)):
        cases.append((f"random documents #{k}", _docs_text(ctx, ctx.rng.randrange(1, 6), 600)))
    for i, (name, docs) in enumerate(cases):
        n_merges = [40, 5, 200][i % 3]
        want = twin.train(docs, 256 + 16 + n_merges, pretokenizer="seed")
        want_m = [(int(a) | int(b) << shift) for a, b in want.merges]
        want_c = want.counts.tolist()
        runs = [(0, 1, 0), (1, 1, 0), (2, 3, 0), (2, 8, 0)]
        if shift == 32:
            runs += [(8, 1, 0), (10, 3, 0), (2, 2, 3), (0, 3, 1)]
        for flags, threads, narrow in runs:
            case = f"{name}: {n_merges} merges, flags {flags}, {threads} threads, narrow {narrow}"
            ptr, _ = arena.place(b"".join(docs), "end")
            ends = np.cumsum([len(d) for d in docs], dtype=np.uint64)
            ctx.on(case)
            tab = ctx.call("asmbpe_wordtab_new")
            ctx.call("asmbpe_count_words", tab, ptr, ffi.from_buffer("uint64_t[]", ends),
                     len(docs), threads, 256, 1)
            merges32 = np.zeros(n_merges + 32, dtype=mtype)
            stats = np.zeros(64, dtype=np.uint64)
            stats[int(ctx.L.ASMBPE_TS_NARROW)] = narrow
            c_full, counts = out_array(n_merges)
            got = ctx.call(fn, tab, n_merges, 1, threads, flags,
                           ffi.from_buffer(ctype, merges32[16:]),
                           ffi.from_buffer("uint64_t[]", counts),
                           ffi.from_buffer("uint64_t[]", stats))
            ctx.call("asmbpe_wordtab_free", tab)
            got = got - (1 << 64) if got >> 63 else got
            if np.any(stats[32:]):
                ctx.fail(f"{fn}: {case}: wrote past the stats it owns")
            if got != len(want_m):
                ctx.fail(f"{fn}: {case}: learned {got}, twin {len(want_m)}")
                continue
            if merges32[16:16 + got].tolist() != want_m or counts[:got].tolist() != want_c:
                i0 = next(j for j in range(got) if merges32[16 + j] != want_m[j] or counts[j] != want_c[j])
                ctx.fail(f"{fn}: {case}: merge {i0} is {int(merges32[16 + i0]):#x} x{int(counts[i0])}, "
                         f"twin {want_m[i0]:#x} x{want_c[i0]}")
            if np.any(merges32[:16]) or np.any(merges32[16 + n_merges:]) or not margins_intact(c_full, got):
                ctx.fail(f"{fn}: {case}: wrote outside merges/counts")
    arena.close()


def _merge_tables(rng: random.Random) -> list[tuple[str, np.ndarray]]:
    """Merge tables for the encoder: hand-made runs of 'a' and of spaces (long
    chunks, overlapping pairs), and tables learned (by the twin) from texty and
    random text, so that real-looking pairs of every kind occur."""
    runs = [(97, 97), (256, 256), (257, 257), (258, 258), (32, 32), (260, 260), (97, 256),
            (261, 32), (98, 99), (97, 98), (265, 99)]       # ends with (a,b),(ab,c): tiktoken's case
    tables = [("runs", np.array(runs, dtype=np.uint16))]
    for k in range(2):
        docs = [random_text(rng, rng.randrange(200, 2000)) for _ in range(20)]
        tables.append((f"learned #{k}", twin.train(docs, 256 + 16 + 300, pretokenizer="seed").merges))
    return tables


def _asm_encode(ctx: Ctx, arena: GuardedArena, enc, docs: list[bytes], threads: int, flags: int,
                anchor: str, align: int | None, case: str):
    """Encode `docs` (one guarded buffer) through the trampoline; (ids, counts) or None
    after reporting a failure. The output arrays carry margins that must survive.
    flags & DOCS: through asmbpe_encode_docs, the documents one after another with no
    padding at all (the first or the last touching a guard page), by pointer."""
    by_ptr = bool(flags & DOCS)
    flags &= ~DOCS
    ptr, _ = arena.place(b"".join(docs), anchor, align, pad=0 if by_ptr else PAD)
    ends_full, ends = out_array(len(docs))
    ends[:] = np.cumsum([len(d) for d in docs], dtype=np.uint64)
    cap = int(ends[-1]) + len(docs)
    out_full = np.full(cap + 64, 0x9999, dtype=np.uint16)
    c_full, counts = out_array(len(docs))
    # with ASMBPE_ENC_CLAIMS, thread 0's ids go to `front` (a buffer of its own,
    # with margins) or, front NULL, to out; without, the argument is garbage that
    # must not be read
    claims = bool(flags & int(ctx.L.ASMBPE_ENC_CLAIMS))
    front_full = out_full
    front = ctx.rng.getrandbits(64)
    if claims:
        front = 0
        if ctx.rng.random() < 0.75:
            front_full = np.full(cap + 64, 0x9999, dtype=np.uint16)
            front = ffi.from_buffer("uint16_t[]", front_full[32:])
    ctx.on(case)
    if by_ptr:
        starts = [0] + ends[:-1].tolist()
        table = ffi.new("uint8_t *[]", [ptr + s for s in starts])
        got = ctx.call("asmbpe_encode_docs", enc, table, ffi.from_buffer("uint64_t[]", ends),
                       len(docs), threads, flags, ffi.from_buffer("uint16_t[]", out_full[32:]),
                       ffi.from_buffer("uint64_t[]", counts), front)
    else:
        got = ctx.call("asmbpe_encode", enc, ptr, ffi.from_buffer("uint64_t[]", ends), len(docs),
                       threads, flags, ffi.from_buffer("uint16_t[]", out_full[32:]),
                       ffi.from_buffer("uint64_t[]", counts), front)
    got = got - (1 << 64) if got >> 63 else got
    if got < 0:
        ctx.fail(f"asmbpe_encode: {case}: status {got}")
        return None
    if any(np.any(f[:32] != 0x9999) or np.any(f[32 + cap:] != 0x9999)
           for f in (out_full, front_full)) \
            or not margins_intact(c_full, len(docs)) or not margins_intact(ends_full, len(docs)):
        ctx.fail(f"asmbpe_encode: {case}: wrote outside out/front/counts (or changed doc_ends)")
    if claims:                                  # runs left where written: gather
        from ..encoder import _gather_claims     # them (clears the marks)
        _gather_claims(out_full[32:32 + cap], ends, counts, front_full[32:32 + cap])
        ids = front_full[32:32 + got]
    else:
        ids = out_full[32:32 + got]
    if int(counts.sum()) != got:
        ctx.fail(f"asmbpe_encode: {case}: counts add up to {int(counts.sum())}, returned {got}")
    return ids.tolist(), counts.tolist()


def _check_decode(ctx: Ctx, enc, ids: list[int], text: bytes, case: str) -> None:
    """asmbpe_decode of ids gives text back; with a cap short of it, writes nothing past
    the cap and still returns the full size; an id out of range is refused."""
    arr = np.array(ids + [0] * 8, dtype=np.uint16)
    for cap in (len(text), len(text) // 2):
        full = np.full(cap + 128, 0x99, dtype=np.uint8)
        ctx.on(f"asmbpe_decode: {case}: cap {cap}")
        got = ctx.call("asmbpe_decode", enc, ffi.from_buffer("uint16_t[]", arr), len(ids),
                       ffi.from_buffer("uint8_t[]", full[64:]), cap)
        if got != len(text):
            ctx.fail(f"asmbpe_decode: {case}: cap {cap}: returned {got}, want {len(text)}")
        elif np.any(full[:64] != 0x99) or np.any(full[64 + cap:] != 0x99):
            ctx.fail(f"asmbpe_decode: {case}: cap {cap}: wrote outside [0, cap)")
        elif cap == len(text) and full[64:64 + cap].tobytes() != text:
            ctx.fail(f"asmbpe_decode: {case}: the bytes differ from the text")
    if ids:
        arr[len(ids) // 2] = 0xFFFF
        ctx.on(f"asmbpe_decode: {case}: an id out of range")
        full = np.zeros(len(text) + 64, dtype=np.uint8)
        got = ctx.call("asmbpe_decode", enc, ffi.from_buffer("uint16_t[]", arr), len(ids),
                       ffi.from_buffer("uint8_t[]", full), len(text))
        if got != (1 << 64) - 1:
            ctx.fail(f"asmbpe_decode: {case}: id 0xFFFF gave {got}, want ASMBPE_EINVAL")


@register("asmbpe_encode")
def check_encode(ctx: Ctx) -> None:
    arena = GuardedArena(MB + 4096)
    texts = [(name, data) for i, (name, data) in enumerate(edge_texts(ctx.rng))
             if len(data) <= 4096 or i % 3 == 0]
    for k in range(max(1, ctx.n_random // 20)):
        texts.append((f"random text #{k}", random_text(ctx.rng, ctx.rng.randrange(0, 3000))))
    for t_name, merges in _merge_tables(ctx.rng):
        ctx.on(f"asmbpe_enc_new: {t_name}")
        m32 = np.ascontiguousarray(merges, dtype="<u2").view("<u4").ravel()
        enc = ctx.call("asmbpe_enc_new", ffi.from_buffer("uint32_t[]", m32), len(m32))
        if not enc:
            ctx.fail(f"asmbpe_enc_new: {t_name}: returned NULL")
            continue
        ranks = twin.merge_ranks(merges)
        bos = 256 + len(merges)
        for i, (name, data) in enumerate(texts):
            big = len(data) > 4096
            if big and (i + len(t_name)) % 2:
                continue                        # half the 1 MB runs per table
            if big:
                data = data[:MB // 8] if t_name != "runs" else data   # the twin is slow
            n_cuts = ctx.rng.randrange(3) if i % 2 else ctx.rng.randrange(40)  # (the threads'
            cuts = sorted(ctx.rng.randrange(len(data) + 1) for _ in range(n_cuts))  # claims)
            docs = [data[s:t] for s, t in zip([0] + cuts, cuts + [len(data)])]
            want_counts, want = [], []
            for d in docs:
                ids = ([bos] if i % 2 else []) + [x for c in twin.split(d, "seed") for x in twin.encode_chunk(ranks, c)]
                want += ids
                want_counts.append(len(ids))
            flags = (i % 2) | (2 if i % 3 == 0 else 0) | (4 if i % 4 == 1 else 0) \
                | (8 if i % 5 == 3 else 0) | (DOCS if i % 3 == 1 else INTERNAL if i % 7 == 2 else 0)
            threads = [1, 2, 3, 8][i % 4]
            anchor = ("end", "start")[(i // 2) % 2]
            align = None if i % 5 else (i * 7) % 64
            case = (f"{t_name}: {name}: {len(docs)} documents, {threads} threads, flags {flags}, "
                    f"{anchor}-anchored, align {align}")
            res = _asm_encode(ctx, arena, enc, docs, threads, flags, anchor, align, case)
            if res is None:
                continue
            ids, counts = res
            if not flags & 1:                   # no <|bos|>: decode them back
                _check_decode(ctx, enc, ids, b"".join(docs), case)
            if ids != want or counts != want_counts:
                at = next((j for j, (x, y) in enumerate(zip(ids, want)) if x != y), min(len(ids), len(want)))
                ctx.fail(f"asmbpe_encode: {case}: id {at} is {ids[at] if at < len(ids) else None}, "
                         f"twin {want[at] if at < len(want) else None} (counts {counts[:4]} vs {want_counts[:4]})")
        ctx.on(f"asmbpe_enc_stats: {t_name}")
        n_es = int(ctx.L.ASMBPE_ES_COUNT)
        for tid in (0, 1, (1 << 64) - 1):
            stats = np.zeros(n_es + 2 * MARGIN, dtype=np.uint64)
            ctx.call("asmbpe_enc_stats", enc, tid, ffi.from_buffer("uint64_t[]", stats[MARGIN:]))
            if np.any(stats[:MARGIN]) or np.any(stats[MARGIN + n_es:]) or stats[MARGIN + 1] > stats[MARGIN]:
                ctx.fail(f"asmbpe_enc_stats: {t_name}: thread {tid}: bad counters "
                         f"{stats[MARGIN:MARGIN + n_es].tolist()}")
        ctx.on(f"threads = 0 is refused: {t_name}")
        ptr, _ = arena.place(b"abc", "end")
        ends = np.array([3], dtype=np.uint64)
        out = np.zeros(8, dtype=np.uint16)
        counts = np.zeros(1, dtype=np.uint64)
        st = ctx.call("asmbpe_encode", enc, ptr, ffi.from_buffer("uint64_t[]", ends), 1, 0, 0,
                      ffi.from_buffer("uint16_t[]", out), ffi.from_buffer("uint64_t[]", counts))
        if st != (1 << 64) - 1:
            ctx.fail(f"asmbpe_encode: threads 0 gave {st}, want ASMBPE_EINVAL")
        ctx.call("asmbpe_enc_free", enc)
    arena.close()


# --------------------------------------------------------------------------- rank encoder

def _rank_vocabs(rng: random.Random) -> list[tuple[str, object]]:
    """Small vocabularies for the rank encoder (harness.vocab.Vocab): the 256 bytes at
    shuffled ids among tokens made by joining two earlier ones (texty bytes first, so
    that texts merge), as a rank file (whole chunks) and as merges (no whole chunks);
    and a regular rank file, whose long chunks the library cuts (_regular_rank_vocab)."""
    from ..vocab import Vocab
    tokens = [bytes([b]) for b in range(256)]
    seen = set(tokens)
    common = [t for t in TEXTY if len(t) == 1] + [b"e", b"t", b"a", b" ", b"\xc3", b"\xa9"]
    pool = list(common)
    while len(tokens) < 900:
        t = rng.choice(pool) + rng.choice(pool)
        if t not in seen and len(t) <= 40:
            seen.add(t)
            tokens.append(t)
            pool.append(t)
    order = list(range(len(tokens)))
    rng.shuffle(order)
    ranked = [tokens[i] for i in order]
    rank_vocab = Vocab("checkasm ranks", ranked, "gpt2", {}, None, True)
    index = {t: i for i, t in enumerate(ranked)}
    merges = []                                 # the same tokens as merges, in rank order
    for t in ranked:
        if len(t) > 1:
            for k in range(1, len(t)):
                if t[:k] in index and t[k:] in index:
                    merges.append((index[t[:k]], index[t[k:]]))
                    break
    merge_vocab = Vocab("checkasm merges", ranked, "nanochat", {}, merges, False)
    by_pairs = Vocab("checkasm ranks by pairs", ranked, "gpt2", {}, None, True)
    return [("ranks", rank_vocab), ("ranks by pairs", by_pairs), ("merges", merge_vocab),
            ("ranks cut", _regular_rank_vocab(rng))]


def _regular_rank_vocab(rng: random.Random):
    """A rank file whose every token merges to itself (Vocab.regular), so that the library
    cuts its long chunks (rk_split with the filter and renc.reach16): letter tokens of 4,
    8, 16 and 32 bytes (regular_levels)."""
    v, _ = regular_levels(rng, "checkasm ranks cut", (12, 12, 40, 100, 150, 30))
    return v


def regular_levels(rng: random.Random, name: str, counts: tuple[int, ...]):
    """(a regular rank file, its levels): the bytes, then letter tokens of 2, 2, 4, 8, 16
    and 32 bytes, at most counts[k] at level k (a count of 0 ends the levels early), each
    level two halves from disjoint sets (pairs a-d x e-h and i-l x m-p, then fours,
    eights and sixteens of two sets each), so that no token spans a boundary between
    halves and each merges to itself (Vocab.regular)."""
    from ..vocab import Vocab
    tokens = [bytes([b]) for b in range(256)]

    def level(left: list[bytes], right: list[bytes], n: int) -> list[bytes]:
        made = set()
        while len(made) < min(n, len(left) * len(right)):
            made.add(rng.choice(left) + rng.choice(right))
        made = sorted(made)
        tokens.extend(made)
        return made

    def letters(s: str) -> list[bytes]:
        return [bytes([c]) for c in s.encode()]

    levels = [level(letters("abcd"), letters("efgh"), counts[0]),
              level(letters("ijkl"), letters("mnop"), counts[1])]
    levels.append(level(levels[0], levels[1], counts[2]))
    for n in counts[3:]:
        if not n:
            break
        last = levels[-1]
        levels.append(level(last[: len(last) // 2], last[len(last) // 2:], n))
    return Vocab(name, tokens, "gpt2", {}, None, True, regular=True), levels


def _renc_new(ctx: Ctx, v) -> int:
    """The library's encoder of one of _rank_vocabs, with a rank file's flags as
    harness.rank gives them (ASMBPE_RENC_RANKS: pairs from the substrings' ids), and for
    "ranks by pairs" whole chunks only, so that its misses take the pair table as a
    tokenizer.json's do."""
    from ..rank import RENC_WHOLE, _flags
    from ..vocab import byte_ids, pair_table
    flags = RENC_WHOLE if v.name == "checkasm ranks by pairs" else _flags(v)
    rows = np.ascontiguousarray(np.stack(pair_table(v), axis=1), dtype=np.uint32)
    ids = byte_ids(v)
    offsets = np.zeros(len(v.tokens) + 1, dtype=np.uint64)
    np.cumsum([len(t) for t in v.tokens], out=offsets[1:])
    blob = np.frombuffer(b"".join(v.tokens), dtype=np.uint8)
    ctx.on(f"asmbpe_renc_new: {v.name}")
    return ctx.call("asmbpe_renc_new", ffi.from_buffer("uint32_t[]", rows), len(rows),
                    ffi.from_buffer("uint32_t[]", ids), ffi.from_buffer("uint8_t[]", blob),
                    ffi.from_buffer("uint64_t[]", offsets), len(v.tokens),
                    flags)


def _u32_out(n: int) -> tuple[np.ndarray, np.ndarray]:
    full = np.full(n + 2 * MARGIN, 0x99999999, dtype=np.uint32)
    return full, full[MARGIN:MARGIN + n]


@register("asmbpe_rank_pairs")
def check_rank_pairs(ctx: Ctx) -> None:
    """A rank file's pair table: the rows of harness.vocab.pair_table (its twin, sorted
    here), the token bytes touching each guard page at several alignments (no byte read
    outside them), the rows inside margins; tokens of up to 300 bytes (the crc's and the
    compare's 8-byte steps), equal tokens (the later one found, as the twin's dict), no
    tokens, too many tokens."""
    from ..rank import pair_rows_room
    from ..vocab import Vocab, pair_table
    vocabs = [(name, v.tokens) for name, v in _rank_vocabs(ctx.rng)[:1]]
    long_tokens = [bytes([b]) for b in range(256)]
    for n in (8, 9, 15, 16, 17, 31, 64, 300):
        w = texty(ctx.rng, n)
        long_tokens += [w, w[:n // 2], w[n // 2:], w[:3], w[3:]]
    vocabs.append(("long tokens", list(dict.fromkeys(long_tokens))))
    vocabs.append(("equal tokens", [b"a", b"b", b"ab", b"ba", b"ab", b"aba", b"b", b"bab"]))
    vocabs.append(("one byte", [b"x"]))
    vocabs.append(("empty tokens", [b"", b"a", b"b", b"ab", b"", b"bab", b"ba"]))
    arena = GuardedArena(1 << 16)
    for i, (name, tokens) in enumerate(vocabs):
        v = Vocab(name, tokens, "gpt2", {}, None, True)
        want = np.stack(pair_table(v), axis=1) if len(tokens) > 1 else np.zeros((0, 4))
        offsets = np.zeros(len(tokens) + 1, dtype=np.uint64)
        np.cumsum([len(t) for t in tokens], out=offsets[1:])
        blob = b"".join(tokens)
        cap = pair_rows_room(offsets)
        for anchor, align in placements(len(blob), i):
            case = f"{name}: {len(tokens)} tokens, {anchor}-anchored, align {align}"
            ctx.on(case)
            ptr, _ = arena.place(blob, anchor, align)
            full = np.full((cap + 2 * MARGIN, 4), 0x99999999, dtype=np.uint32)
            got = ctx.call("asmbpe_rank_pairs", ptr, ffi.from_buffer("uint64_t[]", offsets),
                           len(tokens), ffi.from_buffer("uint32_t[]", full[MARGIN:]))
            rows = full[MARGIN:MARGIN + min(got, cap)]
            rows = rows[np.lexsort((rows[:, 1], rows[:, 0]))]
            if got > cap or not np.array_equal(rows, want):
                ctx.fail(f"asmbpe_rank_pairs: {case}: {got} rows, the twin {len(want)}")
            elif np.any(full[:MARGIN] != 0x99999999) or np.any(full[MARGIN + got:] != 0x99999999):
                ctx.fail(f"asmbpe_rank_pairs: {case}: wrote outside rows[0..{got})")
    ctx.on("no tokens")
    offsets = np.zeros(1, dtype=np.uint64)
    if ctx.call("asmbpe_rank_pairs", 0, ffi.from_buffer("uint64_t[]", offsets), 0, 0) != 0:
        ctx.fail("asmbpe_rank_pairs: no tokens gave rows")
    ctx.on("2^20 tokens are refused")
    if ctx.call("asmbpe_rank_pairs", 0, ffi.from_buffer("uint64_t[]", offsets), 1 << 20, 0) \
            != (1 << 64) - 1:
        ctx.fail("asmbpe_rank_pairs: 2^20 tokens, want ASMBPE_EINVAL")
    arena.close()


@register("asmbpe_renc_chunk")
def check_renc_chunk(ctx: Ctx) -> None:
    """One chunk (any bytes, 1..300 and runs of 20,000: the scan and the heap) against
    harness.dev.rank_twin.encode_chunk, at both guard pages and every alignment."""
    from . import rank_twin
    arena = GuardedArena(MB + 4096)
    for v_name, v in _rank_vocabs(ctx.rng):
        enc = _renc_new(ctx, v)
        if not enc:
            ctx.fail(f"asmbpe_renc_new: {v_name}: NULL")
            continue
        t = rank_twin.tables(v)
        cases = [(f"texty len {n}", texty(ctx.rng, n)) for n in range(1, 301)]
        cases += [(f"random bytes len {n}", ctx.rng.randbytes(n)) for n in range(1, 301, 7)]
        cases += [("20,000 of 'e'", b"e" * 20_000), ("20,000 texty", texty(ctx.rng, 20_000)),
                  ("129 of 'a'", b"a" * 129), ("128 of 'a'", b"a" * 128)]
        for i, (name, data) in enumerate(cases):
            want = rank_twin.encode_chunk(data, v, t)
            for anchor, align in placements(len(data), i)[:2 if len(data) > 300 else 4]:
                ptr, _ = arena.place(data, anchor, align)
                case = f"{v_name}: {name}, {anchor}-anchored, align {align}"
                ctx.on(case)
                full, out = _u32_out(len(data))
                got = ctx.call("asmbpe_renc_chunk", enc, ptr, len(data),
                               ffi.from_buffer("uint32_t[]", out))
                if got != len(want) or out[:got].tolist() != want:
                    ctx.fail(f"asmbpe_renc_chunk: {case}: {got} ids, the twin {len(want)}: "
                             f"{first_difference(out[:max(got, 0)].tolist(), want)}")
                elif np.any(full[:MARGIN] != 0x99999999) or np.any(full[MARGIN + len(data):] != 0x99999999):
                    ctx.fail(f"asmbpe_renc_chunk: {case}: wrote outside out[0..len)")
        ctx.on(f"asmbpe_renc_free: {v_name}")
        ctx.call("asmbpe_renc_free", enc)
    ctx.on("asmbpe_renc_free(NULL)")
    ctx.call("asmbpe_renc_free", 0)
    arena.close()


def _long_words(rng: random.Random, v) -> bytes:
    """Words of 16..140 bytes made of the vocabulary's letter tokens, so that chunks of
    16..128 bytes meet the long-chunk path (and, where cutting is allowed, rk_split:
    pieces of one byte, table hits, misses, pieces longer than 15 bytes)."""
    letters = [t for t in v.tokens if t.isalpha()] or [b"a"]
    longer = [t for t in letters if len(t) >= 4] or letters    # (prefixes of long tokens)
    words = []
    for _ in range(rng.randrange(4, 40)):
        w, n = b" ", rng.randrange(16, 141)
        while len(w) < n:
            w += rng.choice(longer if rng.random() < 0.5 else letters)
        words.append(w)
    return b"".join(words)


@register("asmbpe_renc_text")
def check_renc_text(ctx: Ctx) -> None:
    """Whole texts (split by the vocabulary's pre-tokenizer, then each chunk) against
    harness.dev.rank_twin.encode; cap < len and an unknown pre-tokenizer are refused."""
    from . import rank_twin
    arena = GuardedArena(MB + 4096)
    for v_name, v in _rank_vocabs(ctx.rng):
        enc = _renc_new(ctx, v)
        pid = PRETOKENIZERS[v.pretokenizer][0]
        cases = list(edge_texts(ctx.rng))
        cases = [c for c in cases if len(c[1]) <= 4096]
        cases += [(f"random #{k}", random_text(ctx.rng, ctx.rng.randrange(0, 5000)))
                  for k in range(ctx.n_random // 50)]
        cases += [(f"long words #{k}", _long_words(ctx.rng, v)) for k in range(24)]
        for i, (name, data) in enumerate(cases):
            want = rank_twin.encode(data, v)
            n = len(data)
            anchor, align = placements(n, i)[i % 4]
            ptr, _ = arena.place(data, anchor, align)
            case = f"{v_name}: {name}, {anchor}-anchored, align {align}"
            ctx.on(case)
            full, out = _u32_out(max(n, 1))
            got = ctx.call("asmbpe_renc_text", enc, ptr, n, pid, ffi.from_buffer("uint32_t[]", out),
                           max(n, 1))
            if got != len(want) or out[:got].tolist() != want:
                ctx.fail(f"asmbpe_renc_text: {case}: {got} ids, the twin {len(want)}: "
                         f"{first_difference(out[:max(got, 0)].tolist(), want)}")
            elif np.any(full[:MARGIN] != 0x99999999) or np.any(full[MARGIN + max(n, 1):] != 0x99999999):
                ctx.fail(f"asmbpe_renc_text: {case}: wrote outside out[0..cap)")
        ptr, _ = arena.place(b"abc", "end")
        full, out = _u32_out(3)
        for pretok, cap, what in ((pid, 2, "cap < len"), (99, 3, "pretok 99")):
            ctx.on(f"{v_name}: {what} is refused")
            got = ctx.call("asmbpe_renc_text", enc, ptr, 3, pretok, ffi.from_buffer("uint32_t[]", out), cap)
            if got != (1 << 64) - 1:
                ctx.fail(f"asmbpe_renc_text: {what} gave {got}, want ASMBPE_EINVAL")
        ctx.call("asmbpe_renc_free", enc)
    arena.close()


@register("asmbpe_renc_decode")
def check_renc_decode(ctx: Ctx) -> None:
    """Random id lists (0..300 ids) back to bytes against the token table, with room
    to spare, exactly enough (the byte-by-byte end), too little (the size asked for,
    nothing written past cap), and an id out of range."""
    for v_name, v in _rank_vocabs(ctx.rng):
        enc = _renc_new(ctx, v)
        for k in range(120):
            n = k if k < 60 else ctx.rng.randrange(0, 301)
            ids = np.array([ctx.rng.randrange(len(v.tokens)) for _ in range(n)], dtype=np.uint32)
            want = b"".join(v.tokens[i] for i in ids.tolist())
            for room, what in ((len(want) + 40, "room to spare"), (len(want), "exact room"),
                               (max(len(want) - 1, 0), "one byte short")):
                case = f"{v_name}: {n} ids, {what}"
                ctx.on(case)
                full = np.full(room + 64, 0x99, dtype=np.uint8)
                got = ctx.call("asmbpe_renc_decode", enc, ffi.from_buffer("uint32_t[]", ids), n,
                               ffi.from_buffer("uint8_t[]", full[32:]), room)
                got = got - (1 << 64) if got >= 1 << 63 else got
                if room >= len(want):
                    if got != len(want) or full[32:32 + got].tobytes() != want:
                        ctx.fail(f"asmbpe_renc_decode: {case}: {got} bytes, want {len(want)}")
                elif got != -len(want) - 16:
                    ctx.fail(f"asmbpe_renc_decode: {case}: gave {got}, want {-len(want) - 16}")
                if np.any(full[:32] != 0x99) or np.any(full[32 + room:] != 0x99):
                    ctx.fail(f"asmbpe_renc_decode: {case}: wrote outside out[0..cap)")
        ctx.on(f"{v_name}: an id out of range")
        bad = np.array([0, len(v.tokens)], dtype=np.uint32)
        out = np.zeros(256, dtype=np.uint8)
        if ctx.call("asmbpe_renc_decode", enc, ffi.from_buffer("uint32_t[]", bad), 2,
                    ffi.from_buffer("uint8_t[]", out), 256) != (1 << 64) - 1:
            ctx.fail("asmbpe_renc_decode: an id out of range was not refused")
        ctx.call("asmbpe_renc_free", enc)


@register("asmbpe_renc_encode")
def check_renc_encode(ctx: Ctx) -> None:
    """Documents on 1, 2, 3 and 8 threads (each claiming the next, its ids in its own
    room, then moved into document order) against rank_twin.encode per document; the
    counts, the ids past the total untouched; bad arguments refused."""
    from . import rank_twin
    for v_name, v in _rank_vocabs(ctx.rng):
        enc = _renc_new(ctx, v)
        pid = PRETOKENIZERS[v.pretokenizer][0]
        docs = [random_text(ctx.rng, ctx.rng.choice([0, 1, 5, 64, 300, 3000])) for _ in range(40)]
        docs += [b"e" * 20_000, b"", texty(ctx.rng, 129)]
        want = [rank_twin.encode(d, v) for d in docs]
        flat = [i for w in want for i in w]
        buf = Padded(b"".join(docs))
        ends = np.cumsum([len(d) for d in docs]).astype(np.uint64)
        for threads in (1, 2, 3, 8):
            case = f"{v_name}: {len(docs)} documents, {threads} threads"
            ctx.on(case)
            full, out = _u32_out(len(buf.array) - 2 * PAD)
            counts = np.full(len(docs) + 2, 7, dtype=np.uint64)
            got = ctx.call("asmbpe_renc_encode", enc, buf.ptr, ffi.from_buffer("uint64_t[]", ends),
                           len(docs), threads, pid, ffi.from_buffer("uint32_t[]", out),
                           ffi.from_buffer("uint64_t[]", counts[1:]))
            if got != len(flat) or out[:got].tolist() != flat:
                ctx.fail(f"asmbpe_renc_encode: {case}: {got} ids, the twin {len(flat)}: "
                         f"{first_difference(out[:max(got, 0)].tolist(), flat)}")
            elif counts[1:-1].tolist() != [len(w) for w in want] or counts[0] != 7 or counts[-1] != 7:
                ctx.fail(f"asmbpe_renc_encode: {case}: counts differ (or written outside)")
            elif np.any(full[:MARGIN] != 0x99999999) or np.any(full[MARGIN + len(out):] != 0x99999999):
                ctx.fail(f"asmbpe_renc_encode: {case}: wrote outside out")
        for threads, pretok, what in ((0, pid, "threads 0"), (257, pid, "threads 257"),
                                      (1, 0, "pretok 0")):
            ctx.on(f"{v_name}: {what} is refused")
            got = ctx.call("asmbpe_renc_encode", enc, buf.ptr, ffi.from_buffer("uint64_t[]", ends),
                           len(docs), threads, pretok, ffi.from_buffer("uint32_t[]", out),
                           ffi.from_buffer("uint64_t[]", counts))
            if got != (1 << 64) - 1:
                ctx.fail(f"asmbpe_renc_encode: {what} gave {got}, want ASMBPE_EINVAL")
        ctx.call("asmbpe_renc_free", enc)


@register("asmbpe_renc_encode_docs")
def check_renc_encode_docs(ctx: Ctx) -> None:
    """Documents by pointer with no padding at all (joined in a guarded buffer whose
    first or last byte touches a guard page), on 1, 2, 3 and 8 threads, against
    rank_twin.encode per document; counts and the ids past the total as for
    asmbpe_renc_encode."""
    from . import rank_twin
    arena = GuardedArena(MB + 4096)
    for v_name, v in _rank_vocabs(ctx.rng):
        enc = _renc_new(ctx, v)
        pid = PRETOKENIZERS[v.pretokenizer][0]
        docs = [random_text(ctx.rng, ctx.rng.choice([0, 1, 5, 64, 300, 3000])) for _ in range(40)]
        docs += [texty(ctx.rng, 129), b"e" * 20_000]
        want = [rank_twin.encode(d, v) for d in docs]
        for k, threads in enumerate((1, 2, 3, 8)):
            anchor = ("start", "end")[k % 2]
            ptr, _ = arena.place(b"".join(docs[::-1] if anchor == "start" else docs), anchor,
                                 None, pad=0)
            order = docs[::-1] if anchor == "start" else docs
            o_ends = np.cumsum([len(d) for d in order]).astype(np.uint64)
            o_want = want[::-1] if anchor == "start" else want
            o_flat = [i for w in o_want for i in w]
            table = ffi.new("uint8_t *[]", [ptr + int(s) for s in [0] + o_ends[:-1].tolist()])
            case = f"{v_name}: {len(docs)} documents by pointer, {anchor}-anchored, {threads} threads"
            ctx.on(case)
            full, out = _u32_out(int(o_ends[-1]))
            counts = np.full(len(docs) + 2, 7, dtype=np.uint64)
            got = ctx.call("asmbpe_renc_encode_docs", enc, table,
                           ffi.from_buffer("uint64_t[]", o_ends), len(docs), threads, pid,
                           ffi.from_buffer("uint32_t[]", out), ffi.from_buffer("uint64_t[]", counts[1:]))
            if got != len(o_flat) or out[:got].tolist() != o_flat:
                ctx.fail(f"asmbpe_renc_encode_docs: {case}: {got} ids, the twin {len(o_flat)}: "
                         f"{first_difference(out[:max(got, 0)].tolist(), o_flat)}")
            elif counts[1:-1].tolist() != [len(w) for w in o_want] or counts[0] != 7 or counts[-1] != 7:
                ctx.fail(f"asmbpe_renc_encode_docs: {case}: counts differ (or written outside)")
            elif np.any(full[:MARGIN] != 0x99999999) or np.any(full[MARGIN + len(out):] != 0x99999999):
                ctx.fail(f"asmbpe_renc_encode_docs: {case}: wrote outside out")
        ctx.call("asmbpe_renc_free", enc)
    arena.close()


@register("asmbpe_enc_trim")
def check_enc_trim(ctx: Ctx) -> None:
    """The state pool: a freed encoder's thread states go to the pool, the next
    encoder's threads take them with another table's chunks in their caches and must
    encode as the twin does; trim hands back every state kept, and every byte."""
    L = ctx.L

    def mapped_now() -> int:
        L.asmbpe_mapped_peak(1)
        return int(L.asmbpe_mapped_peak(0))

    ctx.on("trim whatever the process kept")
    import gc
    gc.collect()                                # encoders the process left as garbage
    gc.disable()                                # are freed now, not during the check
    ctx.call("asmbpe_enc_trim")                 # (this child exits after it)
    if ctx.call("asmbpe_enc_trim") != 0:
        ctx.fail("asmbpe_enc_trim: a second trim found states")
    before = mapped_now()
    arena = GuardedArena(1 << 16)
    texts = [random_text(ctx.rng, ctx.rng.randrange(0, 4000)) for _ in range(12)]
    tables = [t for t in _merge_tables(ctx.rng) if t[0].startswith("learned")]
    for threads in (3, 1, 2):
        for t_name, merges in tables:           # each encoder takes the last one's states
            m32 = np.ascontiguousarray(merges, dtype="<u2").view("<u4").ravel()
            ctx.on(f"asmbpe_enc_new: {t_name}")
            enc = ctx.call("asmbpe_enc_new", ffi.from_buffer("uint32_t[]", m32), len(m32))
            ranks = twin.merge_ranks(merges)
            want = [x for d in texts for c in twin.split(d, "seed") for x in twin.encode_chunk(ranks, c)]
            for flags in (0, 2, 0):             # cached, uncached, cached again
                res = _asm_encode(ctx, arena, enc, texts, threads, flags, "end", None,
                                  f"{t_name}: {threads} threads, flags {flags}, states reused")
                if res is not None and res[0] != want:
                    at = next((j for j, (x, y) in enumerate(zip(res[0], want)) if x != y),
                              min(len(res[0]), len(want)))
                    ctx.fail(f"asmbpe_encode: {t_name}: {threads} threads, flags {flags}, with "
                             f"states from the pool: id {at} differs from the twin's")
            ctx.on(f"asmbpe_enc_free: {t_name}")
            ctx.call("asmbpe_enc_free", enc)
    # a state whose document buffer (a 4.4 MB document) and long-chunk arrays (a
    # 300 KB chunk) are over TS_POOL_KEEP: they are unmapped as it goes to the pool
    t_name, merges = tables[0]
    m32 = np.ascontiguousarray(merges, dtype="<u2").view("<u4").ravel()
    enc = ctx.call("asmbpe_enc_new", ffi.from_buffer("uint32_t[]", m32), len(m32))
    big = [b"a " * 2_200_000, b"a" * 300_000]
    for k, doc in enumerate(big):
        doc_ptrs = ffi.new("uint8_t *[]", [ffi.from_buffer(doc)])
        ends = np.array([len(doc)], dtype=np.uint64)
        out = np.zeros(len(doc) + 1, dtype=np.uint16)
        counts = np.zeros(1, dtype=np.uint64)
        ctx.on(f"asmbpe_encode_docs: a document of {len(doc)} bytes, then freed to the pool")
        got = ctx.call("asmbpe_encode_docs", enc, doc_ptrs, ffi.from_buffer("uint64_t[]", ends),
                       1, 1, 0, ffi.from_buffer("uint16_t[]", out),
                       ffi.from_buffer("uint64_t[]", counts), 0)
        back = np.zeros(len(doc) + 64, dtype=np.uint8)
        if got >> 63 or ctx.call("asmbpe_decode", enc, ffi.from_buffer("uint16_t[]", out), got,
                                 ffi.from_buffer("uint8_t[]", back), len(back)) != len(doc) \
                or back[:len(doc)].tobytes() != doc:
            ctx.fail(f"asmbpe_encode_docs: a document of {len(doc)} bytes does not decode back")
    ctx.call("asmbpe_enc_free", enc)
    ctx.on("asmbpe_enc_trim: the states of three threads")
    got = ctx.call("asmbpe_enc_trim")
    if got != 3:
        ctx.fail(f"asmbpe_enc_trim: returned {got}, want 3 (the states of threads 0-2)")
    if ctx.call("asmbpe_enc_trim") != 0:
        ctx.fail("asmbpe_enc_trim: the pool is not empty after a trim")
    if mapped_now() != before:
        ctx.fail(f"asmbpe_enc_trim: {mapped_now() - before} bytes still mapped after the "
                 "encoders were freed and the pool trimmed")
    arena.close()


# --------------------------------------------------------------------------- runner

def _run_child(entry: Entry, seed: int, n_random: int, wfd: int) -> None:
    with os.fdopen(wfd, "w") as pipe:
        ctx = Ctx(seed, pipe, n_random)
        try:
            entry.run(ctx)
        except CheckFailure as e:
            ctx.send(fail=str(e), case=ctx.case)
        except Exception as e:      # a bug in the check itself: report it
            ctx.send(fail=f"check raised {type(e).__name__}: {e}", case=ctx.case)
        ctx.send(done=True, calls=ctx.calls)


def run_one(entry: Entry, seed: int, n_random: int) -> tuple[bool, list[str], int]:
    """Run one function's checks in a forked child; (ok, failure lines, calls)."""
    rfd, wfd = os.pipe()
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:            # child
        os.close(rfd)
        import faulthandler
        faulthandler.disable()      # the parent reports a fault, with the input
        code = 0
        try:
            _run_child(entry, seed, n_random, wfd)
        except BaseException:
            code = 3
        os._exit(code)
    os.close(wfd)
    fails, case, done, calls = [], "", False, 0
    with os.fdopen(rfd) as pipe:
        for line in pipe:
            msg = json.loads(line)
            if "case" in msg:
                case = msg["case"]
            if "fail" in msg:
                fails.append(msg["fail"])
            if msg.get("done"):
                done, calls = True, msg.get("calls", 0)
    _, status = os.waitpid(pid, 0)
    if os.WIFSIGNALED(status):
        sig = signal.Signals(os.WTERMSIG(status)).name
        fails.append(f"{entry.name}: crashed with {sig} on input: {case}")
    elif not done:
        fails.append(f"{entry.name}: the check process exited ({os.WEXITSTATUS(status)}) on input: {case}")
    return not fails, fails, calls


def run_checks(seed: int | None = None, pattern: str = "*", bench: bool = False,
               n_random: int = 2000, out: Callable[[str], None] = print, *,
               save: str | None = None, baseline: str | None = None,
               bench_only: bool = False, samples: int | None = None) -> bool:
    """Check every registered function matching `pattern`; True when all pass.

    bench: then time each function matching `pattern` in cycles
    (harness.dev.checkasm_bench; skipped when a check failed); save: write those
    figures as a baseline JSON; baseline: a saved JSON to print each function's
    ratio against; bench_only: skip the checks; samples: timed samples per
    function (default checkasm_bench.SAMPLES, 1000)."""
    bench = bench or bench_only or bool(save) or bool(baseline)
    base = None
    if baseline:
        from .checkasm_bench import load_baseline
        base = load_baseline(baseline)          # a bad file fails before any work
    if seed is None:
        seed = int.from_bytes(os.urandom(4), "little")
    out(f"checkasm: seed {seed}")
    lib()   # fail early, in the parent, when the library is missing
    entries = [e for name, e in REGISTRY.items() if fnmatch.fnmatch(name, pattern)]
    if not entries:
        out(f"checkasm: no function matches {pattern!r} (have: {', '.join(REGISTRY)})")
        return False
    all_ok = True
    for entry in ([] if bench_only else entries):
        t0 = time.perf_counter()
        ok, fails, calls = run_one(entry, seed, n_random)
        dt = time.perf_counter() - t0
        out(f"  {entry.name:<28} {'ok' if ok else 'FAILED'}   ({calls} checked calls, {dt:.1f} s)")
        for f in fails:
            out(f"    - {f}")
        all_ok &= ok
    if bench and all_ok:
        for line in bench_lines(pattern, save=save, baseline=base, baseline_name=baseline or "",
                                samples=samples):
            out(line)
    elif bench:
        out("bench: skipped (a check failed)")
    if bench_only:
        return all_ok
    out(f"checkasm: {'all passed' if all_ok else 'FAILURES'} (seed {seed})")
    return all_ok


# --------------------------------------------------------------------------- bench

def bench_lines(pattern: str = "*", save: str | None = None, baseline: dict | None = None,
                baseline_name: str = "", samples: int | None = None) -> list[str]:
    """Cycles per call of each function matching `pattern`, measured inside the test
    library (asm/test/bench.asm; see harness.dev.checkasm_bench), as printable lines;
    with `save`, also written to that JSON file; with `baseline` (a loaded JSON), each
    function's ratio against it."""
    from . import checkasm_bench as cb

    results, info = cb.run(pattern, samples or cb.SAMPLES)
    if not results:
        return [f"bench: no bench matches {pattern!r}"]
    lines = cb.lines(results, info, baseline, baseline_name)
    if save:
        cb.save(results, info, save)
        lines.append(f"bench: saved {len(results)} figures to {save}")
    return lines
