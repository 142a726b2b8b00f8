;-----------------------------------------------------------------------------
; barrier_test.asm — TEST-ONLY: drives threads.asm's barrier (linked into
; libasmbpe_test.so from the same source) under spurious futex wakes.
;-----------------------------------------------------------------------------
%include "asmbpe.inc"
%include "sys.inc"

section .text

; context, on asmbpe_test_barrier's stack
struc bctx
    .bar:       resb barrier_size   ; the barrier under test
    .arrived:   resq 1          ; u64 arrivals so far
    .rounds:    resq 1          ; barrier rounds per waiter
    .waiters:   resq 1          ; threads in the barrier (nthreads - 1)
    .errors:    resq 1          ; early releases seen
    .finished:  resq 1          ; waiters done
                resq 1          ; (pad: 64 bytes; 1 push + this: aligned calls)
endstruc

; barrier_fn(ctx, tid): tids < waiters do `rounds` barrier waits and check
; after each that all waiters have arrived for it; the last tid sends
; FUTEX_WAKE to the generation word until the waiters are done.
barrier_fn:
    SAVE        rbx, r12, r13
    mov         rbx, rdi
    cmp         rsi, [rbx + bctx.waiters]
    jae         .waker
    xor         r12d, r12d                      ; round
.round:
    cmp         r12, [rbx + bctx.rounds]
    jae         .waiter_done
    lock inc    qword [rbx + bctx.arrived]
    lea         rdi, [rbx + bctx.bar]
    call        asmbpe_barrier_wait
    lea         rax, [r12 + 1]
    imul        rax, [rbx + bctx.waiters]       ; all arrivals of this round
    cmp         [rbx + bctx.arrived], rax
    jae         .ok
    lock inc    qword [rbx + bctx.errors]       ; released early
.ok:
    lea         rdi, [rbx + bctx.bar]           ; nobody starts the next round
    call        asmbpe_barrier_wait             ; before all have checked
    inc         r12
    jmp         .round
.waiter_done:
    lock inc    qword [rbx + bctx.finished]
    jmp         .ret
.waker:
    mov         rax, [rbx + bctx.finished]
    cmp         rax, [rbx + bctx.waiters]
    jae         .ret
    lea         rdi, [rbx + bctx.bar + barrier.gen]
    mov         esi, FUTEX_WAKE
    mov         edx, 0x7FFFFFFF
    mov         eax, SYS_FUTEX
    syscall
    pause
    jmp         .waker
.ret:
    RESTORE

;-----------------------------------------------------------------------------
; int64_t asmbpe_test_barrier(uint64_t nthreads, uint64_t rounds)
; Returns the early releases seen (0 when the barrier holds), or a negative
; status from asmbpe_parallel.  nthreads >= 2 (one of them only wakes).
;-----------------------------------------------------------------------------
FUNC asmbpe_test_barrier, 2, 10, 0, n, rounds
    sub         rsp, bctx_size
    mov         rbx, nq
    mov         [rsp + bctx.rounds], roundsq
    lea         rax, [nq - 1]
    mov         [rsp + bctx.waiters], rax
    xor         eax, eax
    mov         [rsp + bctx.arrived], rax
    mov         [rsp + bctx.errors], rax
    mov         [rsp + bctx.finished], rax
    mov         rdi, rsp
    mov         rsi, [rsp + bctx.waiters]
    call        asmbpe_barrier_init
    lea         rdi, [barrier_fn]
    mov         rsi, rsp
    mov         rdx, rbx
    call        asmbpe_parallel
    movsxd      rax, eax
    test        rax, rax
    jnz         .ret
    mov         rax, [rsp + bctx.errors]
.ret:
    add         rsp, bctx_size
    RET
ENDFUNC
