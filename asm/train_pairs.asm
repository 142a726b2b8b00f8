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
; the pair if absent: into the first slot of its probe whose pair's count fell
; to 0 (T113: such a pair reads as absent, and its key keeps the probes that
; pass it going, so dead pairs stop filling the table), else into the free
; slot that ends the probe, growing the table past 3/4 used (on failure sets
; tctx.status).  tctx.ptkeep (tests) turns the first off.  Clobbers rcx, rdx,
; r8-r11.
PROC pt_add
    mov         r9, rdx
    call        pt_lookup
    cmp         [rax + pslot.key], rsi
    je          .have
    cmp         qword [rdi + tctx.ptkeep], 0
    jne         .take_free
    mov         rcx, rsi                        ; probe again from the home
    PAIR_HASH   rcx, ecx, rdx                   ; for a dead pair's slot
    mov         r8, [rdi + tctx.ptmask]
    mov         r10, [rdi + tctx.pt]
.find_dead:
    and         rcx, r8
    mov         rdx, rcx
    shl         rdx, 4
    add         rdx, r10
    cmp         rdx, rax
    je          .take_free                      ; none before the free slot
    cmp         qword [rdx + pslot.val], 0
    je          .take_dead
    inc         rcx
    jmp         .find_dead
.take_dead:                                     ; the slot count stays
    mov         [rdx + pslot.key], rsi
    mov         [rdx + pslot.val], r9
    mov         rax, r9
    ret
.take_free:
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

; pt_grow: rdi = ctx.  Rehashes the pairs whose count is not 0 in place
; (T59): the table keeps its size when at most half of its slots hold such
; pairs, else it doubles (asmbpe_remap: the pages move, nothing is copied,
; and only the new half is added to the memory in use).  Keeps rdi.
;
; In place, as absl's DropDeletesWithoutResize: every live pair is first
; marked unplaced (PT_UNPLACED in its key), the dead ones freed.  Then for
; each unplaced slot i in turn, its pair probes from its home for the first
; slot that is free, unplaced, or i itself: i itself, it stays; free, it
; moves there and i is freed; unplaced, the two swap and the pair that came
; to i probes next.  A placed pair never probed past an unplaced slot (it
; would have stopped there), so freeing one breaks no chain.
%define PT_UNPLACED (1 << 63)   ; keys are left | right << 32, ids < 2^31
%define GROW_AHEAD  16          ; slots between a home's prefetch and its use
%define pg_ctx  rbx   ; the context
%define pg_t    r12   ; the slots
%define pg_mask r13   ; the (new) mask
%define pg_i    r14   ; the slot being placed
%define pg_n    r15   ; old slot count
static pt_grow:function
pt_grow:
    SAVE        rbx, r12, r13, r14, r15, rdi
    mov         pg_ctx, rdi
    mov         pg_t, [pg_ctx + tctx.pt]
    mov         pg_n, [pg_ctx + tctx.ptmask]
    inc         pg_n
    mov         rdx, PT_UNPLACED
    xor         ecx, ecx                        ; live pairs (count > 0): the
    xor         eax, eax                        ; others are dropped (absent
.mark:                                          ; reads as 0; they come back
    mov         rsi, [pg_t + rax + pslot.key]   ; as new pairs if ever needed)
    cmp         rsi, EMPTY_KEY
    je          .mark_next
    cmp         qword [pg_t + rax + pslot.val], 0
    je          .dead
    or          rsi, rdx
    mov         [pg_t + rax + pslot.key], rsi
    inc         rcx
    jmp         .mark_next
.dead:
    mov         qword [pg_t + rax + pslot.key], EMPTY_KEY
.mark_next:
    add         rax, pslot_size
    mov         rsi, pg_n
    shl         rsi, 4
    cmp         rax, rsi
    jb          .mark
    mov         [pg_ctx + tctx.ptused], rcx
    lea         pg_mask, [pg_n - 1]
    add         rcx, rcx                        ; more than half live: twice
    cmp         rcx, pg_n                       ; the slots
    jbe         .sized
    mov         rdi, pg_t
    mov         rsi, pg_n
    shl         rsi, 4
    lea         rdx, [rsi + rsi]
    call        asmbpe_remap
    test        rax, rax
    jz          .fail
    mov         pg_t, rax
    mov         [pg_ctx + tctx.pt], rax
    mov         rdi, pg_n
    shl         rdi, 4
    add         rdi, rax                        ; the new half: free
    mov         rsi, pg_n
    call        pt_fill_empty
    lea         pg_mask, [pg_n * 2 - 1]
    mov         [pg_ctx + tctx.ptmask], pg_mask
.sized:
    mov         rax, [pg_ctx + tctx.stats]
    inc         qword [rax + ST_PT_REHASHES * 8]
    lea         rcx, [pg_mask + 1]
    mov         [rax + ST_PT_SLOTS * 8], rcx
    xor         pg_i, pg_i
.each:
    cmp         pg_i, pg_n
    jae         .ret
    lea         rax, [pg_i + GROW_AHEAD]        ; prefetch the home of the
    cmp         rax, pg_n                       ; pair GROW_AHEAD slots on
    jae         .prefetched
    shl         rax, 4
    mov         rax, [pg_t + rax + pslot.key]
    btr         rax, 63
    PAIR_HASH   rax, eax, rdx
    and         rax, pg_mask
    shl         rax, 4
    prefetcht0  [pg_t + rax]
.prefetched:
    mov         rax, pg_i
    shl         rax, 4
    mov         rsi, [pg_t + rax + pslot.key]   ; rsi, r8: the pair carried
    cmp         rsi, EMPTY_KEY
    je          .next
    btr         rsi, 63
    jnc         .next                           ; (placed already)
    mov         r8, [pg_t + rax + pslot.val]
.place:
    mov         rax, rsi
    PAIR_HASH   rax, eax, rdx
.probe:
    and         rax, pg_mask
    cmp         rax, pg_i
    je          .stays
    mov         rdx, rax
    shl         rdx, 4
    mov         rcx, [pg_t + rdx + pslot.key]
    cmp         rcx, EMPTY_KEY
    je          .moves
    bt          rcx, 63
    jc          .swaps
    inc         rax
    jmp         .probe
.stays:                                         ; slot i is the first free
    mov         rdx, pg_i                       ; one of its probe
    shl         rdx, 4
    mov         [pg_t + rdx + pslot.key], rsi
    mov         [pg_t + rdx + pslot.val], r8
    jmp         .next
.moves:
    mov         [pg_t + rdx + pslot.key], rsi
    mov         [pg_t + rdx + pslot.val], r8
    mov         rax, pg_i
    shl         rax, 4
    mov         qword [pg_t + rax + pslot.key], EMPTY_KEY
    jmp         .next
.swaps:                                         ; place it, carry the other
    btr         rcx, 63
    mov         r9, [pg_t + rdx + pslot.val]
    mov         [pg_t + rdx + pslot.key], rsi
    mov         [pg_t + rdx + pslot.val], r8
    mov         rsi, rcx
    mov         r8, r9
    jmp         .place
.next:
    inc         pg_i
    jmp         .each
.fail:                                          ; the old table, still marked:
    mov         qword [pg_ctx + tctx.status], ASMBPE_ENOMEM
    lea         pg_mask, [pg_n - 1]             ; placed at its size (the run
    jmp         .sized                          ; stops at the status)
.ret:
    RESTORE

%undef  pg_ctx
%undef  pg_t
%undef  pg_mask
%undef  pg_i
%undef  pg_n