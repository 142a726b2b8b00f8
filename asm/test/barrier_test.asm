;-----------------------------------------------------------------------------
; barrier_test.asm — TEST-ONLY: drives threads.asm's barrier (linked into
; libasmbpe_test.so from the same source) under spurious futex wakes.
;-----------------------------------------------------------------------------
%include "asmbpe.inc"
%include "sys.inc"

section .text

; context, on asmbpe_test_barrier's stack
%define B_BAR       0       ; barrier, 16 bytes
%define B_ARRIVED   16      ; u64 arrivals so far
%define B_ROUNDS    24
%define B_WAITERS   32      ; threads in the barrier (nthreads - 1)
%define B_ERRORS    40      ; early releases seen
%define B_FINISHED  48      ; waiters done
%define B_SIZE      64

; barrier_fn(ctx, tid): tids < waiters do `rounds` barrier waits and check
; after each that all waiters have arrived for it; the last tid sends
; FUTEX_WAKE to the generation word until the waiters are done.
barrier_fn:
    SAVE        rbx, r12, r13
    mov         rbx, rdi
    cmp         rsi, [rbx + B_WAITERS]
    jae         .waker
    xor         r12d, r12d                      ; round
.round:
    cmp         r12, [rbx + B_ROUNDS]
    jae         .waiter_done
    lock inc    qword [rbx + B_ARRIVED]
    lea         rdi, [rbx + B_BAR]
    call        asmbpe_barrier_wait
    lea         rax, [r12 + 1]
    imul        rax, [rbx + B_WAITERS]          ; all arrivals of this round
    cmp         [rbx + B_ARRIVED], rax
    jae         .ok
    lock inc    qword [rbx + B_ERRORS]          ; released early
.ok:
    lea         rdi, [rbx + B_BAR]              ; nobody starts the next round
    call        asmbpe_barrier_wait             ; before all have checked
    inc         r12
    jmp         .round
.waiter_done:
    lock inc    qword [rbx + B_FINISHED]
    jmp         .ret
.waker:
    mov         rax, [rbx + B_FINISHED]
    cmp         rax, [rbx + B_WAITERS]
    jae         .ret
    lea         rdi, [rbx + B_BAR + BAR_GEN]
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
    sub         rsp, B_SIZE
    mov         rbx, nq
    mov         [rsp + B_ROUNDS], roundsq
    lea         rax, [nq - 1]
    mov         [rsp + B_WAITERS], rax
    xor         eax, eax
    mov         [rsp + B_ARRIVED], rax
    mov         [rsp + B_ERRORS], rax
    mov         [rsp + B_FINISHED], rax
    mov         rdi, rsp
    mov         rsi, [rsp + B_WAITERS]
    call        asmbpe_barrier_init
    lea         rdi, [barrier_fn]
    mov         rsi, rsp
    mov         rdx, rbx
    call        asmbpe_parallel
    movsxd      rax, eax
    test        rax, rax
    jnz         .ret
    mov         rax, [rsp + B_ERRORS]
.ret:
    add         rsp, B_SIZE
    RET
ENDFUNC
