;-----------------------------------------------------------------------------
; encode_pool.asm — the thread-state pool: ts_give / ts_take / ts_unmap and
; asmbpe_enc_trim.
;
; asmbpe_enc_free (encode_table.asm) gives each thread state of the encoder to
; this process-wide pool (ts_give) instead of unmapping it; asmbpe_encode_impl
; (encode_entry.asm) takes one from here (ts_take) before it maps a new one.
; The pool and its spin lock (.bss) are private to this unit.
;-----------------------------------------------------------------------------
%include "asmbpe.inc"
%include "sys.inc"
%include "encode.inc"

section .bss
align 64
ts_pool_lock:   resd 16                         ; spin lock, a line of its own
ts_pool_n:      resq 1                          ; states kept
ts_pool:        resq TS_POOL_MAX

section .text

; POOL_LOCK / POOL_UNLOCK: the state pool's spin lock (held for a few
; instructions; never across a system call).  No parameters.  POOL_LOCK
; clobbers eax; POOL_UNLOCK nothing.
%macro POOL_LOCK 0
%%try:
    mov         eax, 1
    xchg        eax, [ts_pool_lock]
    test        eax, eax
    jz          %%held
%%wait:
    pause
    cmp         dword [ts_pool_lock], 0
    jne         %%wait
    jmp         %%try
%%held:
%endmacro
%macro POOL_UNLOCK 0
    mov         dword [ts_pool_lock], 0
%endmacro

; ts_unmap (local): rdi = a thread state.  Unmaps its cache, long-chunk
; arrays, document buffer and page.  Keeps rbx, rbp, r12-r15; clobbers rax,
; rcx, rdx, rsi, rdi, r9, r11.
ts_unmap:
    push        rbx
    mov         rbx, rdi
    mov         rdi, [rbx + tstate.cache]
    mov         esi, CACHE_ENTRIES * centry_size
    call        asmbpe_unmap
    mov         rdi, [rbx + tstate.long]
    mov         rsi, [rbx + tstate.longcap]
    shl         rsi, 5                          ; x LONG_BYTES_PER
    call        asmbpe_unmap
    mov         rdi, [rbx + tstate.doc]
    mov         rsi, [rbx + tstate.doccap]
    call        asmbpe_unmap
    mov         rdi, rbx
    mov         esi, (tstate_size + 4095) & ~4095
    call        asmbpe_unmap
    pop         rbx
    ret

; ts_give (local): rdi = a thread state no encoder holds any more.  Into the
; pool (its document buffer and long-chunk arrays unmapped first when over
; TS_POOL_KEEP bytes), or unmapped when the pool is full.  Keeps rbx, rbp,
; r12-r15; clobbers rax, rcx, rdx, rsi, rdi, r9, r11.
PROC ts_give
    push        rbx
    mov         rbx, rdi
    cmp         qword [rbx + tstate.doccap], TS_POOL_KEEP
    jbe         .doc_kept
    mov         rdi, [rbx + tstate.doc]
    mov         rsi, [rbx + tstate.doccap]
    call        asmbpe_unmap
    mov         qword [rbx + tstate.doc], 0
    mov         qword [rbx + tstate.doccap], 0
.doc_kept:
    mov         rsi, [rbx + tstate.longcap]
    shl         rsi, 5                          ; x LONG_BYTES_PER
    cmp         rsi, TS_POOL_KEEP
    jbe         .long_kept
    mov         rdi, [rbx + tstate.long]
    call        asmbpe_unmap
    mov         qword [rbx + tstate.long], 0
    mov         qword [rbx + tstate.longcap], 0
.long_kept:
    POOL_LOCK
    mov         rax, [ts_pool_n]
    cmp         rax, TS_POOL_MAX
    jae         .full
    lea         rcx, [ts_pool]
    mov         [rcx + rax * 8], rbx
    inc         rax
    mov         [ts_pool_n], rax
    POOL_UNLOCK
    pop         rbx
    ret
.full:
    POOL_UNLOCK
    mov         rdi, rbx
    pop         rbx
    jmp         ts_unmap                        ; tail call
ENDPROC

; ts_take (local): rax = a thread state from the pool, or 0 when it has none.
; Its counters, scratch and run memo are cleared here; its cache, if it has
; one, is marked tstate.stale for its thread to clear.  Keeps rbx, rbp, rsi,
; r8-r15; clobbers rcx, rdx, rdi.
PROC ts_take
    POOL_LOCK
    xor         edx, edx
    mov         rcx, [ts_pool_n]
    test        rcx, rcx
    jz          .unlock
    dec         rcx
    mov         [ts_pool_n], rcx
    lea         rdx, [ts_pool]
    mov         rdx, [rdx + rcx * 8]
.unlock:
    POOL_UNLOCK
    test        rdx, rdx
    jz          .none
    xor         eax, eax
    lea         rdi, [rdx + tstate.chunks]      ; counters and cycles
    mov         ecx, (tstate.doc - tstate.chunks) / 8
    rep stosq
    lea         rdi, [rdx + tstate.stale]       ; the rest of the page
    mov         ecx, (tstate_size - tstate.stale) / 8
    rep stosq
    cmp         qword [rdx + tstate.cache], 0
    setne       al
    mov         [rdx + tstate.stale], rax
.none:
    mov         rax, rdx
    ret
ENDPROC

;-----------------------------------------------------------------------------
; uint64_t asmbpe_enc_trim(void)
; Unmaps every thread state the pool keeps (asmbpe_enc_free leaves them there
; for the process's next encoder) and returns how many.  A state in the pool
; belongs to no encoder: safe at any time, from any thread.
;-----------------------------------------------------------------------------
FUNC asmbpe_enc_trim, 0, 11, 0
    xor         ebp, ebp
.next:
    POOL_LOCK
    mov         rax, [ts_pool_n]
    test        rax, rax
    jz          .done
    dec         rax
    mov         [ts_pool_n], rax
    lea         rcx, [ts_pool]
    mov         rdi, [rcx + rax * 8]
    POOL_UNLOCK
    call        ts_unmap
    inc         rbp
    jmp         .next
.done:
    POOL_UNLOCK
    mov         rax, rbp
    RET
ENDFUNC
