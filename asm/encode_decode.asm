;-----------------------------------------------------------------------------
; encode_decode.asm — ids back to bytes (asmbpe_decode) and the encoder's counters
; (asmbpe_enc_stats).
;
; asmbpe_decode builds the id -> bytes table on its first call (build_tokens,
; encode_table.asm); asmbpe_enc_stats sums the counters the worker
; (encode_worker.asm) keeps in each thread state.
;-----------------------------------------------------------------------------
%include "asmbpe.inc"
%include "sys.inc"
%include "encode.inc"

extern build_tokens

section .text

;-----------------------------------------------------------------------------
; int64_t asmbpe_decode(asmbpe_enc *e, const uint16_t *ids, uint64_t n,
;                       uint8_t *out, uint64_t cap)
; The bytes of ids[0, n), every id < 256 + n_merges (the caller strips
; MASKBIT and handles the specials): written to out when they fit in cap
; (else nothing past cap is written), and their number returned either way.
; ASMBPE_EINVAL at an id out of range, ASMBPE_ENOMEM when the id -> bytes
; table (built on the first call: each merge's bytes are its parts' bytes)
; cannot be had or would pass TOK_MAX_BYTES.  Reads up to 15 bytes past a
; token's bytes in the table (padded).
;-----------------------------------------------------------------------------
FUNC asmbpe_decode, 5, 15, 1, e, ids, n, out, cap
    mov         rbx, eq
    mov         r12, idsq
    mov         r13, nq
    mov         r14, outq
    mov         r15, capq
    cmp         qword [rbx + enc.tokoff], 0
    jne         .have_table
    call        build_tokens                    ; rbx = e
    test        rax, rax
    jnz         .ret
.have_table:
    mov         r8, [rbx + enc.tokoff]
    mov         r9, [rbx + enc.tokbytes]
    mov         r10, [rbx + enc.nmerges]
    add         r10, 256                        ; ids defined
    xor         ebp, ebp                        ; bytes so far
    xor         r11d, r11d                      ; i
.id:
    cmp         r11, r13
    jae         .done
    movzx       eax, word [r12 + r11 * 2]
    inc         r11
    cmp         rax, r10
    jae         .einval
    mov         rsi, [r8 + rax * 8]
    mov         rcx, [r8 + rax * 8 + 8]
    sub         rcx, rsi                        ; its length
    add         rsi, r9
    lea         rdx, [rbp + rcx]
    cmp         rdx, r15
    ja          .count_only                     ; past cap: count, write nothing
    lea         rdi, [r14 + rbp]
    mov         rbp, rdx
    cmp         rcx, 16
    ja          .long
    lea         rax, [rdi + 16]                 ; a 16-byte store fits in cap?
    sub         rax, r14
    cmp         rax, r15
    ja          .long
    vmovdqu     xmm0, [rsi]
    vmovdqu     [rdi], xmm0
    jmp         .id
.long:
    rep movsb
    jmp         .id
.count_only:
    mov         rbp, rdx
    jmp         .id
.done:
    mov         rax, rbp
    jmp         .ret
.einval:
    mov         rax, ASMBPE_EINVAL
.ret:
    RET
ENDFUNC

;-----------------------------------------------------------------------------
; void asmbpe_enc_stats(const asmbpe_enc *e, uint64_t tid, uint64_t *out)
; The ASMBPE_ES_* counters of thread index tid, or of all threads summed
; (tid >= MAX_THREADS), over every call so far.  cache = passes - merge.
;-----------------------------------------------------------------------------
struc estats                                    ; the counters (ASMBPE_ES_*)
    .chunks:    resq 1                          ; chunks split
    .hits:      resq 1                          ; chunks not encoded (found)
    .longs:     resq 1                          ; chunks that took the heap path
    .cyc_pretok: resq 1                         ; cycles: pre-tokenizing
    .cyc_cache: resq 1                          ; the passes, less merging
    .cyc_merge: resq 1                          ; misses and uncached chunks
    .cyc_write: resq 1                          ; moving ids into order
    .cyc_total: resq 1                          ; the whole worker
endstruc
%define ES_COUNT    (estats_size / 8)           ; ASMBPE_ES_COUNT

FUNC asmbpe_enc_stats, 3, 7, 0, e, tid, out
    xor         eax, eax
    mov         ecx, ES_COUNT
.zero:
    mov         [outq + rcx * 8 - 8], rax
    dec         ecx
    jnz         .zero
    xor         ecx, ecx
    mov         r10d, MAX_THREADS
    cmp         tidq, MAX_THREADS
    jae         .thread
    mov         rcx, tidq                       ; one thread: [tid, tid + 1)
    lea         r10, [rcx + 1]
.thread:
    mov         r8, [eq + enc.ts + rcx * 8]
    test        r8, r8
    jz          .next
    mov         rax, [r8 + tstate.chunks]
    add         [outq + estats.chunks], rax
    mov         rax, [r8 + tstate.chunks]       ; hits: the chunks not encoded
    sub         rax, [r8 + tstate.encoded]
    add         [outq + estats.hits], rax
    mov         rax, [r8 + tstate.longs]
    add         [outq + estats.longs], rax
    mov         rax, [r8 + tstate.cyc_pretok]
    add         [outq + estats.cyc_pretok], rax
    mov         rax, [r8 + tstate.cyc_pass]
    sub         rax, [r8 + tstate.cyc_merge]
    add         [outq + estats.cyc_cache], rax
    mov         rax, [r8 + tstate.cyc_merge]
    add         [outq + estats.cyc_merge], rax
    mov         rax, [r8 + tstate.cyc_write]
    add         [outq + estats.cyc_write], rax
    mov         rax, [r8 + tstate.cyc_total]
    add         [outq + estats.cyc_total], rax
.next:
    inc         ecx
    cmp         ecx, r10d
    jb          .thread
    RET
ENDFUNC
