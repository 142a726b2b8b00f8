;-----------------------------------------------------------------------------
; encode_rank_doc.asm — documents: rk_doc (split, prefetch, each chunk),
; asmbpe_renc_text, asmbpe_renc_encode and its threads (rk_worker)
; (the rank encoder: its layouts and macros in encode_rank.inc)
;-----------------------------------------------------------------------------
%include "encode_rank.inc"

extern asmbpe_split_offsets
extern mask_tab
extern rk_state
extern rk_chunk

section .text

;-----------------------------------------------------------------------------
; int64_t asmbpe_renc_text(asmbpe_renc *e, const uint8_t *text, size_t len,
;                          uint64_t pretok, uint32_t *out, size_t cap)
; The ids of a padded text (PAD readable around it): split by pre-tokenizer
; pretok, each chunk encoded, with thread state 0.  cap >= len (ids never
; outnumber bytes).  Returns the ids written, or ASMBPE_EINVAL (cap < len,
; unknown pretok), ASMBPE_ENOMEM.
;-----------------------------------------------------------------------------
FUNC asmbpe_renc_text, 6, 15, 1, e, text, len, pretok, out, cap
    mov         rax, ASMBPE_EINVAL
    cmp         capq, lenq
    jb          .ret
    cmp         pretokq, PRETOK_MIN
    jb          .ret
    cmp         pretokq, PRETOK_MAX
    ja          .ret
    push        textq
    push        lenq
    push        pretokq
    push        outq
    xor         esi, esi
    call        rk_state
    test        rax, rax
    jz          .nomem
    mov         rbx, rax
    mov         rdi, [rsp + 24]
    mov         rsi, [rsp + 16]
    mov         rdx, [rsp + 8]
    mov         rcx, [rsp]
    call        rk_doc
    add         rsp, 32
.ret:
    RET
.nomem:
    add         rsp, 32
    mov         rax, ASMBPE_ENOMEM
    RET
ENDFUNC

;-----------------------------------------------------------------------------
; rk_doc: rbx = a thread state, rdi = a padded text, rsi = its length, rdx =
; the pre-tokenizer (valid), rcx = out (room for rsi ids).  Out: rax = the
; ids written, or a negative status.  Keeps rbx, rbp, r12-r15; clobbers
; the other registers and ymm0-ymm3.
;-----------------------------------------------------------------------------
rk_doc:
    lea         rax, [rcx + rsi * 4]
    mov         [rbx + rts.outlim], rax         ; the room's end
    push        rbp
    push        r12
    push        r13
    push        r14
    push        r15
    push        rdi                             ; [rsp + 24]: text
    push        rsi                             ; [rsp + 16]: len
    push        rdx                             ; [rsp + 8]: pretok
    push        rcx                             ; [rsp]: out
    xor         r12d, r12d                      ; pos
    xor         r13d, r13d                      ; ids written
.split:
    cmp         r12, [rsp + 16]
    jae         .done
    mov         rdi, [rsp + 24]
    mov         rsi, [rsp + 16]
    mov         rdx, r12
    lea         rcx, [rbx + rts.ends]
    mov         r8d, RK_SPLITS
    mov         r9, [rsp + 8]
    call        asmbpe_split_offsets
    test        rax, rax
    js          .out
    jz          .done
    mov         r14, rax                        ; ends got
    xor         r15d, r15d
.batch:                                         ; the next RK_BATCH chunks:
    lea         rax, [r15 + RK_BATCH]           ; their whole-token slots (or
    cmp         rax, r14                        ; cache sets) prefetched, then
    cmova       rax, r14                        ; each looked up
    mov         [rbx + rts.bend], rax
    mov         rdi, [rbx + rts.enc]
    mov         r8, r12                         ; a chunk's start
    mov         r9, r15
