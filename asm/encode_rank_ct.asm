;-----------------------------------------------------------------------------
; encode_rank_ct.asm — a thread's chunk table over its life: rk_ct_seed (the
; seed put in), rk_ct_full (doubled, or back to the seed), rk_ct_reset
; (the rank encoder: its layouts and macros in encode_rank.inc)
;-----------------------------------------------------------------------------
%include "encode_rank.inc"

extern asmbpe_remap

section .text

;-----------------------------------------------------------------------------
; rk_ct_seed: rbx = a thread state whose chunk table (rts.ct, rts.ctmask) is
; empty: the seed's entries put in it (linear probing from each key's home).
; Keeps rbx, rbp, r12-r15; clobbers the other registers and xmm0-xmm1.
;-----------------------------------------------------------------------------
PROC rk_ct_seed
    mov         rdx, [rbx + rts.enc]
    mov         rsi, [rdx + renc.seed]
    mov         r8, [rdx + renc.seedn]
    shl         r8, CT_SHIFT
    add         r8, rsi                         ; the seed's end
    mov         r9, [rbx + rts.ctmask]
    mov         r10, [rbx + rts.ct]
.entry:
    cmp         rsi, r8
    jae         .done
    CT_PUT      r10, r9, rsi
    add         rsi, ctent_size
    jmp         .entry
.done:
    mov         rax, [rdx + renc.seedn]
    mov         [rbx + rts.ctfill], rax
    ret
ENDPROC

;-----------------------------------------------------------------------------
; rk_ct_full: rbx = a thread state whose chunk table or arena filled up
; (rk_doc, after the batch whose records point into them): the table
; doubled (every entry put again) while under 2^CT_MAX_BITS entries, the
; arena doubled (mremap: entries keep their offsets) while under
; CT_ARENA_MAX ids; otherwise, or when memory runs out, both back to the
; seed.  Keeps rbx, rbp, r12-r15; clobbers the other registers, xmm0-xmm1.
;-----------------------------------------------------------------------------
PROC rk_ct_full
    push        r12
    push        r13
    push        r14
    push        r15
    mov         qword [rbx + rts.reset], 0
    mov         rax, [rbx + rts.enc]
    test        qword [rax + renc.flags], RF_NOGROW
    jnz         .reset
    mov         rax, [rbx + rts.ctfill]
    cmp         rax, [rbx + rts.ctcap]
    jb          .arena
    mov         rax, [rbx + rts.ctbytes]
    cmp         rax, 1 << (CT_MAX_BITS + CT_SHIFT)
    jae         .reset
    lea         rdi, [rax * 2]                  ; the table doubled
    call        asmbpe_map
    test        rax, rax
    jz          .reset
    mov         r12, rax                        ; the new one
    mov         r13, [rbx + rts.ct]             ; the old one
    mov         r14, [rbx + rts.ctbytes]
    lea         r15, [r14 * 2]
    shr         r15, CT_SHIFT
    dec         r15                             ; its entries - 1
    mov         rsi, r13
    lea         r8, [r13 + r14]
.rehash:
    cmp         byte [rsi + ctent.len], 0
    je          .rh_next
    CT_PUT      r12, r15, rsi
.rh_next:
    add         rsi, ctent_size
    cmp         rsi, r8
    jb          .rehash
    mov         rdi, r13
    mov         rsi, r14
    call        asmbpe_unmap
    mov         [rbx + rts.ct], r12
    lea         rax, [r14 * 2]
    mov         [rbx + rts.ctbytes], rax
    dec         rax
    mov         [rbx + rts.ctbmask], rax
    mov         [rbx + rts.ctmask], r15
    lea         rax, [r15 + 1]
    shr         rax, 3
    lea         rax, [rax + rax * 4]
    mov         [rbx + rts.ctcap], rax
.arena:
    mov         rax, [rbx + rts.apos]
    add         rax, 32
    cmp         rax, [rbx + rts.acap]
    jbe         .done                           ; (room left)
    mov         rsi, [rbx + rts.acap]
    cmp         rsi, CT_ARENA_MAX
    jae         .reset
    mov         rdi, [rbx + rts.arena]
    shl         rsi, 2
    lea         rdx, [rsi * 2]
    call        asmbpe_remap
    test        rax, rax
    jz          .reset
    mov         [rbx + rts.arena], rax
    shl         qword [rbx + rts.acap], 1
    jmp         .done
.reset:
    call        rk_ct_reset
.done:
    pop         r15
    pop         r14
    pop         r13
    pop         r12
    ret
ENDPROC

;-----------------------------------------------------------------------------
; rk_ct_reset: rbx = a thread state: its chunk table emptied and the seed's
; entries put again (at the size it has grown to), its arena empty.  Keeps
; rbx, rbp, r12-r15; clobbers the other registers and xmm0-xmm1.
;-----------------------------------------------------------------------------
PROC rk_ct_reset
    mov         rdi, [rbx + rts.ct]             ; emptied, then the seed
    mov         rcx, [rbx + rts.ctbytes]
    xor         eax, eax
    rep stosb
    call        rk_ct_seed
    mov         qword [rbx + rts.apos], 0
    mov         qword [rbx + rts.reset], 0
    ret
ENDPROC
