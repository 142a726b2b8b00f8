;-----------------------------------------------------------------------------
; train_pairs.asm — BPE training: the pair table, an exact count for every
; pair P of W (open addressing, struc pslot slots, linear probing from the
; hash PAIR_HASH, train.inc).  asmbpe_train sizes it and fills it
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
; pair table: slots {u64 key, u64 count}; key EMPTY_KEY = free
;=============================================================================

; pt_fill_empty: rdi = slots, rsi = nslots.  Clobbers rax, rcx, rdi.
PROC pt_fill_empty
    mov         rcx, rsi
    add         rcx, rcx                        ; qwords
    mov         rax, -1
    rep stosq
    ret
ENDPROC

; pt_lookup: rdi = ctx, rsi = P -> rax = its slot, or the free slot where it
; would go.  Clobbers rcx, rdx, r8.
static pt_lookup:function
pt_lookup:
    mov         rax, rsi
    PAIR_HASH   rax, eax, rdx
    mov         r8, [rdi + tctx.ptmask]
    mov         rcx, [rdi + tctx.pt]
.probe:
    and         rax, r8
    mov         rdx, rax
    shl         rdx, 4
    add         rdx, rcx
    cmp         [rdx + pslot.key], rsi
    je          .found
    cmp         qword [rdx + pslot.key], EMPTY_KEY
    je          .found
    inc         rax
    jmp         .probe
.found:
    mov         rax, rdx
    ret

; pt_get: rdi = ctx, rsi = P -> rax = count (0 when absent).
; Clobbers rcx, rdx, r8.
PROC pt_get
    call        pt_lookup
    cmp         [rax + pslot.key], rsi
    jne         .absent
    mov         rax, [rax + pslot.val]
    ret
.absent:
    xor         eax, eax
    ret
ENDPROC

; pt_add: rdi = ctx, rsi = P, rdx = delta -> rax = the new count.  Inserts
; the pair if absent; grows the table past 3/4 used (on failure sets
; tctx.status).  Clobbers rcx, rdx, r8-r11.
PROC pt_add
    mov         r9, rdx
    call        pt_lookup
    cmp         [rax + pslot.key], rsi
    je          .have
    mov         [rax + pslot.key], rsi
    mov         [rax + pslot.val], r9
    mov         r9, [rax + pslot.val]
    mov         rax, [rdi + tctx.ptused]
    inc         rax
    mov         [rdi + tctx.ptused], rax
    shl         rax, 2                          ; 4 used <= 3 slots (T54)
    push        rax
    mov         rax, [rdi + tctx.ptmask]
    lea         rax, [rax * 2 + rax + 3]
    cmp         [rsp], rax
    pop         rax
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
%define pg_ctx  rbx   ; the context
%define pg_old  r12   ; old slots
%define pg_nold r13   ; old slot count
%define pg_cur  r14   ; old slot being read
%define pg_end  r15   ; end of the old slots
static pt_grow:function
pt_grow:
    SAVE        rbx, r12, r13, r14, r15, rdi
    mov         pg_ctx, rdi
    mov         pg_old, [pg_ctx + tctx.pt]      ; old slots
    mov         pg_nold, [pg_ctx + tctx.ptmask]
    inc         pg_nold                         ; old nslots
    xor         ecx, ecx                        ; live pairs (count > 0): the
    mov         pg_end, pg_nold                 ; others are dropped (absent
    shl         pg_end, 4                       ; reads as 0; they come back
    add         pg_end, pg_old                  ; as new pairs if ever needed)
    mov         pg_cur, pg_old
.live:
    cmp         pg_cur, pg_end
    jae         .counted
    cmp         qword [pg_cur + pslot.key], EMPTY_KEY
    je          .live_next
    cmp         qword [pg_cur + pslot.val], 0
    je          .live_next
    inc         rcx
.live_next:
    add         pg_cur, pslot_size
    jmp         .live
.counted:
    mov         rsi, pg_nold                    ; the same size when at most a
    shl         rcx, 2                          ; quarter is live, else twice
                                                ; (T54: grown at 3/4 used)
    cmp         rcx, pg_nold
    jb          .sized
    add         rsi, rsi
.sized:
    call        pt_alloc
    test        eax, eax
    jnz         .fail
    mov         pg_cur, pg_old
    mov         pg_end, pg_nold
    shl         pg_end, 4
    add         pg_end, pg_old                  ; end of old slots
.each:
    cmp         pg_cur, pg_end
    jae         .done
    lea         rax, [pg_cur + GROW_AHEAD * pslot_size] ; prefetch the new slot of the
    cmp         rax, pg_end                     ; pair GROW_AHEAD slots on
    jae         .prefetched
    mov         rax, [rax + pslot.key]
    PAIR_HASH   rax, eax, rdx
    and         rax, [pg_ctx + tctx.ptmask]
    shl         rax, 4
    add         rax, [pg_ctx + tctx.pt]
    prefetcht0  [rax]
.prefetched:
    mov         rsi, [pg_cur + pslot.key]
    cmp         rsi, EMPTY_KEY
    je          .next
    cmp         qword [pg_cur + pslot.val], 0
    je          .next
    mov         rdi, pg_ctx
    call        pt_lookup
    mov         [rax + pslot.key], rsi
    mov         rcx, [pg_cur + pslot.val]
    mov         [rax + pslot.val], rcx
    inc         qword [pg_ctx + tctx.ptused]
.next:
    add         pg_cur, pslot_size
    jmp         .each
.done:
    mov         rdi, pg_old
    mov         rsi, pg_nold
    shl         rsi, 4
    call        asmbpe_unmap
    jmp         .ret
.fail:                                          ; keep the old table
    mov         [pg_ctx + tctx.pt], pg_old
    lea         rcx, [pg_nold - 1]
    mov         [pg_ctx + tctx.ptmask], rcx
    mov         qword [pg_ctx + tctx.status], ASMBPE_ENOMEM
.ret:
    RESTORE

%undef  pg_ctx
%undef  pg_old
%undef  pg_nold
%undef  pg_cur
%undef  pg_end