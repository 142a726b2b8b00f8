;-----------------------------------------------------------------------------
; train_recount.asm — BPE training: the routines that count every pair of W
; from scratch.  count_all_pairs fills the pair table (train_pairs.asm) for
; asmbpe_train's first merge; naive_loop, asmbpe_train's TF_NAIVE mode,
; recounts every pair for every merge (one thread: the reference the fast
; loop of train_merge.asm is checked against); verify (TF_VERIFY) recounts
; at the end and compares with the pair table the merge loop kept.
;-----------------------------------------------------------------------------
%include "asmbpe.inc"
%include "sys.inc"
%include "train.inc"

extern pt_fill_empty
extern pt_get
extern pt_add
extern pt_alloc
extern record_merge
extern scan_segment
extern dm_clear

section .text

;=============================================================================
; count_all_pairs: rdi = ctx.  Adds count(word) for every adjacent pair of
; every word to the pair table.  Keeps rdi.
;=============================================================================
PROC count_all_pairs
    SAVE        rbx, r12, r13, r14, r15
    mov         rbx, rdi
    xor         r12d, r12d                      ; k
.word:
    cmp         r12, [rbx + tctx.nw]
    jae         .ret
    mov         rax, [rbx + tctx.ws]
    mov         r13, [rax + r12 * 8]            ; i
    mov         rax, [rbx + tctx.wc]
    mov         r14, [rax + r12 * 8]            ; count
    mov         r15, [rbx + tctx.w]
.pair:
    movzx       eax, word [r15 + r13 * 2 + 2]
    cmp         eax, SEP
    je          .next_word
    movzx       esi, word [r15 + r13 * 2]
    shl         esi, 16
    or          esi, eax
    mov         rdi, rbx
    mov         rdx, r14
    call        pt_add
    inc         r13
    jmp         .pair
.next_word:
    inc         r12
    jmp         .word
.ret:
    mov         rdi, rbx
    RESTORE
ENDPROC

;=============================================================================
; naive_loop: rdi = ctx (one thread).  For every merge: recount every pair
; from scratch, take the best (highest count, then smallest pair), rewrite.
;=============================================================================
PROC naive_loop
    SAVE        rbx, r12, r13, r14, r15
    mov         rbx, rdi
.merge:
    mov         r8, [rbx + tctx.stats]
    mov         rax, [r8 + ST_MERGES * 8]
    cmp         rax, [rbx + tctx.nmerges]
    jae         .ret
    mov         rdi, [rbx + tctx.pt]               ; clear the table
    mov         rsi, [rbx + tctx.ptmask]
    inc         rsi
    call        pt_fill_empty
    mov         qword [rbx + tctx.ptused], 0
    mov         rdi, rbx
    call        count_all_pairs
    cmp         qword [rbx + tctx.status], 0
    jne         .ret
    mov         r8, [rbx + tctx.pt]                ; best slot
    mov         r9, [rbx + tctx.ptmask]
    inc         r9
    shl         r9, 4
    add         r9, r8
    xor         r12d, r12d                      ; best count
    mov         r13d, EMPTY_KEY                 ; best pair
.slot:
    cmp         r8, r9
    jae         .chosen
    mov         eax, [r8 + pslot.key]
    cmp         eax, EMPTY_KEY
    je          .next_slot
    mov         rcx, [r8 + pslot.val]
    JBETTER     rcx, r12, rax, r13, .better
    jmp         .next_slot
.better:
    mov         r12, rcx
    mov         r13, rax
.next_slot:
    add         r8, pslot_size
    jmp         .slot
.chosen:
    test        r12, r12
    jz          .ret
    cmp         r12, [rbx + tctx.mincount]
    jb          .ret
    mov         rdi, rbx
    mov         rsi, r12
    mov         rdx, r13
    call        record_merge
    mov         rdi, rbx
    mov         rsi, [rbx + tctx.dm]
    xor         edx, edx
    mov         rcx, [rbx + tctx.nw]
    call        scan_segment
    push        rbx
    mov         rbx, [rbx + tctx.dm]               ; deltas unused here
    call        dm_clear
    mov         rax, [rbx + dmap.status]
    mov         qword [rbx + dmap.repl], 0
    pop         rbx
    test        rax, rax
    jz          .merge
    mov         [rbx + tctx.status], rax
.ret:
    RESTORE
ENDPROC

;=============================================================================
; verify: rdi = ctx.  Recounts every pair into a fresh table and compares it
; with the kept one both ways; the first disagreement goes to the stats.
;=============================================================================
PROC verify
    SAVE        rbx, r12, r13, r14, r15
    mov         rbx, rdi
    mov         r12, [rbx + tctx.pt]               ; kept table
    mov         r13, [rbx + tctx.ptmask]
    mov         r14, [rbx + tctx.ptused]
    mov         rdi, rbx
    lea         rsi, [r13 + 1]
    call        pt_alloc
    test        eax, eax
    jnz         .enomem
    mov         rdi, rbx
    call        count_all_pairs                 ; into the fresh table
    ; kept -> fresh
    mov         r15, r12
.kept:
    mov         rax, r13
    inc         rax
    shl         rax, 4
    add         rax, r12
    cmp         r15, rax
    jae         .fresh
    mov         esi, [r15 + pslot.key]
    cmp         esi, EMPTY_KEY
    je          .kept_next
    mov         rdi, rbx
    call        pt_get
    cmp         rax, [r15 + pslot.val]
    je          .kept_next
    mov         rdx, [r15 + pslot.val]
    call        .report                         ; esi = P, rdx = kept, rax = true
.kept_next:
    add         r15, pslot_size
    jmp         .kept
.fresh:                                         ; fresh -> kept (swap tables)
    mov         r15, [rbx + tctx.pt]
    push        qword [rbx + tctx.ptmask]
    push        r15
    mov         [rbx + tctx.pt], r12
    mov         [rbx + tctx.ptmask], r13
.fresh_slot:
    mov         rax, [rsp + 8]
    inc         rax
    shl         rax, 4
    add         rax, [rsp]
    cmp         r15, rax
    jae         .compared
    mov         esi, [r15 + pslot.key]
    cmp         esi, EMPTY_KEY
    je          .fresh_next
    mov         rdi, rbx
    call        pt_get                          ; kept count
    cmp         rax, [r15 + pslot.val]
    je          .fresh_next
    mov         rdx, rax
    mov         rax, [r15 + pslot.val]
    call        .report
.fresh_next:
    add         r15, pslot_size
    jmp         .fresh_slot
.compared:
    pop         rdi                             ; free the fresh table
    pop         rsi
    inc         rsi
    shl         rsi, 4
    call        asmbpe_unmap
    mov         [rbx + tctx.ptused], r14
    jmp         .ret
.enomem:
    mov         [rbx + tctx.pt], r12
    mov         [rbx + tctx.ptmask], r13
    mov         qword [rbx + tctx.status], ASMBPE_ENOMEM
.ret:
    RESTORE
.report:                                        ; first disagreement only
    mov         r8, [rbx + tctx.stats]
    cmp         qword [r8 + ST_VERIFY_PAIR * 8], -1
    jne         .reported
    mov         ecx, esi
    shr         ecx, 16
    shl         esi, 16
    or          ecx, esi                        ; left | right << 16
    mov         [r8 + ST_VERIFY_PAIR * 8], rcx
    mov         [r8 + ST_VERIFY_KEPT * 8], rdx
    mov         [r8 + ST_VERIFY_TRUE * 8], rax
.reported:
    ret
ENDPROC
