;-----------------------------------------------------------------------------
; threads.asm — memory and threads without libc: mmap/munmap/mremap with a
; count of mapped bytes (and its peak), a fork-join runner on raw clone
; threads, and a barrier (spin, then futex).
;
; Threads made here run only our assembly: no TLS is set up (they share the
; caller's fs base, which our code never uses), all signals are blocked in
; them, and each has its own mmap'ed stack, unmapped after the join.
;-----------------------------------------------------------------------------
%include "asmbpe.inc"
%define THREADS_HERE
%include "sys.inc"

section .bss
align 64
mapped_now:     resq 1                          ; bytes mapped by the library
mapped_peak:    resq 1

section .text

;-----------------------------------------------------------------------------
; account (local): rdx = change in bytes mapped (signed).  The one place that
; keeps mapped_now and raises mapped_peak (compare-and-swap, so concurrent
; threads cannot lower it).  Returns (ret) with rax unchanged; clobbers rcx,
; rdx, r9.  Reached by tail jumps from map, remap and unmap.
;-----------------------------------------------------------------------------
account:
    mov         r9, rdx
    lock xadd   [mapped_now], rdx
    add         r9, rdx                         ; the new total
    mov         rdx, rax
.peak:
    mov         rax, [mapped_peak]
    cmp         r9, rax
    jle         .done
    lock cmpxchg [mapped_peak], r9
    jne         .peak
.done:
    mov         rax, rdx
    ret

;-----------------------------------------------------------------------------
; void *asmbpe_map(size_t bytes)
; Anonymous read-write zeroed pages; NULL on failure.  Counts the bytes.
; Clobbers rax, rcx, rdx, rsi, rdi, r8-r11.
;-----------------------------------------------------------------------------
HIDDEN
FUNC asmbpe_map, 1, 1, 0, bytes
    mov         rsi, bytesq
    xor         edi, edi
    mov         edx, PROT_RW
    mov         r10d, MAP_PRIVATE_ANON
    mov         r8, -1
    xor         r9d, r9d
    mov         eax, SYS_MMAP
    syscall
    cmp         rax, -4095
    jae         .fail
    cmp         rsi, HUGE_MIN                   ; big tables: transparent huge
    jb          .counted                        ; pages, 512x fewer faults
    call        advise_huge
.counted:
    mov         rdx, rsi
    jmp         account                         ; tail call: rax stays
.fail:
    xor         eax, eax
    RET
ENDFUNC

; advise_huge (local): rax = address, rsi = bytes.  madvise(MADV_HUGEPAGE),
; a hint whose failure is ignored.  Keeps rax, rsi; clobbers rcx, rdx, rdi, r11.
advise_huge:
    push        rax
    mov         rdi, rax
    mov         edx, MADV_HUGEPAGE
    mov         eax, SYS_MADVISE
    syscall
    pop         rax
    ret

;-----------------------------------------------------------------------------
; void asmbpe_unmap(void *p, size_t bytes)      (p may be NULL)
; Uncounts the bytes.  Clobbers rax, rcx, rdx, r9, r11.
;-----------------------------------------------------------------------------
HIDDEN
FUNC asmbpe_unmap, 2, 2, 0, p, bytes
    test        pq, pq
    jz          .ret
    mov         eax, SYS_MUNMAP
    syscall
    mov         rdx, bytesq
    neg         rdx
    jmp         account
.ret:
    RET
ENDFUNC

;-----------------------------------------------------------------------------
; void *asmbpe_remap(void *p, size_t old_bytes, size_t new_bytes)
; Grows (or shrinks) a mapping, moving it if needed; NULL on failure (p is
; then still valid).  Clobbers rcx, rdx, rsi, rdi, r8-r11.
;-----------------------------------------------------------------------------
HIDDEN
FUNC asmbpe_remap, 3, 3, 0, p, old, new
    mov         r8, newq
    sub         r8, oldq                        ; change in bytes
    mov         r10d, MREMAP_MAYMOVE
    mov         eax, SYS_MREMAP
    syscall                                     ; (keeps rdx = new, r8)
    cmp         rax, -4095
    jae         .fail
    cmp         rdx, HUGE_MIN
    jb          .counted
    mov         rsi, rdx
    call        advise_huge
.counted:
    mov         rdx, r8
    jmp         account
.fail:
    xor         eax, eax
    RET
ENDFUNC

;-----------------------------------------------------------------------------
; uint64_t asmbpe_mapped_peak(int reset)
; Peak bytes mapped by the library since the last reset; reset != 0 sets the
; peak to what is mapped now.
;-----------------------------------------------------------------------------
FUNC asmbpe_mapped_peak, 1, 1, 0, reset
    mov         rax, [mapped_peak]
    test        resetd, resetd
    jz          .ret
    mov         rcx, [mapped_now]
    mov         [mapped_peak], rcx
.ret:
    RET
ENDFUNC

;-----------------------------------------------------------------------------
; int asmbpe_parallel(void (*fn)(void *ctx, uint64_t tid), void *ctx,
;                     uint64_t nthreads)
;
; Runs fn(ctx, tid) for tid = 0 .. nthreads-1, tid 0 on the calling thread,
; the others on new threads, and returns when all have returned: 0.  Either
; every tid runs or none does: the new threads first wait at a start gate
; that opens only once all of them exist; if a stack or a thread cannot be
; had, the gate tells them to exit and the call returns ASMBPE_ENOMEM or
; ASMBPE_ETHREAD (nthreads 0 or > MAX_THREADS: ASMBPE_EINVAL).  So fn may
; use barriers of nthreads.  fn must keep the System V ABI.
;
; Per thread: a THREAD_STACK stack from mmap; at its top the launch record
; {fn, ctx, tid, gate pointer} and the join word (1, cleared by the kernel
; when the thread has exited: CLONE_CHILD_CLEARTID; futex-waited on).
;-----------------------------------------------------------------------------
; the launch record: the top launch_size bytes of each thread's stack
struc launch
    .fn:        resq 1          ; fn
    .ctx:       resq 1          ; ctx
    .tid:       resq 1          ; this thread's tid
    .gate:      resq 1          ; u32 *: the start gate in the caller's frame
    .join:      resd 1          ; u32 1, the kernel clears it at exit
                resd 7          ; (pad: to the stack's top)
endstruc
; the record's offset in a stack; also the new thread's rsp (16-aligned)
%define LR_AT       (THREAD_STACK - launch_size)
%define GATE_WAIT   0
%define GATE_GO     1
%define GATE_ABORT  2

; asmbpe_parallel's stack frame
struc par_frame
    .stacks:    resq MAX_THREADS    ; each tid's stack (0: none)
    .gate:      resd 1          ; u32 start gate: GATE_WAIT / GO / ABORT
                resd 5          ; (pad: 6 pushes + this, rsp % 16 == 0)
endstruc

; the named registers of asmbpe_parallel
%define pa_fn       r12         ; fn
%define pa_ctx      r13         ; ctx
%define pa_n        r14         ; threads asked for; in the join: the tids
                                ; 1 .. pa_n - 1 that have a thread
%define pa_tid      r15         ; the tid being started / joined
%define pa_tid_d    r15d        ; (32-bit view)
%define pa_stk      rbx         ; the stack of tid pa_tid
%define pa_gate     rbx         ; (new thread) the start gate
%define pa_status   ebp         ; the result once all are joined

HIDDEN
FUNC asmbpe_parallel, 3, 15, 0, fn, ctx, n
    sub         rsp, par_frame_size
    mov         pa_fn, fnq
    mov         pa_ctx, ctxq
    mov         pa_n, nq
    mov         dword [rsp + par_frame.gate], GATE_WAIT
    mov         eax, ASMBPE_EINVAL
    test        pa_n, pa_n
    jz          .ret
    cmp         pa_n, MAX_THREADS
    ja          .ret
    mov         pa_tid_d, 1                     ; next tid to start
.spawn:
    cmp         pa_tid, pa_n
    jae         .open_gate
    mov         qword [rsp + par_frame.stacks + pa_tid * 8], 0
    mov         edi, THREAD_STACK
    call        asmbpe_map
    mov         pa_status, ASMBPE_ENOMEM
    test        rax, rax
    jz          .abort
    mov         [rsp + par_frame.stacks + pa_tid * 8], rax
    mov         pa_stk, rax
    mov         [pa_stk + LR_AT + launch.fn], pa_fn
    mov         [pa_stk + LR_AT + launch.ctx], pa_ctx
    mov         [pa_stk + LR_AT + launch.tid], pa_tid
    lea         rax, [rsp + par_frame.gate]
    mov         [pa_stk + LR_AT + launch.gate], rax
    mov         dword [pa_stk + LR_AT + launch.join], 1
    mov         edi, CLONE_THREAD_FLAGS
    lea         rsi, [pa_stk + LR_AT]
    xor         edx, edx
    lea         r10, [pa_stk + LR_AT + launch.join]
    xor         r8d, r8d
    mov         eax, SYS_CLONE
    syscall
    test        rax, rax
    jz          .child
    mov         pa_status, ASMBPE_ETHREAD
    js          .abort_free
    inc         pa_tid
    jmp         .spawn

.open_gate:
    mov         esi, GATE_GO
    call        .set_gate
    mov         rdi, pa_ctx
    xor         esi, esi
    call        pa_fn                           ; tid 0 here
    xor         pa_status, pa_status
    jmp         .join_all

.abort_free:                                    ; this stack has no thread
    mov         rdi, pa_stk
    mov         esi, THREAD_STACK
    call        asmbpe_unmap
    mov         qword [rsp + par_frame.stacks + pa_tid * 8], 0
.abort:
    mov         esi, GATE_ABORT
    call        .set_gate
.join_all:
    mov         pa_n, pa_tid                    ; threads 1 .. pa_tid-1 exist
    mov         pa_tid_d, 1
.join:
    cmp         pa_tid, pa_n
    jae         .joined
    mov         pa_stk, [rsp + par_frame.stacks + pa_tid * 8]
.join_wait:
    mov         edx, [pa_stk + LR_AT + launch.join]
    test        edx, edx
    jz          .join_free
    lea         rdi, [pa_stk + LR_AT + launch.join]
    mov         esi, FUTEX_WAIT
    xor         r10d, r10d
    mov         eax, SYS_FUTEX
    syscall
    jmp         .join_wait
.join_free:
    mov         rdi, pa_stk
    mov         esi, THREAD_STACK
    call        asmbpe_unmap
    inc         pa_tid
    jmp         .join
.joined:
    mov         eax, pa_status
.ret:
    add         rsp, par_frame_size
    RET

.set_gate:                                      ; esi = GATE_GO / GATE_ABORT
    mov         [rsp + 8 + par_frame.gate], esi ; (+8: our return address)
    lea         rdi, [rsp + 8 + par_frame.gate]
    mov         esi, FUTEX_WAKE
    mov         edx, 0x7FFFFFFF
    mov         eax, SYS_FUTEX
    syscall
    ret

.child:                                         ; rsp = stack + LR_AT
    sub         rsp, 128                        ; sigset, below the record
    mov         qword [rsp], -1
    mov         edi, SIG_BLOCK
    mov         rsi, rsp
    xor         edx, edx
    mov         r10d, 8
    mov         eax, SYS_RT_SIGPROCMASK
    syscall
    add         rsp, 128
    mov         pa_gate, [rsp + launch.gate]
.gate:
    mov         edx, [pa_gate]
    cmp         edx, GATE_WAIT
    jne         .gate_open
    mov         rdi, pa_gate
    mov         esi, FUTEX_WAIT
    xor         r10d, r10d
    mov         eax, SYS_FUTEX
    syscall
    jmp         .gate
.gate_open:
    cmp         edx, GATE_GO
    jne         .child_exit
    mov         rdi, [rsp + launch.ctx]
    mov         rsi, [rsp + launch.tid]
    call        [rsp + launch.fn]
.child_exit:
    xor         edi, edi
    mov         eax, SYS_EXIT                   ; this thread only
    syscall
    ud2
ENDFUNC
%undef  pa_fn
%undef  pa_ctx
%undef  pa_n
%undef  pa_tid
%undef  pa_tid_d
%undef  pa_stk
%undef  pa_gate
%undef  pa_status

;-----------------------------------------------------------------------------
; void asmbpe_barrier_init(uint32_t *bar /* 4 x u32 */, uint32_t n)
; void asmbpe_barrier_wait(uint32_t *bar)
;
; All n threads wait until the last arrives.  They spin (pause), then sleep
; on a futex.  When the n threads fit on the CPUs this process may run on
; (sched_getaffinity), they spin ~40 us (rdtsc): a futex wake costs tens of
; us, and the merge loop passes two barriers per merge.  Oversubscribed, ~2
; us, so the threads still working get the CPUs.  A time bound, not a count
; of pauses, also limits the damage when other processes hold the CPUs.
; Full memory barrier semantics (lock-prefixed ops).
;-----------------------------------------------------------------------------
%define SPIN_CYCLES_FIT  100000                 ; ~40 us of rdtsc, then sleep
%define SPIN_CYCLES_OVER 5000                   ; ~2 us

HIDDEN
FUNC asmbpe_barrier_init, 2, 2, 0, bar, n
    mov         [barq + barrier.count], nd
    mov         [barq + barrier.n], nd
    mov         dword [barq + barrier.gen], 0
    mov         dword [barq + barrier.spins], SPIN_CYCLES_OVER
    mov         r8, barq
    mov         r9d, nd
    sub         rsp, 136                        ; cpu mask (1024 cpus) + align
    xor         edi, edi                        ; this thread
    mov         esi, 128
    mov         rdx, rsp
    mov         eax, SYS_SCHED_GETAFFINITY
    syscall
    test        rax, rax
    jle         .done                           ; unknown: stay brief
    xor         ecx, ecx                        ; CPUs allowed
    xor         edx, edx
.count:
    cmp         rdx, rax
    jae         .counted
    popcnt      r10, [rsp + rdx]
    add         rcx, r10
    add         rdx, 8
    jmp         .count
.counted:
    cmp         r9, rcx
    ja          .done
    mov         dword [r8 + barrier.spins], SPIN_CYCLES_FIT
.done:
    add         rsp, 136
    RET
ENDFUNC

HIDDEN
FUNC asmbpe_barrier_wait, 1, 1, 0, bar
    mov         r8d, [barq + barrier.gen]       ; generation we wait out
    mov         eax, -1
    lock xadd   [barq + barrier.count], eax
    cmp         eax, 1
    jne         .wait
    mov         eax, [barq + barrier.n]         ; last: reset, advance, wake
    mov         [barq + barrier.count], eax
    lock inc    dword [barq + barrier.gen]
    lea         rdi, [barq + barrier.gen]
    mov         esi, FUTEX_WAKE
    mov         edx, 0x7FFFFFFF
    mov         eax, SYS_FUTEX
    syscall
    RET
.wait:
    rdtsc                                       ; spin for a time budget
    shl         rdx, 32
    or          rax, rdx
    mov         r9d, [barq + barrier.spins]
    add         r9, rax                         ; until this tsc
.spin:
    cmp         [barq + barrier.gen], r8d
    jne         .done
    pause
    rdtsc
    shl         rdx, 32
    or          rax, rdx
    cmp         rax, r9
    jb          .spin
    lea         rdi, [barq + barrier.gen]       ; (barq is rdi: once, not
.sleep:                                         ;  again after a spurious wake)
    mov         esi, FUTEX_WAIT
    mov         edx, r8d
    xor         r10d, r10d
    mov         eax, SYS_FUTEX
    syscall
    cmp         [rdi], r8d                      ; rdi = &gen (syscall keeps it)
    je          .sleep
.done:
    RET
ENDFUNC
