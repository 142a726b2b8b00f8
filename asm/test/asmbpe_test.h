/*
 * asmbpe_test.h — the C ABI of the test-only library, libasmbpe_test.so
 * (asm/test/*.asm, built by build.py into build/, never shipped in a wheel).
 *
 * Read with asm/asmbpe.h: harness/_lib.py adds these declarations to the same
 * cffi FFI (checkasm_lib()) when a development tool first asks for them.  Keep
 * to declarations and enums, as in asmbpe.h.
 */
#ifndef ASMBPE_TEST_H
#define ASMBPE_TEST_H

#include <stdint.h>

enum {
    ASMBPE_CHK_RBX        = 1,
    ASMBPE_CHK_RBP        = 2,
    ASMBPE_CHK_R12        = 4,
    ASMBPE_CHK_R13        = 8,
    ASMBPE_CHK_R14        = 16,
    ASMBPE_CHK_R15        = 32,
    ASMBPE_CHK_DF         = 64,
    ASMBPE_CHK_VZEROUPPER = 128,
    ASMBPE_CHK_STACK      = 256,
};

/* Call fn(args[0..9]) (6 to 9 on the stack) with rbx, rbp, r12-r15 =
 * fill[0..5] and stack canaries above the stack arguments; *ret = fn's rax;
 * returns ASMBPE_CHK_* bits. */
uint32_t asmbpe_checked_call(const void *fn, const uint64_t *args,
                             const uint64_t *fill, uint64_t *ret,
                             int check_ymm);

/* barrier_test.asm: `rounds` barrier rounds on nthreads - 1 threads while one
 * more thread sends spurious futex wakes; returns the early releases seen. */
int64_t asmbpe_test_barrier(uint64_t nthreads, uint64_t rounds);

/* Breaks rule `what` (1-9, see checkasm.asm) and returns 42. */
uint64_t asmbpe_test_misbehave(int what);

/* bench.asm: samples x per_sample calls of fn, call k with the 8 arguments
 * args[8 * (k % nsets) ...] (6 and 7 on the stack); cycles[s] = TSC ticks of
 * sample s (lfence; rdtsc ... rdtscp; lfence); rets (may be NULL) gets every
 * call's rax.  Returns the last call's rax. */
uint64_t asmbpe_bench_call(const void *fn, const uint64_t *args, uint64_t nsets,
                           uint64_t samples, uint64_t per_sample,
                           uint64_t *cycles, uint64_t *rets);

/* bench.asm: does nothing, returns 0 (the trampoline's own cost per call). */
uint64_t asmbpe_bench_empty(void);

/* bench.asm: lfence; rdtsc. */
uint64_t asmbpe_bench_rdtsc(void);

#endif
