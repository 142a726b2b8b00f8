;-----------------------------------------------------------------------------
; bench.asm — TEST-ONLY support, linked into libasmbpe_test.so, never into
; libasmbpe.so.  The cycle-benchmark trampoline of `asmbpe check --bench`
; (dav1d/FFmpeg checkasm's bench_new, STYLE.md §1): the timing loop runs here,
; so cffi's per-call overhead never shows in the numbers.
;-----------------------------------------------------------------------------
%include "asmbpe.inc"

%define NSTACKARGS      2                       ; args 6 and 7 go on the stack

; asmbpe_bench_call's stack frame (6 pushes + this: rsp % 16 == 0)
struc bench_frame
    .args:      resq NSTACKARGS ; a[6], a[7] of the call (at rsp)
    .t0:        resq 1          ; rdtsc at the start of a sample
    .k:         resq 1          ; calls made so far
    .per:       resq 1          ; calls per sample
    .rets:      resq 1          ; rets array or 0
    .nsets:     resq 1          ; argument sets
    .rax:       resq 1          ; the last call's rax
                resq 1          ; (pad)
endstruc

section .text

;-----------------------------------------------------------------------------
; uint64_t asmbpe_bench_call(const void *fn, const uint64_t *args,
;                            uint64_t nsets, uint64_t samples,
;                            uint64_t per_sample, uint64_t *cycles,
;                            uint64_t *rets)
;
; Makes samples x per_sample calls fn(a[0], ..., a[7]) (a[6], a[7] on the
; stack), call k taking its arguments from the set a = args + 8 * (k % nsets):
; two sets alternate two input buffers, so a sample measures throughput on
; data that is not all in L1 from the previous call (dav1d's alternate()).
; cycles[s] = the TSC ticks of sample s, from `lfence; rdtsc` before its
; first call to `rdtscp; lfence` after its last.  rets (the 7th argument, on
; the stack; may be 0) receives every call's rax, samples x per_sample of
; them, e.g. the tables a constructor returns, for the caller to free.
; Returns the last call's rax.  nsets, samples and per_sample must be >= 1.
; Clobbers what fn may clobber; preserves rbx, rbp, r12-r15 (they hold the
; loop state, which fn must preserve too).
;-----------------------------------------------------------------------------
FUNC asmbpe_bench_call, 6, 15, 0, fn, args, nsets, samples, per, cycles
    mov         rax, [rsp + 6 * 8 + 8]          ; rets: the 7th argument
    sub         rsp, bench_frame_size
    mov         [rsp + bench_frame.rets], rax
    mov         [rsp + bench_frame.per], perq
    mov         [rsp + bench_frame.nsets], nsetsq
    mov         qword [rsp + bench_frame.k], 0
    mov         qword [rsp + bench_frame.rax], 0
    mov         rbx, fnq
    mov         rbp, argsq
    mov         r12, samplesq
    mov         r13, cyclesq
    xor         r14d, r14d                      ; k % nsets: the set of the next call
.sample:
    lfence
    rdtsc
    shl         rdx, 32
    or          rax, rdx
    mov         [rsp + bench_frame.t0], rax
    mov         r15, [rsp + bench_frame.per]
.call:
    mov         r11, r14
    shl         r11, 6                          ; 8 args x 8 bytes per set
    add         r11, rbp
    mov         rax, [r11 + 48]
    mov         [rsp + bench_frame.args], rax
    mov         rax, [r11 + 56]
    mov         [rsp + bench_frame.args + 8], rax
    mov         rdi, [r11]
    mov         rsi, [r11 + 8]
    mov         rdx, [r11 + 16]
    mov         rcx, [r11 + 24]
    mov         r8,  [r11 + 32]
    mov         r9,  [r11 + 40]
    call        rbx
    mov         rcx, [rsp + bench_frame.rets]
    test        rcx, rcx
    jz          .no_ret
    mov         rdx, [rsp + bench_frame.k]
    mov         [rcx + rdx * 8], rax
.no_ret:
    mov         [rsp + bench_frame.rax], rax
    inc         qword [rsp + bench_frame.k]
    inc         r14
    cmp         r14, [rsp + bench_frame.nsets]
    jb          .same
    xor         r14d, r14d
.same:
    dec         r15
    jnz         .call
    rdtscp                                      ; waits for the calls to finish
    lfence                                      ; and nothing later starts early
    shl         rdx, 32
    or          rax, rdx
    sub         rax, [rsp + bench_frame.t0]
    mov         [r13], rax
    add         r13, 8
    dec         r12
    jnz         .sample
    mov         rax, [rsp + bench_frame.rax]
    add         rsp, bench_frame_size
    RET
ENDFUNC

;-----------------------------------------------------------------------------
; uint64_t asmbpe_bench_empty(void)
;
; Does nothing and returns 0: benched like any function, it gives the
; trampoline's own cost per call (loading 8 arguments, call, ret), which
; `asmbpe check --bench` subtracts from every other function's figure.
;-----------------------------------------------------------------------------
FUNC asmbpe_bench_empty, 0, 0, 0
    xor         eax, eax
    RET
ENDFUNC

;-----------------------------------------------------------------------------
; uint64_t asmbpe_bench_rdtsc(void)
;
; lfence; rdtsc: the time stamp counter, for measuring its rate against the
; wall clock.
;-----------------------------------------------------------------------------
FUNC asmbpe_bench_rdtsc, 0, 0, 0
    lfence
    rdtsc
    shl         rdx, 32
    or          rax, rdx
    RET
ENDFUNC
