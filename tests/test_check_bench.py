"""`asmbpe check --bench`: the cycle-benchmark trampoline (asm/test/bench.asm), the
bench of every exported function (harness.dev.checkasm_bench), and --save / --baseline."""
from __future__ import annotations

import json
import re

import numpy as np

from cli_util import invoke
from harness.dev import checkasm_bench as cb
from harness._lib import HEADER, checkasm_lib, ffi, fn_address, lib
from harness.buffers import Padded


def _bench_call(name, sets, samples, per_sample=1, rets=True):
    T = checkasm_lib()
    handle = lib() if hasattr(lib(), name) else T
    fn = fn_address(handle, name)
    args = np.zeros((len(sets), 8), dtype=np.uint64)
    for i, s in enumerate(sets):
        args[i, :len(s)] = s
    cycles = np.zeros(samples + 2, dtype=np.uint64)          # 2 sentinels past the end
    cycles[samples:] = 0xABCD
    r = np.zeros(samples * per_sample + 2, dtype=np.uint64)
    r[samples * per_sample:] = 0xABCD
    last = T.asmbpe_bench_call(fn, ffi.from_buffer("uint64_t[]", args), len(sets), samples,
                               per_sample, ffi.from_buffer("uint64_t[]", cycles),
                               ffi.from_buffer("uint64_t[]", r) if rets else ffi.NULL)
    assert cycles[samples:].tolist() == [0xABCD] * 2, "wrote past cycles[samples]"
    if rets:
        assert r[samples * per_sample:].tolist() == [0xABCD] * 2, "wrote past rets"
    return last, cycles[:samples], r[:samples * per_sample]


