;-----------------------------------------------------------------------------
; train_recount.asm — BPE training: the routines that count every pair of W
; from scratch.  count_byte_pairs (count_all_pairs as its fallback) fills
; the pair table (train_pairs.asm) for asmbpe_train's first merge; naive_loop, asmbpe_train's TF_NAIVE mode,
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
; every word to the pair table.  Keeps rdi.  (A prefetch of the pair 16
; positions on, T78, was no faster: most pairs hit lines already cached.)
;=============================================================================
%define ca_ctx rbx   ; the context
%define ca_k   r12   ; the word
%define ca_k_d r12d  ; (32-bit view)
%define ca_i   r13   ; the position of its pair
%define ca_cnt r14   ; its count
%define ca_w   r15   ; W
PROC count_all_pairs
    SAVE        rbx, r12, r13, r14, r15
    mov         ca_ctx, rdi
    xor         ca_k_d, ca_k_d                  ; k
.word:
    cmp         ca_k, [ca_ctx + tctx.nw]
    jae         .ret
    mov         rax, [ca_ctx + tctx.ws]
    mov         ca_i, [rax + ca_k * 8]          ; i
    mov         rax, [ca_ctx + tctx.wc]
    mov         ca_cnt, [rax + ca_k * 8]        ; count
    mov         ca_w, [ca_ctx + tctx.w]
.pair:
    LDT         eax, [ca_w + ca_i * TW + TW]
    cmp         eax, SEP
    je          .next_word
    LDT         esi, [ca_w + ca_i * TW]
    shl         rsi, PSHIFT
    or          rsi, rax
    mov         rdi, ca_ctx
    mov         rdx, ca_cnt
    call        pt_add
    inc         ca_i
    jmp         .pair
.next_word:
    inc         ca_k
    jmp         .word
.ret:
    mov         rdi, ca_ctx
    RESTORE
ENDPROC
%undef  ca_ctx
%undef  ca_k
%undef  ca_k_d
%undef  ca_i
%undef  ca_cnt
%undef  ca_w

;=============================================================================
; count_byte_pairs: rdi = ctx.  count_all_pairs for a W whose tokens are all
; bytes (as laid out, before the first merge): the counts go into a direct
; array of the 65,536 byte pairs (512 KB, mostly in L2) instead of a probe
; of the pair table per position, one array per thread (cbp_worker: an equal
; share of the words each), summed into the first; each pair that occurs is
; then added to the table once.  Falls back to count_all_pairs when the
; arrays cannot be mapped.  Keeps rdi.
;=============================================================================
%define CBP_ARRAY   (65536 * 8)     ; bytes of one thread's array
%define CBP_WORDS   65536           ; words per thread, at least
%define cb_ctx  rbx   ; the context
%define cb_arr  r13   ; u64 counts [left << 8 | right]: the first array
%define cb_n     r14   ; arrays (threads)
PROC count_byte_pairs
    SAVE        rbx, r12, r13, r14, r15
    sub         rsp, 32                         ; {ctx, arrays, n}: aligned
    mov         cb_ctx, rdi
    mov         rax, [cb_ctx + tctx.nw]         ; threads: at most one per
    xor         edx, edx                        ; CBP_WORDS words
    mov         ecx, CBP_WORDS
    div         rcx
    mov         cb_n, [cb_ctx + tctx.nth]
    cmp         cb_n, rax
    cmova       cb_n, rax
    mov         eax, 1
    test        cb_n, cb_n
    cmovz       cb_n, rax
    mov         rdi, cb_n
    imul        rdi, rdi, CBP_ARRAY
    call        asmbpe_map
    test        rax, rax
    jz          .fallback
    mov         cb_arr, rax
    mov         [rsp], cb_ctx
    mov         [rsp + 8], cb_arr
    mov         [rsp + 16], cb_n
    cmp         cb_n, 1
    je          .alone
    lea         rdi, [cbp_worker]
    mov         rsi, rsp
    mov         rdx, cb_n
    call        asmbpe_parallel
    test        eax, eax
    jz          .sum
    mov         qword [rsp + 16], 1             ; no threads: this one, all
.alone:                                         ; the words into the first
    mov         rdi, rsp
    xor         esi, esi
    call        cbp_worker
    jmp         .counted
.sum:                                           ; the others into the first
    mov         r15d, 1
.sum_array:
    cmp         r15, cb_n
    jae         .summed
    mov         rsi, r15
    imul        rsi, rsi, CBP_ARRAY
    add         rsi, cb_arr
    xor         eax, eax
.sum_lanes:
    vmovdqu     ymm0, [cb_arr + rax]
    vpaddq      ymm0, ymm0, [rsi + rax]
    vmovdqu     [cb_arr + rax], ymm0
    add         eax, 32
    cmp         eax, CBP_ARRAY
    jb          .sum_lanes
    inc         r15
    jmp         .sum_array
.summed:
    vzeroupper
.counted:
    xor         r12d, r12d                      ; each pair that occurs, in
