;-----------------------------------------------------------------------------
; encode_rank_jobs.asm — documents on threads: asmbpe_renc_encode (one padded
; text), asmbpe_renc_encode_docs (documents where they lie), rk_encode_job,
; rk_job_doc, rk_worker; each document through rk_doc (encode_rank_doc.asm)
; (the rank encoder: its layouts and macros in encode_rank.inc)
;-----------------------------------------------------------------------------
%include "encode_rank.inc"

extern rk_state
extern rk_doc

; JOB_FILL (asmbpe_renc_encode / _docs): the rest of the job on the stack
; from the FUNC's named arguments.
%macro JOB_FILL 0
    mov         [rsp + rjob.enc], eq
    mov         [rsp + rjob.ends], endsq
    mov         [rsp + rjob.ndocs], ndocsq
    mov         [rsp + rjob.pretok], pretokq
    mov         rax, outm
    mov         [rsp + rjob.out], rax
    mov         rax, countsm
    mov         [rsp + rjob.counts], rax
    mov         qword [rsp + rjob.next], 0
    mov         qword [rsp + rjob.status], 0
%endmacro

section .text

;-----------------------------------------------------------------------------
; int64_t asmbpe_renc_encode(asmbpe_renc *e, const uint8_t *text,
;                            const uint64_t *doc_ends, uint64_t n_docs,
;                            uint64_t threads, uint64_t pretok,
;                            uint32_t *out, uint64_t *counts)
; Documents text[doc_ends[i-1], doc_ends[i]) (the first from 0; text padded)
; on `threads` threads, each claiming the next document; document i's ids
; are written from out[doc_ends[i-1]] (its own room: ids never outnumber
; bytes), counts[i] = their number; then thread 0 moves them down into one
; run, in document order, from out[0] (one thread writes them there at
; once).  out: room for doc_ends[n-1] ids.  Returns the ids in all, or
; ASMBPE_EINVAL (threads 0 or > MAX_THREADS, unknown pretok),
; ASMBPE_ENOMEM, ASMBPE_ETHREAD.
;-----------------------------------------------------------------------------
FUNC asmbpe_renc_encode, 8, 15, 1, e, text, ends, ndocs, threads, pretok, out, counts
    STACK_ALLOC rjob_size + 8
    mov         [rsp + rjob.text], textq
    mov         qword [rsp + rjob.docs], 0
    JOB_FILL
    mov         rdi, rsp
    mov         rsi, threadsq
    call        rk_encode_job
    STACK_FREE  rjob_size + 8
    RET
ENDFUNC

;-----------------------------------------------------------------------------
; int64_t asmbpe_renc_encode_docs(asmbpe_renc *e, const uint8_t *const *docs,
;                                 const uint64_t *doc_ends, uint64_t n_docs,
;                                 uint64_t threads, uint64_t pretok,
;                                 uint32_t *out, uint64_t *counts)
; asmbpe_renc_encode of documents where they lie: document i is docs[i],
; doc_ends[i] - doc_ends[i-1] bytes (no padding needed), copied by the
; thread that encodes it into a padded buffer of its own (kept with the
; encoder), so the caller never joins them into one text.  Same rooms,
; counts and result.
;-----------------------------------------------------------------------------
FUNC asmbpe_renc_encode_docs, 8, 15, 1, e, docs, ends, ndocs, threads, pretok, out, counts
    STACK_ALLOC rjob_size + 8
    mov         qword [rsp + rjob.text], 0
    mov         [rsp + rjob.docs], docsq
    JOB_FILL
    mov         rdi, rsp
    mov         rsi, threadsq
    call        rk_encode_job
    STACK_FREE  rjob_size + 8
    RET
ENDFUNC

;-----------------------------------------------------------------------------
; rk_encode_job: rdi = a job (rjob: text or docs, the rest filled), rsi =
; threads.  Out: rax as asmbpe_renc_encode.  Keeps rbx, rbp, r12-r15.
;-----------------------------------------------------------------------------
PROC rk_encode_job
    push        rbx
    push        rbp
    push        r12
    push        r13
    push        r14
    push        r15
    mov         rbp, rdi                        ; the job
    mov         rax, ASMBPE_EINVAL
    mov         rdx, [rbp + rjob.pretok]
    cmp         rdx, PRETOK_MIN
    jb          .ret
    cmp         rdx, PRETOK_MAX
    ja          .ret
    test        rsi, rsi
    jz          .ret
    cmp         rsi, MAX_THREADS
    ja          .ret
    cmp         rsi, [rbp + rjob.ndocs]         ; no more threads than
    cmova       rsi, [rbp + rjob.ndocs]         ; documents
    xor         eax, eax
    test        rsi, rsi
    jz          .ret
    mov         r12, rsi
    xor         r13d, r13d                      ; each thread's state, made
