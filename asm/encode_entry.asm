;-----------------------------------------------------------------------------
; encode_entry.asm — the entry points: asmbpe_encode, asmbpe_encode_docs and
; asmbpe_encode_impl, which both jump to.
;
; asmbpe_encode_impl checks the call, builds the job on its stack, gets each
; thread a state (ts_take, encode_pool.asm, or a new one) and a cache, the
; whole-token table once (build_seed, encode_table.asm), runs enc_worker
; (encode_worker.asm) on the threads (asmbpe_parallel) and moves the other
; threads' ids into document order.
;-----------------------------------------------------------------------------
%include "asmbpe.inc"
%include "sys.inc"
%include "encode.inc"

extern ts_take
extern build_seed
extern enc_worker

section .text

;-----------------------------------------------------------------------------
; int64_t asmbpe_encode(asmbpe_enc *e, const uint8_t *text,
;                       const uint64_t *doc_ends, uint64_t n_docs,
;                       uint64_t threads, uint64_t flags,
;                       uint16_t *out, uint64_t *counts, uint16_t *front)
;
; Encodes documents text[doc_ends[i-1], doc_ends[i]) (the first from 0) on
; `threads` threads.  flags: ASMBPE_ENC_BOS puts <|bos|> (id 256 + n_merges)
; before each document; ASMBPE_ENC_NOCACHE bypasses the chunk cache; bits
; 24-31 name the pre-tokenizer (ASMBPE_ENC_PRETOK(id); 0: seed).  out
; must hold doc_ends[n_docs - 1] + n_docs ids; on return it holds every
; document's ids in order, counts[i] of them for document i.  With
; ASMBPE_ENC_CLAIMS (see asmbpe.h) the ids stay where the threads wrote
; them, thread 0's from front (NULL: out); front is not read without it.
; Returns the ids written, or ASMBPE_EINVAL (threads, an unknown pre-tokenizer)
; / ASMBPE_ENOMEM / ASMBPE_ETHREAD.
; Not for two calls at once on one encoder (the threads' caches are shared).
;-----------------------------------------------------------------------------
struc en_frame                                  ; asmbpe_encode_impl's frame
    .job:       resb job_size                   ; the job (at rsp: its pointer)
%if (job_size + 7 * 8) % 16                     ; (calls aligned: 6 pushes and
                resq 1                          ; the return address above)
%endif
endstruc
%if en_frame.job != 0
    %error "en_frame: the job must be at rsp"
%endif

FUNC asmbpe_encode, 6, 6, 0, e, text, ends, ndocs, threads, flags
    mov         eax, EF_PUBLIC                  ; (zero-extended: over imm32)
    and         flagsq, rax
    jmp         asmbpe_encode_impl              ; (nothing pushed: the stack
ENDFUNC                                         ; arguments are where they were)

; asmbpe_encode_impl: asmbpe_encode and asmbpe_encode_docs (flags checked,
; EF_DOCPTRS set by the latter)
HIDDEN
%define en_enc       r13   ; the encoder
%define en_nth       r15   ; threads
%define en_t         r12   ; a thread index (getting the states)
%define en_td        r12d  ; (en_t, 32-bit)
%define en_ts        rbx   ; its state
%define en_t0        r14   ; rdtsc before the move (EF_PROFILE)
%define en_out       r8    ; out (the move: rdi to, rsi from, rcx bytes)
%define en_ends      r9    ; doc_ends
%define en_counts    r10   ; counts
%define en_d         rdx   ; a document (the move, the sum)
%define en_dd        edx   ; (en_d, 32-bit)
%define en_start     r11   ; start(d): its text's first byte
%define en_startd    r11d  ; (en_start, 32-bit)
%define en_written   rbx   ; (after the move) ids written
FUNC asmbpe_encode_impl, 9, 15, 0, e, text, ends, ndocs, threads, flags, out, counts, front
    STACK_ALLOC en_frame_size
    mov         rax, ASMBPE_EINVAL
    test        threadsq, threadsq
    jz          .ret
    cmp         threadsq, MAX_THREADS
    ja          .ret
    mov         r11, flagsq                     ; the pre-tokenizer (bits
    shr         r11, EF_PRETOK_SHIFT            ; 24-31; 0: seed, as before
    and         r11d, 0xFF                      ; the field existed)
    jnz         .pretok_given
    mov         r11d, PRETOK_SEED
.pretok_given:
    cmp         r11d, PRETOK_MAX
    ja          .ret
    mov         [rsp + en_frame.job + job.pretok], r11
    xor         eax, eax
    test        ndocsq, ndocsq
    jz          .ret
    mov         [rsp + en_frame.job + job.enc], eq
    mov         [rsp + en_frame.job + job.buf], textq
    mov         [rsp + en_frame.job + job.ends], endsq
    mov         [rsp + en_frame.job + job.ndocs], ndocsq
    mov         [rsp + en_frame.job + job.flags], flagsq
    mov         rax, outm
    mov         [rsp + en_frame.job + job.out], rax
    mov         rax, countsm
    mov         [rsp + en_frame.job + job.counts], rax
    mov         rax, [rsp + en_frame.job + job.out] ; thread 0's ids: from front
    test        qword [rsp + en_frame.job + job.flags], EF_CLAIMS ; when given (EF_CLAIMS),
    jz          .front_is_out                   ; else from out[0]
    mov         rcx, frontm
    test        rcx, rcx
    cmovnz      rax, rcx
.front_is_out:
    mov         [rsp + en_frame.job + job.front], rax
    mov         qword [rsp + en_frame.job + job.next], 0
    mov         qword [rsp + en_frame.job + job.back], 0
    mov         qword [rsp + en_frame.job + job.status], 0
    mov         [rsp + en_frame.job + job.nth], threadsq
    mov         en_nth, threadsq
    mov         en_enc, eq
    xor         en_td, en_td                    ; each thread's state
.states:
    cmp         en_t, en_nth
    jae         .states_done
    mov         en_ts, [en_enc + enc.ts + en_t * 8]
    test        en_ts, en_ts
    jnz         .have_state
    call        ts_take                         ; one an old encoder used,
    test        rax, rax                        ; else a new one
    jnz         .taken
    mov         edi, (tstate_size + 4095) & ~4095
    call        asmbpe_map
    test        rax, rax
    jz          .enomem
.taken:
    mov         en_ts, rax
    mov         [en_enc + enc.ts + en_t * 8], en_ts
.have_state:
    test        qword [rsp + en_frame.job + job.flags], EF_NOCACHE
    jnz         .next_state
    cmp         qword [en_ts + tstate.cache], 0
    jne         .next_state
    mov         edi, CACHE_ENTRIES * centry_size
    call        asmbpe_map
    test        rax, rax
    jz          .enomem
    mov         [en_ts + tstate.cache], rax
.next_state:
    inc         en_t
    jmp         .states
.states_done:
    test        qword [rsp + en_frame.job + job.flags], EF_NOCACHE
    jnz         .seeded
    cmp         qword [en_enc + enc.seed], 0
    jne         .seeded
    mov         rdi, en_enc
    call        build_seed
    test        rax, rax
    jnz         .ret
.seeded:
    lea         rdi, [enc_worker]
    mov         rsi, rsp                        ; the job (en_frame.job)
    mov         rdx, en_nth
    call        asmbpe_parallel
    movsxd      rax, eax
    test        rax, rax
    jnz         .ret
    mov         rax, [rsp + en_frame.job + job.status]
    test        rax, rax
    jnz         .ret
    test        qword [rsp + en_frame.job + job.flags], EF_CLAIMS
    jnz         .claims
    ; documents into order: each claim's ids move from out[start(d0) + d0]
    ; (d0: its first document, bit 63 of its count) down to the end of those
    ; before it (never up: a forward copy is safe)
    rdtsc
    shl         rdx, 32
    or          rax, rdx
    mov         en_t0, rax                      ; (for EF_PROFILE)
    mov         en_out, [rsp + en_frame.job + job.out]
    mov         rdi, en_out                     ; destination
    mov         en_ends, [rsp + en_frame.job + job.ends]
    mov         en_counts, [rsp + en_frame.job + job.counts]
    xor         en_dd, en_dd                    ; d
    xor         en_startd, en_startd            ; start(d)
    mov         rsi, en_out                     ; thread 0's: in place
.move:
    cmp         en_d, [rsp + en_frame.job + job.ndocs]
    jae         .moved
    mov         rcx, [en_counts + en_d * 8]
    btr         rcx, 63
    jnc         .same_claim                     ; rsi: after the last document
    mov         [en_counts + en_d * 8], rcx
    lea         rsi, [en_start + en_d]          ; a claim's first: its room
    lea         rsi, [en_out + rsi * 2]
.same_claim:
    add         rcx, rcx                        ; bytes
    cmp         rsi, rdi
    je          .in_place
    rep movsb                                   ; (fast strings: ERMSB)
    jmp         .next_doc
.in_place:
    add         rdi, rcx
    add         rsi, rcx
.next_doc:
    mov         en_start, [en_ends + en_d * 8]
    inc         en_d
    jmp         .move
.moved:
    mov         en_written, rdi
    sub         en_written, en_out
    shr         en_written, 1                   ; ids written
    test        qword [rsp + en_frame.job + job.flags], EF_PROFILE
    jz          .result
    rdtsc
    shl         rdx, 32
    or          rax, rdx
    sub         rax, en_t0
    mov         rcx, [en_enc + enc.ts]
    add         [rcx + tstate.cyc_write], rax
.result:
    mov         rax, en_written
    jmp         .ret
.claims:                                        ; EF_CLAIMS: no move; the ids
    mov         en_counts, [rsp + en_frame.job + job.counts] ; written, the marks kept
    xor         eax, eax
    xor         en_dd, en_dd
    mov         rcx, 0x7FFFFFFFFFFFFFFF
.sum:
    mov         r8, [en_counts + en_d * 8]
    and         r8, rcx
    add         rax, r8
    inc         en_d
    cmp         en_d, [rsp + en_frame.job + job.ndocs]
    jb          .sum
    jmp         .ret
.enomem:
    mov         rax, ASMBPE_ENOMEM
.ret:
    STACK_FREE  en_frame_size
    RET
ENDFUNC
%undef en_enc
%undef en_nth
%undef en_t
%undef en_td
%undef en_ts
%undef en_t0
%undef en_out
%undef en_ends
%undef en_counts
%undef en_d
%undef en_dd
%undef en_start
%undef en_startd
%undef en_written

;-----------------------------------------------------------------------------
; int64_t asmbpe_encode_docs(asmbpe_enc *e, const uint8_t *const *docs,
;                            const uint64_t *doc_ends, uint64_t n_docs,
;                            uint64_t threads, uint64_t flags,
;                            uint16_t *out, uint64_t *counts,
;                            uint16_t *front)
;
; asmbpe_encode on documents that lie anywhere: document i is docs[i][0,
; doc_ends[i] - doc_ends[i-1]), read exactly (no padding needed).  Each
; thread copies the document it encodes into its own padded buffer (kept
; across calls), so the documents are never packed into one text.
;-----------------------------------------------------------------------------
FUNC asmbpe_encode_docs, 6, 6, 0, e, docs, ends, ndocs, threads, flags
    mov         eax, EF_PUBLIC                  ; (zero-extended: over imm32)
    and         flagsq, rax
    or          flagsq, EF_DOCPTRS
    jmp         asmbpe_encode_impl
ENDFUNC