def test_trampoline_alternates_argument_sets():
    """memeq with set A (equal buffers) and set B (different ones): the calls must
    alternate 1, 0, 1, 0 ... across samples and within a sample."""
    a, b = Padded(b"x" * 100), Padded(b"x" * 99 + b"y")
    pa, pb = (int(ffi.cast("uintptr_t", p.ptr)) for p in (a, b))
    for per in (1, 4, 3):
        last, cyc, rets = _bench_call("asmbpe_memeq", [[pa, pa, 100], [pa, pb, 100]], 50, per)
        assert [int(x) & 0xFFFFFFFF for x in rets] == [1, 0] * (50 * per // 2) + [1] * (50 * per % 2)
        assert last & 0xFFFFFFFF == (1 if (50 * per) % 2 else 0)
        assert np.all(cyc > 0) and np.all(cyc < 10**8)
    _, _, rets = _bench_call("asmbpe_memeq", [[pa, pa, 100], [pa, pb, 100], [pb, pb, 100]], 9)
    assert [int(x) & 0xFFFFFFFF for x in rets] == [1, 0, 1] * 3
    _, cyc, _ = _bench_call("asmbpe_bench_empty", [[]], 1000, 4, rets=False)
    assert np.all(cyc > 0)


def test_trampoline_passes_stack_arguments():
    """asmbpe_train takes 8 arguments (counts and stats on the stack): through the
    trampoline it learns what a direct call learns."""
    env = cb.Env(samples=10)
    try:
        cases = cb.bench_train(env)
        _, _, rets = _bench_call("asmbpe_train", cases[0].sets, 4)
        assert rets.tolist() == [64] * 4
        merges = cases[0].keep[0][0]
        L = lib()
        m2 = np.zeros(64, dtype=np.uint32)
        c2 = np.zeros(64, dtype=np.uint64)
        st = np.zeros(int(L.ASMBPE_TS_COUNT), dtype=np.uint64)
        assert L.asmbpe_train(ffi.cast("asmbpe_wordtab *", int(cases[0].sets[0][0])), 64, 1, 1, 0,
                              ffi.from_buffer("uint32_t[]", m2), ffi.from_buffer("uint64_t[]", c2),
                              ffi.from_buffer("uint64_t[]", st)) == 64
        assert merges.tolist() == m2.tolist()
    finally:
        env.close()


def _exported_functions() -> set[str]:
    text = HEADER.read_text()           # the product header alone (the test library's
    return set(re.findall(r"\b(asmbpe_\w+)\s*\(", text))     # is asm/test/asmbpe_test.h)


def test_every_exported_function_has_a_bench():
    missing = _exported_functions() - set(cb.BENCHES)
    assert not missing, f"no @bench entry for {sorted(missing)}"


def test_every_bench_runs_with_1000_samples():
    results, info = cb.run("*")
    assert info["samples"] >= 1000 and 1e8 < info["tsc_hz"] < 1e11
    names = [r.name for r in results]
    assert len(names) == len(set(names))
    assert {r.func for r in results} == set(cb.BENCHES)
    for r in results:
        assert r.samples >= 1000 and r.kept >= 0.85 * r.samples, r
        assert np.isfinite(r.cycles) and r.cycles >= 0, r
    by = {r.name: r for r in results}
    # a 4 KB compare costs more than an 8-byte one; encoding with the cache beats without
    assert by["asmbpe_memeq n=4096"].cycles > by["asmbpe_memeq n=8"].cycles
    assert by["asmbpe_encode 16 KB, cached"].cycles < by["asmbpe_encode 16 KB, no cache"].cycles
    lines = cb.lines(results, info)
    assert any("cycles/call" in ln and "MB/s" in ln for ln in lines)


def test_overhead_is_subtracted():
    """The empty function, benched and corrected like the others, costs ~nothing."""
    over = cb.overhead(1000, 4)
    per_call, _ = cb.measure(cb.Case("e", "asmbpe_bench_empty", [[0], [0]], per_sample=4))
    mean, _, _ = cb.summarize(per_call)
    assert over > 0
    assert abs(mean - over) < max(3.0, 0.5 * over)


def test_check_bench_save_and_baseline(tmp_path):
    base = tmp_path / "base.json"
    r = invoke("check", "--function", "asmbpe_memeq", "--bench", "--save", base)
    assert r.exit_code == 0, r.output
    assert "asmbpe_memeq" in r.output and "ok" in r.output
    assert re.search(r"asmbpe_memeq n=4096\s+[\d.]+\s+[\d.]+\s+\d+", r.output), r.output
    data = json.loads(base.read_text())
    assert set(data["results"]) == {"asmbpe_memeq n=8", "asmbpe_memeq n=64", "asmbpe_memeq n=4096"}
    for v in data["results"].values():
        assert v["samples"] >= 1000 and v["cycles_per_call"] > 0 and v["bytes_per_call"] > 0

    r = invoke("check", "--function", "asmbpe_mem*", "--bench-only", "--baseline", base)
    assert r.exit_code == 0, r.output
    assert "vs baseline" in r.output and "checked calls" not in r.output
    ratios = re.findall(r"asmbpe_memeq n=\d+ .*\s(\d+\.\d\d)x \([+-]\d+%\)", r.output)
    assert len(ratios) == 3 and all(0.2 < float(q) < 5 for q in ratios), r.output

    # a function the baseline does not have is marked new; a doctored baseline shows.
    # The factor is large because a loaded CI machine can run this bench twice as slow
    # as the saved one (a x2 doctoring once read 0.92x there).
    data["results"]["asmbpe_memeq n=64"]["cycles_per_call"] *= 100
    base.write_text(json.dumps(data))
    r = invoke("check", "--function", "asmbpe_m*", "--bench-only", "--baseline", base)
    assert r.exit_code == 0, r.output
    assert re.search(r"asmbpe_mapped_peak .* new", r.output)
    q = float(re.search(r"asmbpe_memeq n=64 .*\s(\d+\.\d\d)x", r.output).group(1))
    assert q < 0.25


def test_bad_baseline_is_one_line_error(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    for path, needle in ((bad, "not a bench JSON"), (tmp_path / "missing.json", "cannot read")):
        r = invoke("check", "--bench-only", "--baseline", path)
        assert r.exit_code == 1
        assert r.output.strip().count("\n") == 0 and needle in r.output, r.output