.states:                                        ; here (mapping is not
    mov         rdi, [rbp + rjob.enc]           ; thread-safe to share)
    mov         rsi, r13
    call        rk_state
    test        rax, rax
    jz          .nomem
    inc         r13
    cmp         r13, r12
    jb          .states
    cmp         r12, 1
    je          .one_thread
    lea         rdi, [rk_worker]
    mov         rsi, rbp
    mov         rdx, r12
    call        asmbpe_parallel
    test        rax, rax
    jnz         .ret
    mov         rax, [rbp + rjob.status]
    test        rax, rax
    jnz         .ret
    mov         r12, [rbp + rjob.ends]          ; into document order: each
    mov         r13, [rbp + rjob.counts]        ; document's ids moved down
    xor         r14d, r14d                      ; document
    xor         r15d, r15d                      ; ids so far
    xor         edx, edx                        ; its start
.gather:
    cmp         r14, [rbp + rjob.ndocs]
    jae         .gathered
    mov         rcx, [r13 + r14 * 8]            ; its ids
    mov         rax, [rbp + rjob.out]
    lea         rsi, [rax + rdx * 4]
    lea         rdi, [rax + r15 * 4]
    add         r15, rcx
    rep movsd                                   ; (forward: rdi <= rsi)
    mov         rdx, [r12 + r14 * 8]
    inc         r14
    jmp         .gather
.gathered:
    mov         rax, r15
.ret:
    pop         r15
    pop         r14
    pop         r13
    pop         r12
    pop         rbp
    pop         rbx
    ret
.one_thread:                                    ; one thread: the documents
    xor         r13d, r13d                      ; in order, each one's ids
    xor         r14d, r14d                      ; right after the last one's
    xor         r15d, r15d                      ; (its room: ids never
    mov         rbx, [rbp + rjob.enc]           ; outnumber bytes), nothing
    mov         rbx, [rbx + renc.ts]            ; to gather
.one_doc:
    cmp         r13, [rbp + rjob.ndocs]
    jae         .one_done
    mov         rdi, rbp
    mov         rsi, r13
    mov         rdx, r15                        ; its start
    mov         rcx, [rbp + rjob.ends]
    mov         rcx, [rcx + r13 * 8]
    sub         rcx, r15                        ; its length
    mov         r8, [rbp + rjob.out]
    lea         r8, [r8 + r14 * 4]              ; its room
    call        rk_job_doc
    test        rax, rax
    js          .ret
    mov         rcx, [rbp + rjob.counts]
    mov         [rcx + r13 * 8], rax
    add         r14, rax
    mov         rcx, [rbp + rjob.ends]
    mov         r15, [rcx + r13 * 8]
    inc         r13
    jmp         .one_doc
.one_done:
    mov         rax, r14
    jmp         .ret
.nomem:
    mov         rax, ASMBPE_ENOMEM
    jmp         .ret
ENDPROC

;-----------------------------------------------------------------------------
; rk_job_doc: rbx = a thread state, rdi = the job, rsi = a document's index,
; rdx = its start (as if joined), rcx = its length, r8 = its room.  The
; document's text: job.text + start, or docs[d] copied into the thread's
; buffer rts.dbuf (PAD around it; grown as needed).  Out: rax = its ids, or
; a negative status.  Keeps rbx, rbp, r12-r15.
;-----------------------------------------------------------------------------
PROC rk_job_doc
    push        r12
    push        r13
    push        r14
    push        r15
    mov         r12, rdi
    mov         r13, rcx                        ; the length
    mov         r14, r8                         ; the room
    mov         rax, [r12 + rjob.docs]
    test        rax, rax
    jnz         .copy
    mov         rdi, [r12 + rjob.text]
    add         rdi, rdx
    jmp         .encode
.copy:
    mov         r15, [rax + rsi * 8]            ; the document
    lea         rax, [r13 + 2 * PAD + 64]
    cmp         rax, [rbx + rts.dbcap]
    jbe         .room
    mov         rdi, [rbx + rts.dbuf]           ; grown (to a multiple of
    mov         rsi, [rbx + rts.dbcap]          ; 1 MB)
    call        asmbpe_unmap
    mov         qword [rbx + rts.dbuf], 0
    mov         qword [rbx + rts.dbcap], 0
    lea         rdi, [r13 + 2 * PAD + 64 + (1 << 20) - 1]
    and         rdi, -(1 << 20)
    push        rdi
    call        asmbpe_map
    pop         rdi
    test        rax, rax
    jz          .nomem
    mov         [rbx + rts.dbuf], rax
    mov         [rbx + rts.dbcap], rdi
.room:
    mov         rdi, [rbx + rts.dbuf]
    add         rdi, PAD
    push        rdi
    mov         rsi, r15
    mov         rcx, r13
    rep movsb
    pop         rdi
.encode:
    mov         rsi, r13
    mov         rdx, [r12 + rjob.pretok]
    mov         rcx, r14
    call        rk_doc
.ret:
    pop         r15
    pop         r14
    pop         r13
    pop         r12
    ret
.nomem:
    mov         rax, ASMBPE_ENOMEM
    jmp         .ret
ENDPROC

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
    mov         rcx, [rcx + r13 * 8]
    sub         rcx, rdx                        ; its length
    mov         r8, [r12 + rjob.out]
    lea         r8, [r8 + rdx * 4]              ; its room
    mov         rdi, r12
    mov         rsi, r13
    call        rk_job_doc
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
