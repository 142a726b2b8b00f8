;-----------------------------------------------------------------------------
; train_heap.asm — BPE training: the max-heap of candidate pairs (struc hent
; entries in the tctx.h mapping, grown by asmbpe_remap).  asmbpe_train pushes
; every pair once; coordinate (train_merge.asm) pushes a pair again when its
; count went up; choose pops the top and checks it against the pair table
; (lazy deletion).  tr_ prefix: encode.asm has routines of the same names.
;-----------------------------------------------------------------------------
%include "asmbpe.inc"
%include "sys.inc"
%include "train.inc"

section .text

;=============================================================================
; heap: entries struc hent {u64 count, u64 P}; the best is the highest count,
; then the smallest P (JBETTER, train.inc).
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
    cmp         hp_hole, [hp_ctx + tctx.hcap]
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
    lea         rcx, [hp_hole + 1]
    mov         [hp_ctx + tctx.hn], rcx
.up:
    test        hp_hole, hp_hole
    jz          .place
    lea         hp_par, [hp_hole - 1]
    shr         hp_par, 1                       ; parent
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

; tr_heap_pop: rdi = ctx (HN > 0).  Removes the top.  Clobbers rax, rcx, rdx,
; rsi, r8-r11.
%define hq_ent   r8    ; the entries
%define hq_n     r9    ; entries left
%define hq_cnt   rsi   ; count of the entry sinking from the top (the last one)
%define hq_child r10   ; the hole's best child (an entry index)
%define hq_coff  r11   ; its byte offset
PROC tr_heap_pop
    mov         hq_ent, [rdi + tctx.h]
    mov         hq_n, [rdi + tctx.hn]
    dec         hq_n
    mov         [rdi + tctx.hn], hq_n
    mov         rax, hq_n
    shl         rax, 4
    mov         hq_cnt, [hq_ent + rax + hent.count] ; the last entry sinks from 0
    mov         rdx, [hq_ent + rax + hent.pair]  ; (and its P in rdx)
    xor         eax, eax                        ; rax: the hole (an entry index)
.down:
    lea         hq_child, [rax * 2 + 1]         ; left child
    cmp         hq_child, hq_n
    jae         .place
    mov         hq_coff, hq_child
    shl         hq_coff, 4
    lea         rcx, [hq_child + 1]
    cmp         rcx, hq_n
    jae         .one_child
    mov         rcx, [hq_ent + hq_coff + hent.count + hent_size]
    push        rax
    mov         rax, [hq_ent + hq_coff + hent.pair + hent_size]
    JBETTER     rcx, [hq_ent + hq_coff + hent.count], rax, [hq_ent + hq_coff + hent.pair], .right
    pop         rax
    jmp         .one_child
.right:
    pop         rax
    inc         hq_child
    add         hq_coff, hent_size
.one_child:
    mov         rcx, [hq_ent + hq_coff + hent.count]
    push        rax
    mov         rax, [hq_ent + hq_coff + hent.pair]
    JBETTER     rcx, hq_cnt, rax, rdx, .move_down
    pop         rax
    jmp         .place
.move_down:
    mov         rcx, rax                        ; child's pair
    pop         rax
    push        rdx
    mov         rdx, rax
    shl         rdx, 4
    mov         [hq_ent + rdx + hent.pair], rcx
    mov         rcx, [hq_ent + hq_coff + hent.count]
    mov         [hq_ent + rdx + hent.count], rcx
    pop         rdx
    mov         rax, hq_child
    jmp         .down
.place:
    shl         rax, 4
    mov         [hq_ent + rax + hent.count], hq_cnt
    mov         [hq_ent + rax + hent.pair], rdx
    ret
ENDPROC
%undef  hq_ent
%undef  hq_n
%undef  hq_cnt
%undef  hq_child
%undef  hq_coff