.put:                                           ; order, to the table
    mov         rdx, [cb_arr + r12 * 8]
    test        rdx, rdx
    jz          .put_next
    mov         rsi, r12
    shr         rsi, 8
    shl         rsi, PSHIFT
    movzx       eax, r12b
    or          rsi, rax                        ; left << PSHIFT | right
    mov         rdi, cb_ctx
    call        pt_add
.put_next:
    inc         r12d
    cmp         r12d, 65536
    jb          .put
    mov         rdi, cb_arr
    mov         rsi, cb_n
    imul        rsi, rsi, CBP_ARRAY
    call        asmbpe_unmap
    mov         rdi, cb_ctx
    add         rsp, 32
    RESTORE
.fallback:
    mov         rdi, cb_ctx
    call        count_all_pairs
    add         rsp, 32
    RESTORE
ENDPROC
%undef  cb_ctx
%undef  cb_arr
%undef  cb_n

; cbp_worker({ctx, arrays, n}, tid): the byte pairs of words [nw * tid / n,
; nw * (tid + 1) / n), times their counts, into array tid.
%define cw_ctx  rbx   ; the context
%define cw_k    r12   ; the word
%define cw_arr  r13   ; this thread's array
%define cw_cnt  r14   ; the word's count
%define cw_w    r15   ; W
static cbp_worker:function
cbp_worker:
    SAVE        rbx, r12, r13, r14, r15, rbp
    mov         cw_ctx, [rdi]
    mov         cw_arr, rsi
    imul        cw_arr, cw_arr, CBP_ARRAY
    add         cw_arr, [rdi + 8]
    mov         rcx, [rdi + 16]                 ; n
    mov         rax, [cw_ctx + tctx.nw]
    mul         rsi
    div         rcx
    mov         cw_k, rax                       ; the first word
    lea         rax, [rsi + 1]
    mul         qword [cw_ctx + tctx.nw]
    div         rcx
    mov         rbp, rax                        ; the end
    mov         cw_w, [cw_ctx + tctx.w]
.word:
    cmp         cw_k, rbp
    jae         .ret
    mov         rax, [cw_ctx + tctx.ws]
    mov         rcx, [rax + cw_k * 8]           ; the word's first position
    mov         rax, [cw_ctx + tctx.wc]
    mov         cw_cnt, [rax + cw_k * 8]
    inc         cw_k
    LDT         eax, [cw_w + rcx * TW]          ; left
.pair:
    LDT         edx, [cw_w + rcx * TW + TW]     ; right
    cmp         edx, SEP
    je          .word
    shl         eax, 8
    or          eax, edx
    add         [cw_arr + rax * 8], cw_cnt
    mov         eax, edx
    inc         rcx
    jmp         .pair
.ret:
    RESTORE
%undef  cw_ctx
%undef  cw_k
%undef  cw_arr
%undef  cw_cnt
%undef  cw_w

;=============================================================================
; naive_loop: rdi = ctx (one thread).  For every merge: recount every pair
; from scratch, take the best (highest count, then smallest pair), rewrite.
;=============================================================================
%define nv_ctx    rbx   ; the context (the delta map around dm_clear)
%define nv_best   r12   ; best count so far
%define nv_best_d r12d  ; (32-bit view)
%define nv_pair   r13   ; its P
%define nv_slot   r8    ; pair-table slot being read
%define nv_end    r9    ; end of the slots
PROC naive_loop
    SAVE        rbx, r12, r13, r14, r15
    mov         nv_ctx, rdi
.merge:
    mov         nv_slot, [nv_ctx + tctx.stats]
    mov         rax, [nv_slot + ST_MERGES * 8]
    cmp         rax, [nv_ctx + tctx.nmerges]
    jae         .ret
    mov         rdi, [nv_ctx + tctx.pt]         ; clear the table
    mov         rsi, [nv_ctx + tctx.ptmask]
    inc         rsi
    call        pt_fill_empty
    mov         qword [nv_ctx + tctx.ptused], 0
    mov         rdi, nv_ctx
    call        count_all_pairs
    cmp         qword [nv_ctx + tctx.status], 0
    jne         .ret
    mov         nv_slot, [nv_ctx + tctx.pt]     ; best slot
    mov         nv_end, [nv_ctx + tctx.ptmask]
    inc         nv_end
    shl         nv_end, 4
    add         nv_end, nv_slot
    xor         nv_best_d, nv_best_d            ; best count
    mov         nv_pair, EMPTY_KEY              ; best pair
.slot:
    cmp         nv_slot, nv_end
    jae         .chosen
    mov         rax, [nv_slot + pslot.key]
    cmp         rax, EMPTY_KEY
    je          .next_slot
    mov         rcx, [nv_slot + pslot.val]
    JBETTER     rcx, nv_best, rax, nv_pair, .better
    jmp         .next_slot
.better:
    mov         nv_best, rcx
    mov         nv_pair, rax
.next_slot:
    add         nv_slot, pslot_size
    jmp         .slot
