;-----------------------------------------------------------------------------
; train_pairs.asm — BPE training: the pair table, an exact count for every
; pair P of W (open addressing, struc pslot slots, linear probing from the
; high half of P * PAIR_HASH_K).  asmbpe_train sizes it and fills it
; (count_all_pairs, train_recount.asm); coordinate (train_merge.asm) adds the
; threads' deltas to it after every merge; choose reads it to find stale heap
; entries; pt_grow rehashes it, dropping the pairs whose count fell to 0.
; The delta maps (train_dmap.asm) share pt_fill_empty and the slot layout.
;-----------------------------------------------------------------------------
%include "asmbpe.inc"
%include "sys.inc"
%include "train.inc"

section .text

;=============================================================================
; pair table: slots {u32 key, u32 pad, u64 count}; key EMPTY_KEY = free
;=============================================================================

; pt_fill_empty: rdi = slots, rsi = nslots.  Clobbers rax, rcx, rdi.
PROC pt_fill_empty
    mov         rcx, rsi
    add         rcx, rcx                        ; qwords
    mov         rax, -1
    rep stosq
    ret
ENDPROC

; pt_lookup: rdi = ctx, esi = P -> rax = its slot, or the free slot where it
; would go.  Clobbers rcx, rdx, r8.
static pt_lookup:function
pt_lookup:
    mov         eax, esi
    mov         rdx, PAIR_HASH_K
    imul        rax, rdx
    shr         rax, 32
    mov         r8, [rdi + tctx.ptmask]
    mov         rcx, [rdi + tctx.pt]
.probe:
    and         rax, r8
    mov         rdx, rax
    shl         rdx, 4
    add         rdx, rcx
    cmp         [rdx + pslot.key], esi
    je          .found
    cmp         dword [rdx + pslot.key], EMPTY_KEY
    je          .found
    inc         rax
    jmp         .probe
.found:
    mov         rax, rdx
    ret

; pt_get: rdi = ctx, esi = P -> rax = count (0 when absent).
; Clobbers rcx, rdx, r8.
PROC pt_get
    call        pt_lookup
    cmp         [rax + pslot.key], esi
    jne         .absent
    mov         rax, [rax + pslot.val]
    ret
.absent:
    xor         eax, eax
    ret
ENDPROC

; pt_add: rdi = ctx, esi = P, rdx = delta -> rax = the new count.  Inserts
; the pair if absent; grows the table past half full (on failure sets
; tctx.status).  Clobbers rcx, rdx, r8-r11.
PROC pt_add
    mov         r9, rdx
    call        pt_lookup
    cmp         [rax + pslot.key], esi
    je          .have
    mov         [rax + pslot.key], esi
    mov         [rax + pslot.val], r9
    mov         r9, [rax + pslot.val]
    mov         rax, [rdi + tctx.ptused]
    inc         rax
    mov         [rdi + tctx.ptused], rax
    add         rax, rax
    cmp         rax, [rdi + tctx.ptmask]
    jbe         .new_done
    push        r9
    push        rsi
    call        pt_grow
    pop         rsi
    pop         r9
.new_done:
    mov         rax, r9
    ret
.have:
    add         [rax + pslot.val], r9
    mov         rax, [rax + pslot.val]
    ret
ENDPROC

; pt_alloc: rdi = ctx, rsi = nslots (power of two).  eax = 0 or ENOMEM.
PROC pt_alloc
    SAVE        rbx, r12, r13
    mov         rbx, rdi
    mov         r12, rsi
    mov         rdi, rsi
    shl         rdi, 4
    call        asmbpe_map
    test        rax, rax
    jz          .enomem
    mov         [rbx + tctx.pt], rax
    lea         rcx, [r12 - 1]
    mov         [rbx + tctx.ptmask], rcx
    mov         qword [rbx + tctx.ptused], 0
    mov         rdi, rax
    mov         rsi, r12
    call        pt_fill_empty
    xor         eax, eax
    jmp         .ret
.enomem:
    mov         eax, ASMBPE_ENOMEM
.ret:
    RESTORE
ENDPROC

; pt_free: rdi = ctx
PROC pt_free
    SAVE        rbx
    mov         rbx, rdi
    mov         rdi, [rbx + tctx.pt]
    mov         rsi, [rbx + tctx.ptmask]
    inc         rsi
    shl         rsi, 4
    call        asmbpe_unmap
    mov         qword [rbx + tctx.pt], 0
    RESTORE
ENDPROC

; pt_grow: rdi = ctx.  Rehashes the pairs whose count is not 0 into a new
; table, twice the size unless at most a quarter of the slots held such
; pairs.  Keeps rdi.
%define GROW_AHEAD  16      ; old slots between a new-slot prefetch and its use
static pt_grow:function
pt_grow:
    SAVE        rbx, r12, r13, r14, r15, rdi
    mov         rbx, rdi
    mov         r12, [rbx + tctx.pt]               ; old slots
    mov         r13, [rbx + tctx.ptmask]
    inc         r13                             ; old nslots
    xor         ecx, ecx                        ; live pairs (count > 0): the
    mov         r15, r13                        ; others are dropped (absent
    shl         r15, 4                          ; reads as 0; they come back
    add         r15, r12                        ; as new pairs if ever needed)
    mov         r14, r12
.live:
    cmp         r14, r15
    jae         .counted
    cmp         dword [r14 + pslot.key], EMPTY_KEY
    je          .live_next
    cmp         qword [r14 + pslot.val], 0
    je          .live_next
    inc         rcx
.live_next:
    add         r14, pslot_size
    jmp         .live
.counted:
    mov         rsi, r13                        ; the same size when at most a
    shl         rcx, 2                          ; quarter is live, else twice
    cmp         rcx, r13
    jb          .sized
    add         rsi, rsi
.sized:
    call        pt_alloc
    test        eax, eax
    jnz         .fail
    mov         r14, r12
    mov         r15, r13
    shl         r15, 4
    add         r15, r12                        ; end of old slots
.each:
    cmp         r14, r15
    jae         .done
    lea         rax, [r14 + GROW_AHEAD * pslot_size] ; prefetch the new slot of the
    cmp         rax, r15                        ; pair GROW_AHEAD slots on
    jae         .prefetched
    mov         eax, [rax + pslot.key]
    mov         rdx, PAIR_HASH_K
    imul        rax, rdx
    shr         rax, 32
    and         rax, [rbx + tctx.ptmask]
    shl         rax, 4
    add         rax, [rbx + tctx.pt]
    prefetcht0  [rax]
.prefetched:
    mov         esi, [r14 + pslot.key]
    cmp         esi, EMPTY_KEY
    je          .next
    cmp         qword [r14 + pslot.val], 0
    je          .next
    mov         rdi, rbx
    call        pt_lookup
    mov         [rax + pslot.key], esi
    mov         rcx, [r14 + pslot.val]
    mov         [rax + pslot.val], rcx
    inc         qword [rbx + tctx.ptused]
.next:
    add         r14, pslot_size
    jmp         .each
.done:
    mov         rdi, r12
    mov         rsi, r13
    shl         rsi, 4
    call        asmbpe_unmap
    jmp         .ret
.fail:                                          ; keep the old table
    mov         [rbx + tctx.pt], r12
    lea         rcx, [r13 - 1]
    mov         [rbx + tctx.ptmask], rcx
    mov         qword [rbx + tctx.status], ASMBPE_ENOMEM
.ret:
    RESTORE
