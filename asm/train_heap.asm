;-----------------------------------------------------------------------------
; train_heap.asm — BPE training: the max-heap of candidate pairs (struc hent
; entries in the tctx.h mapping, grown by asmbpe_remap).  asmbpe_train fills
; it from the pair table (tr_heap_fill: every pair counted tctx.hfloor times
; or more); coordinate (train_merge.asm) pushes a pair again when its count
; went up to the floor or above; choose pops the top and checks it against
; the pair table (lazy deletion), and refills the heap with a lower floor
; when it runs out.  So every pair counted hfloor times or more has an entry
; of its count or higher.  tr_ prefix: encode.asm has routines of the same
; names.
;-----------------------------------------------------------------------------
%include "asmbpe.inc"
%include "sys.inc"
%include "train.inc"

section .text

;=============================================================================
; heap: entries struc hent {u64 count, u64 P}; the best is the highest count,
; then the smallest P (JBETTER, train.inc); 4-ary, entry i at tctx.h +
; HEAP_OFF + 16 i (train.inc: a node's children share a line).
;=============================================================================

; tr_heap_push: rdi = ctx, rsi = count, rdx = P.  Clobbers rax, rcx, r8-r11.
%define hp_ctx  rdi   ; the context
%define hp_cnt  rsi   ; count of the new entry
%define hp_pair rdx   ; its P
%define hp_hole rax   ; the hole moving up (an entry index)
%define hp_ent  r8    ; the entries
%define hp_par  r9    ; the hole's parent
PROC tr_heap_push
    mov         hp_hole, [hp_ctx + tctx.hn]
    lea         rcx, [hp_hole + HEAP_ROOM]
    cmp         rcx, [hp_ctx + tctx.hcap]
    jb          .room
    push        rsi
    push        rdx
    push        rdi
    mov         rsi, [rdi + tctx.hcap]
    shl         rsi, 4                          ; old bytes
    lea         rdx, [rsi * 2]
    mov         rdi, [rdi + tctx.h]
    call        asmbpe_remap
    pop         rdi
    pop         rdx
    pop         rsi
    test        rax, rax                        ; the moved entries
    jz          .enomem
    mov         [hp_ctx + tctx.h], rax
    shl         qword [hp_ctx + tctx.hcap], 1
    mov         hp_hole, [hp_ctx + tctx.hn]
.room:
    mov         hp_ent, [hp_ctx + tctx.h]
    add         hp_ent, HEAP_OFF
    lea         rcx, [hp_hole + 1]
    mov         [hp_ctx + tctx.hn], rcx
.up:
    test        hp_hole, hp_hole
    jz          .place
    lea         hp_par, [hp_hole - 1]
    shr         hp_par, 2                       ; parent
    mov         r10, hp_par
    shl         r10, 4
    mov         r11, [hp_ent + r10 + hent.count]
    mov         rcx, [hp_ent + r10 + hent.pair]
    JBETTER     hp_cnt, r11, hp_pair, rcx, .move_up
    jmp         .place
.move_up:
    mov         r10, hp_hole
    shl         r10, 4
    mov         [hp_ent + r10 + hent.count], r11
    mov         [hp_ent + r10 + hent.pair], rcx
    mov         hp_hole, hp_par
    jmp         .up
.place:
    shl         hp_hole, 4
    mov         [hp_ent + hp_hole + hent.count], hp_cnt
    mov         [hp_ent + hp_hole + hent.pair], hp_pair
    ret
.enomem:
    mov         qword [hp_ctx + tctx.status], ASMBPE_ENOMEM
    ret
ENDPROC
%undef  hp_ctx
%undef  hp_cnt
%undef  hp_pair
%undef  hp_hole
%undef  hp_ent
%undef  hp_par

%define HEAP_PF_LINES 4     ; lines prefetched a level ahead: the hole's
                            ; grandchildren, 4 x 4 entries
; tr_heap_pop: rdi = ctx (HN > 0).  Removes the top: the last entry sinks
; from the root, each step to the best of the hole's (up to 4) children.
; Clobbers rax, rcx, rdx, rsi, r8-r11.
%define hq_ent   r8    ; the entries
%define hq_end   r9    ; the entries' end (a byte offset: 16 x entries left)
%define hq_cnt   rsi   ; count of the entry sinking from the top (the last one)
%define hq_bcnt  r10   ; the best child's count
%define hq_best  r11   ; and its byte offset
; HQ_CHILD k: child k (1..3) of the hole (rax: its byte offset), when there
; is one, becomes the best if better.  Clobbers rcx, rbx.
%macro HQ_CHILD 1
    lea         rcx, [rax * 4 + 16 + %1 * 16]
    cmp         rcx, hq_end
    jae         .chosen
    mov         rbx, [hq_ent + rcx + hent.pair]
    JBETTER     [hq_ent + rcx + hent.count], hq_bcnt, rbx, [hq_ent + hq_best + hent.pair], %%better
    jmp         %%kept
%%better:
    mov         hq_best, rcx
    mov         hq_bcnt, [hq_ent + rcx + hent.count]
%%kept:
%endmacro
PROC tr_heap_pop
    push        rbx
    mov         hq_ent, [rdi + tctx.h]
    add         hq_ent, HEAP_OFF
    mov         hq_end, [rdi + tctx.hn]
    dec         hq_end
    mov         [rdi + tctx.hn], hq_end
    shl         hq_end, 4
    mov         hq_cnt, [hq_ent + hq_end + hent.count] ; the last entry sinks from 0
    mov         rdx, [hq_ent + hq_end + hent.pair]  ; (and its P in rdx)
    xor         eax, eax                        ; rax: the hole (a byte offset)
.down:
    lea         hq_best, [rax * 4 + 16]         ; its first child: (4i + 1) x 16
    cmp         hq_best, hq_end
    jae         .place
    lea         rcx, [rax * 8]                  ; the lines of its children's
    lea         rcx, [hq_ent + rcx * 2 + 80]    ; children (16 o + 80: four
%assign hq_line 0                               ; lines, one per child; a
%rep HEAP_PF_LINES                              ; prefetch never faults), read
    prefetcht0  [rcx + hq_line]                 ; at the next level: their
%assign hq_line hq_line + 64                    ; loads overlap this one
%endrep
    mov         hq_bcnt, [hq_ent + hq_best + hent.count]
    HQ_CHILD    1
    HQ_CHILD    2
    HQ_CHILD    3
.chosen:
    mov         rcx, [hq_ent + hq_best + hent.pair]
    JBETTER     hq_bcnt, hq_cnt, rcx, rdx, .move_down
    jmp         .place
.move_down:
    mov         [hq_ent + rax + hent.count], hq_bcnt
    mov         [hq_ent + rax + hent.pair], rcx
    mov         rax, hq_best
    jmp         .down
.place:
    mov         [hq_ent + rax + hent.count], hq_cnt
    mov         [hq_ent + rax + hent.pair], rdx
    pop         rbx
    ret
ENDPROC
%undef  hq_ent
%undef  hq_end
%undef  hq_cnt
%undef  hq_bcnt
%undef  hq_best

; tr_heap_fill: rdi = ctx.  Empties the heap and pushes every pair of the
; pair table whose count is tctx.hfloor or more.  Keeps rdi; clobbers rax,
; rcx, rdx, rsi, r8-r11.
%define hf_ctx  rbx   ; the context
%define hf_slot r12   ; the pair-table slot
%define hf_end  r13   ; the slots' end
PROC tr_heap_fill
    SAVE        rbx, r12, r13, r14, rdi         ; (calls aligned)
    mov         hf_ctx, rdi
    mov         qword [hf_ctx + tctx.hn], 0
    mov         hf_slot, [hf_ctx + tctx.pt]
    mov         hf_end, [hf_ctx + tctx.ptmask]
    inc         hf_end
    shl         hf_end, 4
    add         hf_end, hf_slot
.slot:
    cmp         hf_slot, hf_end
    jae         .ret
    mov         rdx, [hf_slot + pslot.key]
    cmp         rdx, EMPTY_KEY
    je          .next
    mov         rsi, [hf_slot + pslot.val]
    cmp         rsi, [hf_ctx + tctx.hfloor]
    jb          .next
    mov         rdi, hf_ctx
    call        tr_heap_push
.next:
    add         hf_slot, pslot_size
    jmp         .slot
.ret:
    RESTORE
ENDPROC
%undef  hf_ctx
%undef  hf_slot
%undef  hf_end