.chosen:
    test        nv_best, nv_best
    jz          .ret
    cmp         nv_best, [nv_ctx + tctx.mincount]
    jb          .ret
    mov         rdi, nv_ctx
    mov         rsi, nv_best
    mov         rdx, nv_pair
    call        record_merge
    mov         rdi, nv_ctx
    mov         rsi, [nv_ctx + tctx.dm]
    xor         edx, edx
    mov         rcx, [nv_ctx + tctx.nw]
    call        scan_segment
    push        rbx
    mov         rbx, [rbx + tctx.dm]            ; deltas unused here
    call        dm_clear
    mov         rax, [rbx + dmap.status]
    mov         qword [rbx + dmap.repl], 0
    pop         rbx
    test        rax, rax
    jz          .merge
    mov         [nv_ctx + tctx.status], rax
.ret:
    RESTORE
ENDPROC
%undef  nv_ctx
%undef  nv_best
%undef  nv_best_d
%undef  nv_pair
%undef  nv_slot
%undef  nv_end

;=============================================================================
; verify: rdi = ctx.  Recounts every pair into a fresh table and compares it
; with the kept one both ways; the first disagreement goes to the stats.
;=============================================================================
%define vf_ctx   rbx   ; the context
%define vf_kept  r12   ; the kept table's slots
%define vf_kmask r13   ; its mask
%define vf_kused r14   ; its slots in use
%define vf_cur   r15   ; slot being compared
PROC verify
    SAVE        rbx, r12, r13, r14, r15
    mov         vf_ctx, rdi
    mov         vf_kept, [vf_ctx + tctx.pt]     ; kept table
    mov         vf_kmask, [vf_ctx + tctx.ptmask]
    mov         vf_kused, [vf_ctx + tctx.ptused]
    mov         rdi, vf_ctx
    lea         rsi, [vf_kmask + 1]
    call        pt_alloc
    test        eax, eax
    jnz         .enomem
    mov         rdi, vf_ctx
    call        count_all_pairs                 ; into the fresh table
    ; kept -> fresh
    mov         vf_cur, vf_kept
.kept:
    mov         rax, vf_kmask
    inc         rax
    shl         rax, 4
    add         rax, vf_kept
    cmp         vf_cur, rax
    jae         .fresh
    mov         rsi, [vf_cur + pslot.key]
    cmp         rsi, EMPTY_KEY
    je          .kept_next
    mov         rdi, vf_ctx
    call        pt_get
    cmp         rax, [vf_cur + pslot.val]
    je          .kept_next
    mov         rdx, [vf_cur + pslot.val]
    call        .report                         ; rsi = P, rdx = kept, rax = true
.kept_next:
    add         vf_cur, pslot_size
    jmp         .kept
.fresh:                                         ; fresh -> kept (swap tables)
    mov         vf_cur, [vf_ctx + tctx.pt]
    push        qword [vf_ctx + tctx.ptmask]
    push        vf_cur
    mov         [vf_ctx + tctx.pt], vf_kept
    mov         [vf_ctx + tctx.ptmask], vf_kmask
.fresh_slot:
    mov         rax, [rsp + 8]
    inc         rax
    shl         rax, 4
    add         rax, [rsp]
    cmp         vf_cur, rax
    jae         .compared
    mov         rsi, [vf_cur + pslot.key]
    cmp         rsi, EMPTY_KEY
    je          .fresh_next
    mov         rdi, vf_ctx
    call        pt_get                          ; kept count
    cmp         rax, [vf_cur + pslot.val]
    je          .fresh_next
    mov         rdx, rax
    mov         rax, [vf_cur + pslot.val]
    call        .report
.fresh_next:
    add         vf_cur, pslot_size
    jmp         .fresh_slot
.compared:
    pop         rdi                             ; free the fresh table
    pop         rsi
    inc         rsi
    shl         rsi, 4
    call        asmbpe_unmap
    mov         [vf_ctx + tctx.ptused], vf_kused
    jmp         .ret
.enomem:
    mov         [vf_ctx + tctx.pt], vf_kept
    mov         [vf_ctx + tctx.ptmask], vf_kmask
    mov         qword [vf_ctx + tctx.status], ASMBPE_ENOMEM
.ret:
    RESTORE
.report:                                        ; first disagreement only
    mov         r8, [vf_ctx + tctx.stats]
    cmp         qword [r8 + ST_VERIFY_PAIR * 8], -1
    jne         .reported
    mov         rcx, rsi
    shr         rcx, 32
    shl         rsi, 32
    or          rcx, rsi                        ; left | right << 32
    mov         [r8 + ST_VERIFY_PAIR * 8], rcx
    mov         [r8 + ST_VERIFY_KEPT * 8], rdx
    mov         [r8 + ST_VERIFY_TRUE * 8], rax
.reported:
    ret
ENDPROC
%undef  vf_ctx
%undef  vf_kept
%undef  vf_kmask
%undef  vf_kused
%undef  vf_cur