.pf:
    cmp         r9, [rbx + rts.bend]
    jae         .chunk
    mov         r10, [rbx + rts.ends + r9 * 8]
    mov         rdx, r10
    sub         rdx, r8                         ; its length
    mov         rsi, [rsp + 24]
    add         rsi, r8                         ; the chunk
    mov         r8, r10
    inc         r9
    cmp         rdx, 1
    jbe         .pf
    cmp         rdx, WT_MAX_LEN
    ja          .pf_cache
    cmp         qword [rdi + renc.wt], 0
    je          .pf_cache
    lea         rax, [mask_tab + 64]
    sub         rax, rdx
    vmovdqu     xmm1, [rax]
    vpand       xmm0, xmm1, [rsi]
    vpinsrb     xmm0, xmm0, edx, WT_LENB
    WT_HASH     xmm0, rcx
    and         rcx, [rdi + renc.wtmask]
    shl         rcx, WT_SHIFT
    add         rcx, [rdi + renc.wt]
    prefetcht0  [rcx]
    CACHE_SET   rsi, rdx
    prefetcht0  [rcx]
    jmp         .pf
.pf_cache:
    cmp         rdx, RC_MAX_LEN
    ja          .pf
    CACHE_SET   rsi, rdx
    prefetcht0  [rcx]
    prefetcht0  [rcx + 64]
    jmp         .pf
.chunk:
    mov         rsi, [rsp + 24]
    add         rsi, r12                        ; the chunk
    mov         r8, [rbx + rts.ends + r15 * 8]  ; its end
    mov         rdx, r8
    sub         rdx, r12                        ; its length
    mov         rcx, [rsp]
    lea         rcx, [rcx + r13 * 4]            ; its ids go here
    mov         rdi, [rbx + rts.enc]
    cmp         rdx, 1
    je          .one
    cmp         rdx, WT_MAX_LEN
    ja          .slow
    cmp         qword [rdi + renc.wt], 0
    je          .slow
    WT_LOOKUP   .wt_hit                         ; a whole token?
    jmp         .slow
.wt_hit:
    mov         [rcx], eax
    jmp         .one_id
.one:
    movzx       eax, byte [rsi]
    mov         eax, [rdi + renc.byteid + rax * 4]
    mov         [rcx], eax
.one_id:
    mov         r12, r8
    inc         r13
    jmp         .next
.slow:
    push        r8
    call        rk_chunk
    pop         r12                             ; pos = its end
    test        rax, rax
    js          .out
    add         r13, rax
.next:
    inc         r15
    cmp         r15, [rbx + rts.bend]
    jb          .chunk
    cmp         r15, r14
    jb          .batch
    jmp         .split
.done:
    mov         rax, r13
.out:
    add         rsp, 32
    pop         r15
    pop         r14
    pop         r13
    pop         r12
    pop         rbp
    ret

;-----------------------------------------------------------------------------
; int64_t asmbpe_renc_encode(asmbpe_renc *e, const uint8_t *text,
;                            const uint64_t *doc_ends, uint64_t n_docs,
;                            uint64_t threads, uint64_t pretok,
;                            uint32_t *out, uint64_t *counts)
; Documents text[doc_ends[i-1], doc_ends[i]) (the first from 0; text padded)
; on `threads` threads, each claiming the next document; document i's ids
; are written from out[doc_ends[i-1]] (its own room: ids never outnumber
; bytes), counts[i] = their number; then thread 0 moves them down into one
; run, in document order, from out[0].  out: room for doc_ends[n-1] ids.
; Returns the ids in all, or ASMBPE_EINVAL (threads 0 or > MAX_THREADS,
; unknown pretok), ASMBPE_ENOMEM, ASMBPE_ETHREAD.
;-----------------------------------------------------------------------------
FUNC asmbpe_renc_encode, 8, 15, 1, e, text, ends, ndocs, threads, pretok, out, counts
    STACK_ALLOC rjob_size + 8
    mov         [rsp + rjob.enc], eq
    mov         [rsp + rjob.text], textq
    mov         [rsp + rjob.ends], endsq
    mov         [rsp + rjob.ndocs], ndocsq
    mov         [rsp + rjob.pretok], pretokq
    mov         rax, outm
    mov         [rsp + rjob.out], rax
    mov         rax, countsm
    mov         [rsp + rjob.counts], rax
    mov         qword [rsp + rjob.next], 0
    mov         qword [rsp + rjob.status], 0
    mov         rax, ASMBPE_EINVAL
    cmp         pretokq, PRETOK_MIN
    jb          .ret
    cmp         pretokq, PRETOK_MAX
    ja          .ret
    test        threadsq, threadsq
    jz          .ret
    cmp         threadsq, MAX_THREADS
    ja          .ret
    cmp         threadsq, ndocsq                ; no more threads than
    cmova       threadsq, ndocsq                ; documents
    xor         eax, eax
    test        threadsq, threadsq
    jz          .ret
    mov         r12, threadsq
    xor         r13d, r13d                      ; each thread's state, made
