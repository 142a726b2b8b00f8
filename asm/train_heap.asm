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
PROC tr_heap_push
    mov         rax, [rdi + tctx.hn]
    cmp         rax, [rdi + tctx.hcap]
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
    test        rax, rax
    jz          .enomem
    mov         [rdi + tctx.h], rax
    shl         qword [rdi + tctx.hcap], 1
    mov         rax, [rdi + tctx.hn]
.room:
    mov         r8, [rdi + tctx.h]
    lea         rcx, [rax + 1]
    mov         [rdi + tctx.hn], rcx
.up:                                            ; rax = hole
    test        rax, rax
    jz          .place
    lea         r9, [rax - 1]
    shr         r9, 1                           ; parent
    mov         r10, r9
    shl         r10, 4
    mov         r11, [r8 + r10 + hent.count]
    mov         rcx, [r8 + r10 + hent.pair]
    JBETTER     rsi, r11, rdx, rcx, .move_up
    jmp         .place
.move_up:
    mov         r10, rax
    shl         r10, 4
    mov         [r8 + r10 + hent.count], r11
    mov         [r8 + r10 + hent.pair], rcx
    mov         rax, r9
    jmp         .up
.place:
    shl         rax, 4
    mov         [r8 + rax + hent.count], rsi
    mov         [r8 + rax + hent.pair], rdx
    ret
.enomem:
    mov         qword [rdi + tctx.status], ASMBPE_ENOMEM
    ret
ENDPROC

; tr_heap_pop: rdi = ctx (HN > 0).  Removes the top.  Clobbers rax, rcx, rdx,
; rsi, r8-r11.
PROC tr_heap_pop
    mov         r8, [rdi + tctx.h]
    mov         r9, [rdi + tctx.hn]
    dec         r9
    mov         [rdi + tctx.hn], r9
    mov         rax, r9
    shl         rax, 4
    mov         rsi, [r8 + rax + hent.count]      ; the last entry sinks from 0
    mov         rdx, [r8 + rax + hent.pair]
    xor         eax, eax                        ; hole
.down:
    lea         r10, [rax * 2 + 1]              ; left child
    cmp         r10, r9
    jae         .place
    mov         r11, r10
    shl         r11, 4
    lea         rcx, [r10 + 1]
    cmp         rcx, r9
    jae         .one_child
    mov         rcx, [r8 + r11 + hent.count + hent_size]
    push        rax
    mov         rax, [r8 + r11 + hent.pair + hent_size]
    JBETTER     rcx, [r8 + r11 + hent.count], rax, [r8 + r11 + hent.pair], .right
    pop         rax
    jmp         .one_child
.right:
    pop         rax
    inc         r10
    add         r11, hent_size
.one_child:                                     ; r10 = best child, r11 = its offset
    mov         rcx, [r8 + r11 + hent.count]
    push        rax
    mov         rax, [r8 + r11 + hent.pair]
    JBETTER     rcx, rsi, rax, rdx, .move_down
    pop         rax
    jmp         .place
.move_down:
    mov         rcx, rax                        ; child's pair
    pop         rax
    push        rdx
    mov         rdx, rax
    shl         rdx, 4
    mov         [r8 + rdx + hent.pair], rcx
    mov         rcx, [r8 + r11 + hent.count]
    mov         [r8 + rdx + hent.count], rcx
    pop         rdx
    mov         rax, r10
    jmp         .down
.place:
    shl         rax, 4
    mov         [r8 + rax + hent.count], rsi
    mov         [r8 + rax + hent.pair], rdx
    ret
ENDPROC
