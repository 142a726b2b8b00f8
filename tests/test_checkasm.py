"""checkasm itself must be able to fail: the trampoline notices each broken
rule, a read past the padding faults and is reported (not a crash of the
test process), and a wrong result is reported with the function and input."""
from __future__ import annotations

import pytest

from harness.dev import checkasm
from harness._lib import checkasm_lib, ffi, fn_address, lib
from harness.buffers import PAD, GuardedArena

BROKEN = {1: "rbx", 2: "rbp", 3: "r12", 4: "r13", 5: "r14", 6: "r15",
          7: "direction flag left set", 8: "missing vzeroupper",
          9: "stack canaries overwritten"}


def _checked(what: int) -> tuple[int, int]:
    T = checkasm_lib()
    fn = fn_address(T, "asmbpe_test_misbehave")
    args = ffi.new("uint64_t[10]", [what] + [0xDEADBEEF00000000] * 9)
    fill = ffi.new("uint64_t[6]", [0x1111111111111111 * (i + 1) for i in range(6)])
    ret = ffi.new("uint64_t *")
    bad = T.asmbpe_checked_call(fn, args, fill, ret, 1 if lib().asmbpe_cpu_flags() & 16 else 0)
    return bad, ret[0]


def test_trampoline_passes_a_clean_call():
    assert _checked(0) == (0, 42)


@pytest.mark.parametrize("what", sorted(BROKEN))
def test_trampoline_reports_each_broken_rule(what):
    if what == 8 and not lib().asmbpe_cpu_flags() & 16:
        pytest.skip("xgetbv(1) not available: vzeroupper cannot be checked here")
    bad, ret = _checked(what)
    assert ret == 42
    names = [name for bit, name in checkasm.REG_BITS if bad & bit]
    assert names == [BROKEN[what]]


def test_guard_page_fault_is_reported_not_a_crash():
    """A read one byte past the padding hits the guard page: the child dies of
    SIGSEGV and the parent reports it with the input's name."""
    def overread(ctx):
        arena = GuardedArena(4096)
        ptr, _ = arena.place(b"x" * 100, "end")
        ctx.on("100 bytes, memeq reading PAD + 1 bytes past the end")
        ctx.call("asmbpe_memeq", ptr, ptr, 100 + PAD + 1)

    ok, fails, _ = checkasm.run_one(checkasm.Entry("overread", overread), 1, 0)
    assert not ok
    assert any("SIGSEGV" in f and "PAD + 1 bytes past the end" in f for f in fails), fails


def test_padding_reads_are_allowed():
    """Reading up to exactly the padding is legal and must not fault."""
    def within(ctx):
        arena = GuardedArena(4096)
        ptr, _ = arena.place(b"x" * 100, "end")
        ctx.on("read up to the last padding byte")
        if ctx.call("asmbpe_memeq", ptr, ptr, 100 + PAD) & 0xFFFFFFFF != 1:
            ctx.fail("memeq of a range with itself")
        ptr, _ = arena.place(b"y" * 3, "start")
        ctx.on("short memeq at the front padding")
        ctx.call("asmbpe_memeq", ptr, ptr, 3)

    ok, fails, _ = checkasm.run_one(checkasm.Entry("within", within), 1, 0)
    assert ok, fails


def test_wrong_result_is_reported(monkeypatch):
    """Make the twin wrong: checkasm must name the function, the input and the
    first differing offset."""
    real = checkasm.twin.split_offsets

    def wrong(data, pretokenizer="seed"):
        out = real(data, pretokenizer)
        return out[:-1] + [out[-1] + 1] if len(out) > 3 else out
    monkeypatch.setattr(checkasm.twin, "split_offsets", wrong)
    lines: list[str] = []
    ok = checkasm.run_checks(seed=3, pattern="asmbpe_split_offsets", n_random=0, out=lines.append)
    text = "\n".join(lines)
    assert not ok
    assert "asmbpe_split_offsets" in text and "texty len" in text and "asm ends at" in text


def test_seed_is_printed_and_function_glob_selects():
    lines: list[str] = []
    assert checkasm.run_checks(seed=12345, pattern="asmbpe_cpu*", out=lines.append)
    assert lines[0] == "checkasm: seed 12345"
    assert any("asmbpe_cpu_flags" in ln for ln in lines)
    assert not any("asmbpe_memeq" in ln for ln in lines)
    lines.clear()
    assert not checkasm.run_checks(seed=1, pattern="nope*", out=lines.append)


def test_memeq_regression_short_ranges_after_different_bytes():
    """The original bug: a short compare must ignore the bytes before the range."""
    from harness.buffers import Padded
    L = lib()
    a = Padded(b"\x01" * 7 + b"abc")
    b = Padded(b"\x02" * 7 + b"abc")
    assert L.asmbpe_memeq(a.ptr + 7, b.ptr + 7, 3) == 1
    c = Padded(b"\x05" * 7 + b"abd")
    d = Padded(b"\x05" * 7 + b"abc")
    assert L.asmbpe_memeq(c.ptr + 7, d.ptr + 7, 3) == 0
    assert L.asmbpe_memeq(c.ptr, d.ptr, 0) == 1