.states:                                        ; here (mapping is not
    mov         rdi, [rsp + rjob.enc]           ; thread-safe to share)
    mov         rsi, r13
    call        rk_state
    test        rax, rax
    jz          .nomem
    inc         r13
    cmp         r13, r12
    jb          .states
    lea         rdi, [rk_worker]
    mov         rsi, rsp
    mov         rdx, r12
    call        asmbpe_parallel
    test        rax, rax
    jnz         .ret
    mov         rax, [rsp + rjob.status]
    test        rax, rax
    jnz         .ret
    mov         rsi, [rsp + rjob.ends]          ; into document order
    mov         rdi, [rsp + rjob.out]
    mov         r8, [rsp + rjob.counts]
    xor         ecx, ecx                        ; document
    xor         edx, edx                        ; ids so far
    xor         r9d, r9d                        ; its start
.gather:
    cmp         rcx, [rsp + rjob.ndocs]
    jae         .gathered
    mov         r10, [r8 + rcx * 8]             ; its ids
    xor         r11d, r11d
.move:
    cmp         r11, r10
    jae         .moved
    lea         rax, [r9 + r11]
    mov         eax, [rdi + rax * 4]
    lea         rbx, [rdx + r11]
    mov         [rdi + rbx * 4], eax
    inc         r11
    jmp         .move
.moved:
    add         rdx, r10
    mov         r9, [rsi + rcx * 8]
    inc         rcx
    jmp         .gather
.gathered:
    mov         rax, rdx
.ret:
    STACK_FREE  rjob_size + 8
    RET
.nomem:
    mov         rax, ASMBPE_ENOMEM
    jmp         .ret
ENDFUNC

;-----------------------------------------------------------------------------
; rk_worker(rjob *job, uint64_t tid): claims documents one at a time and
; encodes each into its room.  System V; keeps rbx, rbp, r12-r15.
;-----------------------------------------------------------------------------
rk_worker:
    push        rbx
    push        r12
    push        r13
    mov         r12, rdi                        ; the job
    mov         rdi, [r12 + rjob.enc]
    mov         rbx, [rdi + renc.ts + rsi * 8]  ; this thread's state
.claim:
    mov         eax, 1
    lock xadd   [r12 + rjob.next], rax
    cmp         rax, [r12 + rjob.ndocs]
    jae         .done
    mov         r13, rax                        ; document d
    mov         rcx, [r12 + rjob.ends]
    xor         edx, edx
    test        r13, r13
    jz          .first
    mov         rdx, [rcx + r13 * 8 - 8]        ; its start
.first:
    mov         rsi, [rcx + r13 * 8]
    sub         rsi, rdx                        ; its length
    mov         rdi, [r12 + rjob.text]
    add         rdi, rdx
    mov         rcx, [r12 + rjob.out]
    lea         rcx, [rcx + rdx * 4]            ; its room
    mov         rdx, [r12 + rjob.pretok]
    call        rk_doc
    test        rax, rax
    js          .failed
    mov         rcx, [r12 + rjob.counts]
    mov         [rcx + r13 * 8], rax
    jmp         .claim
.failed:
    mov         [r12 + rjob.status], rax
    mov         rax, [r12 + rjob.ndocs]         ; the others stop claiming
    mov         [r12 + rjob.next], rax
.done:
    vzeroupper
    pop         r13
    pop         r12
    pop         rbx
    ret
